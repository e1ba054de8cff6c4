"""kq up / down / status: the local stack as background processes in a state dir."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from kq.cli.busread import BusReadError, connected, stack_nats
from kq.cli.objects import Streams
from kq.cli.tables import Table, render
from kq.cli.target import stack_dir
from kq.config import ConfigError, KueueConfig, load_kueue_config, unused_fields
from kq.installed import installed_services
from kq.stack import Stack, StackError, StateError, is_alive, read_state, stop_stack
from kq.stack.health import http_readiness, instance_status
from kq.stack.state import StackState, write_state
from kq.stack.supervise import spawn_detached


def _kueue_config(path: str | None) -> KueueConfig | None:
    """Kueue's Configuration file (v1beta2 or v1beta1): every field Kueue documents is accepted;
    an unknown field or a bad value is refused, naming it."""
    if not path:
        return None
    try:
        return load_kueue_config(path)
    except ConfigError as e:
        raise StackError(f"--kueue-config {e}") from None


def _replicas(specs: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for spec in specs:
        name, sep, n = spec.partition("=")
        if not sep or not name or not n.isdigit() or int(n) < 1:
            raise StackError(f"--replicas {spec!r}: expected SERVICE=N with N >= 1")
        out[name] = int(n)
    return out


async def cmd_up(args: argparse.Namespace, io: Streams) -> int:
    d = stack_dir(args)
    replicas = _replicas(args.replicas)

    def say(line: str) -> None:
        print(line, file=io.out, flush=True)

    kueue = _kueue_config(args.kueue_config)
    if kueue is not None and (unused := unused_fields(kueue, installed_services())):
        say(f"kueue configuration: kq does not use {', '.join(unused)}")
    stack = Stack(d, kueue_config=kueue, detach=True, timeout_s=args.timeout,
                  progress=say, log_level=args.log_level, replicas=replicas,
                  kubesim_args=("--sleep-scale", str(args.sleep_scale)), secure=args.secure,
                  nats_cluster=args.nats_cluster)
    unknown = sorted(set(replicas) - set(stack.services))
    if unknown:
        raise StackError(f"--replicas: no service {', '.join(unknown)} (services: {', '.join(stack.services)})")
    state = await stack.up()
    state = supervised(state)
    say(f"stack is up: nats {state.nats_url}, kubesim {state.kubesim_url}")
    for c in state.clusters:
        say(f"  cluster {c.name} ({c.role}): kubeconfig {c.kubeconfig}")
    say(f"logs in {Path(state.dir) / 'logs'}; stop it with `kq down{_dir_flag(args)}`")
    return 0


def supervised(state: StackState) -> StackState:
    """The stack with its supervisor (restarts what dies) recorded beside the processes it watches."""
    rec = spawn_detached(Path(state.dir), Path(state.dir) / "logs" / "supervisor.log")
    state = msgspec.structs.replace(state, processes=(*state.processes, rec))
    write_state(state)
    return state


def _age(since: str) -> str:
    try:
        s = int((datetime.now(UTC) - datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC))
                .total_seconds())
    except ValueError:
        return "-"
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h"


def _dir_flag(args: argparse.Namespace) -> str:
    return f" --dir {args.dir}" if getattr(args, "dir", None) else ""


async def cmd_down(args: argparse.Namespace, io: Streams) -> int:
    d = stack_dir(args)
    try:
        read_state(d)
    except StateError:
        print(f"no stack running in {d}: nothing to stop", file=io.err)
        return 0
    print(f"stopping the local stack in {d.resolve()}", file=io.out, flush=True)
    killed = await stop_stack(d, grace_s=args.grace, progress=lambda line: print(line, file=io.out, flush=True))
    if killed:
        print(f"killed after {args.grace}s: {', '.join(killed)}", file=io.err)
    print("stack is down", file=io.out)
    return 0


async def cmd_status(args: argparse.Namespace, io: Streams) -> int:
    state = read_state(stack_dir(args))
    alive = {p.name: is_alive(p) for p in state.processes}
    health: dict[str, str] = {}
    ready: dict[str, str] = {}  # what each instance's /readyz says (the kubelet's view)
    metrics: dict[str, str] = {}
    services = [p for p in state.processes if p.role == "service" and alive[p.name]]
    if services and any(alive[p.name] for p in state.processes if p.role == "nats"):  # any node of a cluster
        try:
            async with connected(stack_nats(state.nats_url, state.config), connect_timeout_s=2.0) as bus:
                for p in services:
                    st = await instance_status(bus.nc, p.service or p.name, p.instance or "0", window_s=1.0)
                    health[p.name] = st.status if st is not None else "no answer"
                    if st is not None and st.http_port is not None:
                        ready[p.name] = await http_readiness(st.http_port)
                        metrics[p.name] = f"http://127.0.0.1:{st.http_port}/metrics"
        except BusReadError as e:
            print(f"warning: {e}", file=io.err)
    print(f"stack in {state.dir} (started {state.started_at})", file=io.out)
    print(f"nats:    {state.nats_url}", file=io.out)
    print(f"kubesim: {state.kubesim_url}", file=io.out)
    for c in state.clusters:
        print(f"cluster: {c.name} ({c.role}) kubeconfig {c.kubeconfig}", file=io.out)
    print(file=io.out)
    # RESTARTS and AGE as kubectl shows them for pods: how often the supervisor started it again
    # and since when the current process runs.
    rows = [(p.name, str(p.pid), "running" if alive[p.name] else "exited", str(p.restarts),
             _age(p.last_restart or state.started_at), health.get(p.name, "-"),
             ready.get(p.name, "-"), metrics.get(p.name, "-"), p.log)
            for p in state.processes]
    io.out.write(render(Table(("PROCESS", "PID", "STATE", "RESTARTS", "AGE", "HEALTH", "READY", "METRICS", "LOG"),
                              rows)))
    bad = [p.name for p in state.processes if not alive[p.name]]
    bad += [n for n, h in health.items() if h not in ("ready", "standby")]
    bad += [n for n, r in ready.items() if r != "ready"]
    if bad:
        print(f"not healthy: {', '.join(sorted(set(bad)))}", file=io.err)
        return 1
    return 0
