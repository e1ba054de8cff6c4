"""The local stack: nats-server, kubesim and every service, each its own child process.

`kq up` starts one detached (it keeps running after the command returns, stack.json
says where); the scenario harness and the tests use it in-process:

    async with Stack(tmp_dir, kueue_config={...}) as s:
        s.nats_url, s.kubeconfig("manager"), await s.kill("admission"), ...

Everything lives in the state dir: the JetStream store (nats/), the kubeconfigs
kubesim writes (kubeconfigs/), the generated config.yaml, one log per process
(logs/<process>.log) and stack.json. Start-up waits for each part (the server's
log line, kubesim's ready line, each service's health answer) within one bounded
timeout; on failure it shows the failing process's last log lines and stops what
it had started.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import yaml

from kq.config import (
    MAX_STREAM_REPLICAS,
    AdmissionConfig,
    ClusterConfig,
    Config,
    ConfigError,
    KueueConfig,
    NatsConfig,
    kueue_config_from,
)
from kq.installed import installed_services
from kq.natsserver import NatsServerError
from kq.runtime.bus import Bus
from kq.stack.health import HEALTHY, instance_status
from kq.stack.natsnodes import NatsNodes
from kq.stack.process import ChildProcess, is_alive, log_tail, stop_pids
from kq.stack.secrets import KQ_NAMESPACE, give_worker_kubeconfigs, kueue_docs_secret_name
from kq.stack.state import ClusterRecord, StackState, read_state, remove_state, state_path, write_state
from kq.stack.supervise import Restart, RestartPolicy, Supervisor
from kq.stack.supervised import SupervisedChildren, with_port

if TYPE_CHECKING:
    from kq.stack.secure import SecureBus

ClusterSpec = tuple[str, str]  # (name, role)
DEFAULT_CLUSTERS: tuple[ClusterSpec, ...] = (("manager", "manager"), ("worker-1", "worker"), ("worker-2", "worker"))
DEFAULT_TIMEOUT_S = 60.0
Progress = Callable[[str], None]

_KUBESIM_READY = re.compile(r"kubesim ready (\S+)")
_POLL_S = 0.05
# Variables config.py reads: a user's own settings must not leak into the stack's services.
_OWN_ENV = ("KQ_CONFIG", "KQ_NATS_URL", "KQ_INSTANCE", "KQ_LOG_LEVEL", "KQ_HTTP_PORT")


class StackError(RuntimeError):
    pass


discover_services = installed_services


def process_name(service: str, instance: str) -> str:
    return service if instance == "0" else f"{service}-{instance}"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _kueue(config: KueueConfig | Mapping[str, Any] | None) -> KueueConfig:
    if config is None:
        return KueueConfig()
    if isinstance(config, KueueConfig):
        return config
    try:
        return kueue_config_from(config, "kueue configuration")
    except ConfigError as e:
        raise StackError(str(e)) from None


class Stack(SupervisedChildren):
    def __init__(
        self,
        dir: str | os.PathLike[str],
        *,
        kueue_config: KueueConfig | Mapping[str, Any] | None = None,
        clusters: Sequence[ClusterSpec] = DEFAULT_CLUSTERS,
        services: Sequence[str] | None = None,
        replicas: Mapping[str, int] | None = None,
        detach: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        log_level: str = "info",
        progress: Progress | None = None,
        kubesim_args: Sequence[str] = (),
        supervise: bool = False,
        restart_policy: RestartPolicy | None = None,
        on_restart: Callable[[Restart], None] | None = None,
        secure: bool = False,
        nats_cluster: int = 1,
    ) -> None:
        if not clusters:
            raise StackError("a stack needs at least one cluster")
        roles = {role for _, role in clusters}
        if not roles <= {"manager", "worker"}:
            raise StackError(f"cluster roles must be manager or worker, got {sorted(roles)}")
        if not 1 <= nats_cluster <= MAX_STREAM_REPLICAS:  # one stream copy per node
            raise StackError(f"--nats-cluster: want 1 to {MAX_STREAM_REPLICAS} nodes, got {nats_cluster}")
        self.dir = Path(dir).resolve()
        self.kueue_config = _kueue(kueue_config)
        self.clusters = tuple(clusters)
        self.services = list(services) if services is not None else discover_services()
        self.replicas = dict(replicas or {})
        self.detach = detach
        self.timeout_s = timeout_s
        self.log_level = log_level
        self._progress = progress or (lambda _line: None)
        self._kubesim_args = tuple(kubesim_args)
        self.secure: SecureBus | None = None
        if secure:  # a closed bus: TLS and a NATS user per service (cryptography and nkeys: imported only then)
            from kq.stack.secure import SecureBus
            self.secure = SecureBus(self.dir)
        self.logs_dir = self.dir / "logs"
        self.config_path = self.dir / "config.yaml"
        self.nats_cluster = nats_cluster  # nats-server processes forming one JetStream cluster (R<n> streams)
        self._nats: NatsNodes | None = None
        self._nats_held: set[str] = set()
        self._kubesim: ChildProcess | None = None
        self._services: dict[str, ChildProcess] = {}
        self._bus: Bus | None = None
        self._nats_url: str | None = None
        self._kubesim_url: str | None = None
        self._kubeconfigs: dict[str, str] = {}
        self.state: StackState | None = None
        self._owns_dir = False  # set once this stack claimed the dir (so down() may clear its state)
        # In-process supervision (detached stacks get a supervisor process from `kq up` instead).
        self.supervisor: Supervisor | None = (Supervisor(restart_policy, on_restart) if supervise and not detach
                                              else None)
        self._supervising: asyncio.Task[None] | None = None

    # -- what callers use ---------------------------------------------------------------------

    @property
    def nats_url(self) -> str:
        if self._nats_url is None:
            raise StackError("the stack is not started")
        return self._nats_url

    @property
    def kubesim_url(self) -> str:
        if self._kubesim_url is None:
            raise StackError("the stack is not started")
        return self._kubesim_url

    @property
    def bus(self) -> Bus:
        """The stack's own bus connection (in-process stacks, while up)."""
        if self._bus is None:
            raise StackError("the stack is not started (or was started detached)")
        return self._bus

    def kubeconfig(self, cluster: str) -> str:
        try:
            return self._kubeconfigs[cluster]
        except KeyError:
            raise StackError(f"no cluster {cluster!r} in this stack ({', '.join(self._kubeconfigs)})") from None

    def log_path(self, process: str) -> Path:
        return self.logs_dir / f"{process}.log"

    def nats_config(self) -> NatsConfig:
        cfg = self.secure.nats_config(self.nats_url) if self.secure else NatsConfig(url=self.nats_url)
        return msgspec.structs.replace(cfg, stream_replicas=self.nats_cluster)

    async def __aenter__(self) -> Stack:
        await self.up()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.down()

    # -- start -----------------------------------------------------------------------------------

    async def up(self) -> StackState:
        deadline = time.monotonic() + self.timeout_s
        self._prepare_dir()
        self._owns_dir = True
        self._progress(f"starting the local stack in {self.dir}")
        try:
            await self._start_nats(deadline)
            await self._start_kubesim(deadline)
            await self._give_worker_kubeconfigs()
            self._write_config()
            self._bus = await Bus.connect(self.nats_config(), "kq-stack", connect_timeout_s=self._left(deadline))
            await self._ensure_streams(deadline)
            await self._start_services(deadline)
            self._supervise()
        except BaseException as e:
            await self._abort()
            if isinstance(e, (StackError, asyncio.CancelledError, KeyboardInterrupt)):
                raise
            raise StackError(f"{type(e).__name__}: {e}") from e
        self.state = self._snapshot()
        write_state(self.state)
        if self.detach:
            await self._close_bus()
            for child in self._children():
                child.release()
        return self.state

    def _left(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise StackError(f"the stack was not up within {self.timeout_s}s")
        return left

    def _prepare_dir(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if state_path(self.dir).exists():
            try:
                old = read_state(self.dir)
            except Exception:
                old = None
            if old is not None and any(is_alive(p) for p in old.processes):
                raise StackError(f"a stack is already running in {self.dir}; stop it with `kq down --dir {self.dir}`")
            remove_state(self.dir)
        # kubesim keeps its clusters in memory: a mirror left from an earlier run would describe
        # objects that no longer exist, so every start begins with an empty store.
        for sub in ("nats", "kubeconfigs", "logs"):
            shutil.rmtree(self.dir / sub, ignore_errors=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)

    async def _start_nats(self, deadline: float) -> None:
        t0 = time.monotonic()
        closed = self.secure.create(cluster=self.nats_cluster > 1).server_args() if self.secure else ()
        self._nats = NatsNodes(self.dir / "nats", self.logs_dir, self.nats_cluster, detach=self.detach,
                               extra_args=closed)
        try:
            await self._nats.start(self._left(deadline))
        except NatsServerError as e:
            raise StackError(f"nats-server did not start: {e}") from None
        self._nats_url = self._nats.url
        what = f"  JetStream cluster of {self.nats_cluster}, R{self.nats_cluster} streams" if self.nats_cluster > 1 \
            else ""
        self._progress(_line("nats-server", "ready", f"{self._nats_url}{what}", t0))

    async def _ensure_streams(self, deadline: float) -> None:
        """Create kq's streams; a new JetStream cluster first elects its meta leader and meets its
        peers (an R3 stream needs all three), so until then a cluster's refusals are retried."""
        assert self._bus is not None
        while True:
            try:
                await self._bus.ensure_streams(force=True)
                return
            except Exception:
                if self.nats_cluster == 1 or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def _start_kubesim(self, deadline: float) -> None:
        t0 = time.monotonic()
        kdir = self.dir / "kubeconfigs"
        kdir.mkdir(parents=True, exist_ok=True)
        names = [name for name, _ in self.clusters]
        argv = [sys.executable, "-m", "kubesim", "--clusters", ",".join(names), "--port", "0",
                "--kubeconfig-dir", str(kdir), *self._kueue_webhook_args(), *self._kubesim_args]
        self._kubesim = ChildProcess.spawn("kubesim", "kubesim", argv, self.log_path("kubesim"),
                                           env=self._env(), cwd=self.dir, detach=self.detach,
                                           record_env=self._own_env())
        while True:
            m = _KUBESIM_READY.search(_read(self.log_path("kubesim")))
            if m:
                self._kubesim_url = m.group(1)
                break
            self._check_alive(self._kubesim, "before it was ready")
            if time.monotonic() > deadline:
                raise self._failure(self._kubesim, f"not ready within {self.timeout_s}s")
            await asyncio.sleep(_POLL_S)
        for name in names:
            self._kubeconfigs[name] = str(_find_kubeconfig(kdir, name))
        self._progress(_line("kubesim", "ready", f"{self._kubesim_url}  clusters {', '.join(names)}", t0))

    def _kueue_webhook_args(self) -> list[str]:
        """kubesim plays Kueue's webhooks: they need the Kueue configuration's job-management fields."""
        cfg, out = self.kueue_config, []
        if cfg.manage_jobs_without_queue_name:
            out.append("--manage-jobs-without-queue-name")
        if cfg.managed_jobs_namespace_selector is not None:
            out += ["--managed-jobs-namespace-selector",
                    msgspec.json.encode(cfg.managed_jobs_namespace_selector).decode()]
        if cfg.namespace:
            out += ["--kueue-namespace", cfg.namespace]
        return out

    async def _give_worker_kubeconfigs(self) -> None:
        managers = [n for n, r in self.clusters if r == "manager"]
        workers = {n: self._kubeconfigs[n] for n, r in self.clusters if r == "worker"}
        if managers and workers:
            names = await give_worker_kubeconfigs(self._kubeconfigs[managers[0]], workers)
            docs = ", ".join(kueue_docs_secret_name(w) for w in sorted(workers))
            self._progress(f"  {'secrets':<14} ready    {', '.join(names)} in {managers[0]}/{KQ_NAMESPACE} "
                           f"(also as {docs}, as Kueue's docs name them)")

    def _write_config(self) -> None:
        cfg = Config(
            nats=self.nats_config(),
            clusters=tuple(ClusterConfig(name=n, kubeconfig=self._kubeconfigs[n], role=r) for n, r in self.clusters),
            kueue=self.kueue_config,
            # N admission replicas share N slots of cohort trees (sharded admission, one slot each)
            admission=AdmissionConfig(shards=n) if (n := self.replicas.get("admission", 1)) > 1 else AdmissionConfig(),
            log_level=self.log_level,
        )
        text = yaml.safe_dump(msgspec.to_builtins(cfg), sort_keys=False)
        self.config_path.write_text(f"# generated by kq's local stack; every service reads it (KQ_CONFIG)\n{text}")

    def _own_env(self, instance: str | None = None) -> dict[str, str]:
        """The variables the stack sets for a child (recorded, so that a supervisor can restart it)."""
        env = {"PYTHONUNBUFFERED": "1"}  # log lines reach the file as they happen
        if instance is not None:
            env["KQ_CONFIG"] = str(self.config_path)
            env["KQ_INSTANCE"] = instance
            env["KQ_HTTP_PORT"] = "0"  # any free port: /metrics and probes, announced in the health answer
        return env

    def _env(self, instance: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _OWN_ENV}
        env.update(self._own_env(instance))
        return env

    def _instances(self) -> list[tuple[str, str]]:
        return [(svc, str(i)) for svc in self.services for i in range(max(1, self.replicas.get(svc, 1)))]

    async def _start_services(self, deadline: float) -> None:
        for svc, inst in self._instances():
            self._spawn_service(svc, inst)
        await asyncio.gather(*(self._wait_healthy(svc, inst, deadline) for svc, inst in self._instances()))

    def _spawn_service(self, service: str, instance: str) -> ChildProcess:
        name = process_name(service, instance)
        if name in self._services and self._services[name].exit_code() is None:
            raise StackError(f"{name} is already running")
        child = ChildProcess.spawn(name, "service", [sys.executable, "-m", f"services.{service}"],
                                   self.log_path(name), env=self._env(instance), cwd=self.dir,
                                   detach=self.detach, service=service, instance=instance,
                                   record_env=self._own_env(instance))
        self._services[name] = child
        return child

    async def _wait_healthy(self, service: str, instance: str, deadline: float) -> None:
        assert self._bus is not None
        t0 = time.monotonic()
        child = self._services[process_name(service, instance)]
        last = "no answer"
        while True:
            self._check_alive(child, "before it was healthy")
            st = await instance_status(self._bus.nc, service, instance)
            if st is not None and st.status in HEALTHY:
                self._progress(_line(child.name, st.status, "", t0))
                return
            if st is not None:
                last = f"status {st.status}"
            if time.monotonic() > deadline:
                raise self._failure(child, f"not healthy within {self.timeout_s}s (last answer: {last})")
            if st is not None:  # it answered at once: ask again after a pause, not in a loop competing for CPU
                await asyncio.sleep(_POLL_S)

    def _check_alive(self, child: ChildProcess, when: str) -> None:
        code = child.exit_code()
        if code is not None:
            raise self._failure(child, f"exited with code {code} {when}")

    def _failure(self, child: ChildProcess, why: str) -> StackError:
        return StackError(f"{child.name} {why}; last lines of {child.record.log}:\n{log_tail(child.record.log)}")

    def _snapshot(self) -> StackState:
        assert self._nats is not None
        nats_recs = self._nats.records()
        procs = nats_recs + [c.record for c in self._children()]
        if self._kubesim is not None:  # restarted on the port its kubeconfigs name
            k = self._kubesim.record
            procs[len(nats_recs)] = msgspec.structs.replace(k, argv=with_port(k.argv, "--port", self._kubesim_port()))
        return StackState(
            dir=str(self.dir), nats_url=self.nats_url, kubesim_url=self.kubesim_url, config=str(self.config_path),
            clusters=tuple(ClusterRecord(name=n, role=r, kubeconfig=self._kubeconfigs[n]) for n, r in self.clusters),
            processes=tuple(procs), started_at=_now(),
        )

    def _kubesim_port(self) -> int:
        return int(self.kubesim_url.rsplit(":", 1)[1])

    def _children(self) -> list[ChildProcess]:
        kids = [self._kubesim] if self._kubesim is not None else []
        return kids + list(self._services.values())

    # -- stop ------------------------------------------------------------------------------------

    async def down(self, grace_s: float = 10.0) -> None:
        """Services first (they drain while the bus is up), then kubesim, then nats-server."""
        if self._supervising is not None:
            task, self._supervising = self._supervising, None
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._close_bus()
        services = list(self._services.values())
        self._services.clear()
        await stop_pids([c.record for c in services], grace_s=grace_s, owned={c.record.pid: c.popen for c in services})
        if self._kubesim is not None:
            k, self._kubesim = self._kubesim, None
            await stop_pids([k.record], grace_s=grace_s, owned={k.record.pid: k.popen})
        if self._nats is not None:
            n, self._nats = self._nats, None
            await n.stop(grace_s)
        if self._owns_dir:
            remove_state(self.dir)
            self._owns_dir = False
        self.state = None

    async def _abort(self) -> None:
        try:
            await self.down(grace_s=3.0)
        except Exception as e:  # the start-up error is the one to report
            self._progress(f"while stopping after a failed start: {e}")

    async def _close_bus(self) -> None:
        if self._bus is not None:
            bus, self._bus = self._bus, None
            await bus.close()

    # -- faults (tests) ----------------------------------------------------------------------------

    async def kill(self, service: str, instance: str = "0", *, sig: signal.Signals = signal.SIGKILL,
                   timeout_s: float = 10.0) -> int:
        """Signal one service instance and wait until it exited; returns its exit code."""
        name = process_name(service, instance)
        child = self._services.get(name)
        if child is None:
            raise StackError(f"no process {name} in this stack ({', '.join(self._services) or 'none'})")
        if child.exit_code() is None:
            child.popen.send_signal(sig)
        try:
            code = await asyncio.wait_for(asyncio.to_thread(child.popen.wait), timeout_s)
        except TimeoutError:
            raise StackError(f"{name} still running {timeout_s}s after {sig.name}") from None
        del self._services[name]
        if self.supervisor is not None:
            self.supervisor.forget(name)  # stopped on purpose: not to be restarted
        return code

    async def start(self, service: str, instance: str = "0", *, timeout_s: float | None = None) -> None:
        """Start one service instance (again) and wait for its health answer."""
        if self._bus is None:
            raise StackError("the stack is not started (or was started detached)")
        if service not in self.services:
            self.services.append(service)
        self._spawn_service(service, instance)
        self._watch_service(process_name(service, instance))
        await self._wait_healthy(service, instance, time.monotonic() + (timeout_s or self.timeout_s))

    def process(self, service: str, instance: str = "0") -> ChildProcess | None:
        return self._services.get(process_name(service, instance))


async def stop_stack(stack_dir: str | os.PathLike[str], *, grace_s: float = 10.0,
                     progress: Progress | None = None) -> list[str]:
    """Stop a stack another process started (kq down): by the pids in stack.json. Returns the names killed hard."""
    say = progress or (lambda _line: None)
    state = read_state(stack_dir)
    groups = [[p for p in state.processes if p.role == "supervisor"],  # first: it would restart the rest
              [p for p in state.processes if p.role == "service"],
              [p for p in state.processes if p.role == "kubesim"],
              [p for p in state.processes if p.role == "nats"]]
    killed: list[str] = []
    for group in groups:
        live = [p for p in group if is_alive(p)]
        if not live:
            continue
        t0 = time.monotonic()
        hard = await stop_pids(live, grace_s=grace_s)
        killed += hard
        for p in live:
            say(_line(p.name, "killed" if p.name in hard else "stopped", "", t0))
    remove_state(stack_dir)
    return killed


def _line(name: str, status: str, detail: str, t0: float) -> str:
    took = f"({time.monotonic() - t0:.1f}s)"
    return f"  {name:<14} {status:<8} {detail + '  ' if detail else ''}{took}"


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _find_kubeconfig(kdir: Path, cluster: str) -> Path:
    for candidate in (f"{cluster}.kubeconfig", f"{cluster}.yaml", f"{cluster}.kubeconfig.yaml", cluster,
                      f"kubeconfig-{cluster}", f"{cluster}-kubeconfig.yaml"):
        p = kdir / candidate
        if p.is_file():
            return p
    found = ", ".join(sorted(p.name for p in kdir.iterdir())) or "nothing"
    raise StackError(f"kubesim wrote no kubeconfig for cluster {cluster!r} in {kdir} (found {found})")
