"""`kq bench --podsready N`: the pods-ready timer service under N admitted workloads with live timers.

A real nats-server and the podsready service as its own process (no Kubernetes: the bench plays
the watcher). It publishes N admitted Workloads to the mirror (at most --rate per second), each with
PodsReady=False; with the default 30 s timeout all N timers are live at once. Half of them (the
even ones) become ready half-way to their deadline, the other half time out. It reads the commands
the service sends (KQ_CMD) and reports:

- lateness of each PodsReadyTimeout eviction: when the command was stored in KQ_CMD (the server's
  clock) minus the deadline (the Admitted condition's time, whole seconds as in Kubernetes, plus the
  timeout), p50/p99/max; and when this process saw it (seenLatenessMs);
- wrong decisions: a ready workload evicted, or a timed-out one never evicted;
- the service's CPU time, per workload.

Goal (issue 8): p99 lateness under 250 ms at N = 10,000.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import nats
import yaml

from kq import subjects
from kq.bench.child import stop_child
from kq.bench.procstats import process_stats
from kq.config import ClusterConfig, Config, KueueConfig, NatsConfig, RequeuingStrategy, WaitForPodsReady
from kq.messages import EvictWorkload, command_decoder
from kq.mirror import mirror_msg_id, record_headers
from kq.natsserver import NatsServer
from kq.runtime import Bus, OutMsg
from kq.stack.health import instance_status

CLUSTER = "manager"
NAMESPACE = "bench"
_encoder = msgspec.json.Encoder()


def _ts(at: float) -> str:
    return datetime.fromtimestamp(int(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def workload_doc(i: int, rv: int, admitted: str, ready: bool, ready_at: str) -> dict:
    cond = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "bench",
         "lastTransitionTime": admitted},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "bench",
         "lastTransitionTime": admitted},
        {"type": "PodsReady", "status": "True" if ready else "False", "reason": "Started" if ready else "WaitForStart",
         "message": "bench", "lastTransitionTime": ready_at if ready else admitted},
    ]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"w{i:06d}", "namespace": NAMESPACE, "uid": f"uid-{i}", "resourceVersion": str(rv),
                         "generation": 1},
            "spec": {"queueName": "lq", "podSets": []},
            "status": {"conditions": cond, "admission": {"clusterQueue": "cq", "podSetAssignments": []}}}


def _record(i: int, rv: int, admitted: str, ready: bool, ready_at: str = "") -> OutMsg:
    subject = subjects.object_subject(CLUSTER, "workload", NAMESPACE, f"w{i:06d}")
    return OutMsg(subject, _encoder.encode(workload_doc(i, rv, admitted, ready, ready_at)),
                  mirror_msg_id(CLUSTER, "workload", NAMESPACE, f"w{i:06d}", str(rv), "put"),
                  record_headers("put", str(rv), f"uid-{i}"))


async def _stored_times(bus: Bus) -> dict[str, float]:
    """When each EvictWorkload was stored in KQ_CMD (the server's clock): the first per workload."""
    info = await bus.js.stream_info(subjects.COMMANDS_STREAM)
    first, last = info.state.first_seq, info.state.last_seq
    out: dict[str, float] = {}
    sem = asyncio.Semaphore(64)

    async def get(seq: int) -> None:
        async with sem:
            try:
                raw = await bus.js.get_msg(subjects.COMMANDS_STREAM, seq=seq)
            except Exception:  # noqa: BLE001 - a gap (deleted message) has no time
                return
        cmd = command_decoder.decode(raw.data or b"")
        if isinstance(cmd, EvictWorkload) and raw.time is not None:
            t = raw.time.timestamp()
            out[cmd.name] = min(t, out.get(cmd.name, t))

    await asyncio.gather(*(get(q) for q in range(first, last + 1)))
    return out


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def _wait_ready(nc: nats.NATS, proc: asyncio.subprocess.Process, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            raise RuntimeError(f"podsready exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        st = await instance_status(nc, "podsready", "0")
        if st is not None and st.status == "ready":
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"podsready not ready within {timeout}s:\n{log.read_text()[-3000:]}")


async def run_bench(n: int, timeout_s: float, rate: float, workdir: Path, say) -> dict:
    async with NatsServer(store_dir=workdir / "nats", log_file=workdir / "nats.log") as server:
        cfg = Config(nats=NatsConfig(url=server.url),
                     clusters=(ClusterConfig(name=CLUSTER, kubeconfig=str(workdir / "none.kubeconfig")),),
                     kueue=KueueConfig(wait_for_pods_ready=WaitForPodsReady(
                         timeout=f"{timeout_s:g}s", requeuing_strategy=RequeuingStrategy(backoff_base_seconds=600))))
        (workdir / "config.yaml").write_text(yaml.safe_dump(msgspec.to_builtins(cfg)))
        bus = await Bus.connect(cfg.nats, "kq-bench")
        await bus.ensure_streams()
        log = workdir / "podsready.log"
        env = {**os.environ, "KQ_CONFIG": str(workdir / "config.yaml"), "KQ_INSTANCE": "0", "KQ_LOG_LEVEL": "warning"}
        with open(log, "wb") as out:
            proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "services.podsready", env=env,
                                                        stdout=out, stderr=asyncio.subprocess.STDOUT)
        try:
            await _wait_ready(bus.nc, proc, log)
            say(f"podsready ready (pid {proc.pid}); publishing {n} admitted workloads at {rate:g}/s, "
                f"timeout {timeout_s:g}s")
            cpu0 = (process_stats("podsready", proc.pid) or None)
            deadlines: dict[str, float] = {}
            evicted: dict[str, float] = {}
            wrong: list[str] = []
            ready_late: set[str] = set()  # ready records this process published too close to the deadline
            done = asyncio.Event()

            async def on_cmd(msg) -> None:
                cmd = command_decoder.decode(msg.data)
                if not isinstance(cmd, EvictWorkload):
                    return
                stored = time.time()  # the command as it reaches the bus (a core subscription sees the publish)
                i = int(cmd.name[1:])
                if i % 2 == 0 and cmd.name not in ready_late:
                    wrong.append(f"{cmd.name} was ready and got evicted")
                evicted.setdefault(cmd.name, stored)
                if len(evicted) >= n // 2 + len(wrong):
                    done.set()

            sub = await bus.nc.subscribe(subjects.command_filter(CLUSTER), cb=on_cmd)
            # Phase 1: every workload admitted, as fast as the bus takes them (at most `rate` per second),
            # so that with a long enough timeout all N timers are live at once.
            t0 = time.time()
            readies: list[tuple[float, int, str]] = []  # (when, i, admitted)
            for start in range(0, n, 500):
                due = t0 + start / rate
                if (wait := due - time.time()) > 0:
                    await asyncio.sleep(wait)
                admitted_s = int(time.time())
                admitted = _ts(admitted_s)
                batch = []
                for i in range(start, min(n, start + 500)):
                    deadlines[f"w{i:06d}"] = admitted_s + timeout_s
                    batch.append(_record(i, 1, admitted, False))
                    if i % 2 == 0:
                        readies.append((admitted_s + timeout_s / 2, i, admitted))
                await bus.publish_many(batch)
            say(f"{n} admitted in {time.time() - t0:.1f}s; the even ones become ready half-way to their deadline")
            # Phase 2: the even half becomes ready at admission + timeout/2.
            late_ready = 0
            readies.sort()
            while readies:
                at = readies[0][0]
                if (wait := at - time.time()) > 0:
                    await asyncio.sleep(wait)
                batch = []
                while readies and readies[0][0] <= max(at, time.time()):
                    _, i, admitted = readies.pop(0)
                    batch.append(_record(i, 2, admitted, True, _ts(int(at))))
                    if time.time() > deadlines[f"w{i:06d}"] - 0.5:
                        late_ready += 1
                        ready_late.add(f"w{i:06d}")
                await bus.publish_many(batch)
            say(f"ready ones published ({late_ready} too late to count); waiting for the evictions")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), timeout=timeout_s + 30)
            await asyncio.sleep(1.0)  # any eviction of a ready workload would show by now
            cpu1 = process_stats("podsready", proc.pid)
            await sub.unsubscribe()
            stored = await _stored_times(bus)
        finally:
            await stop_child(proc, grace_s=15)
            await bus.close()
    timed_out = {f"w{i:06d}" for i in range(1, n, 2)}
    lateness = [stored[name] - deadlines[name] for name in stored if name in timed_out]
    seen = [evicted[name] - deadlines[name] for name in evicted if name in timed_out]
    expected = n // 2
    missing = [f"w{i:06d}" for i in range(1, n, 2) if f"w{i:06d}" not in evicted]
    cpu_ms = (cpu1.cpu_ms - (cpu0.cpu_ms if cpu0 else 0)) if cpu1 else None
    return {
        "workloads": n, "timeoutSeconds": timeout_s, "ratePerSecond": rate,
        "evictions": len(evicted), "expectedEvictions": expected, "missed": len(missing),
        "wrongEvictions": len(wrong), "readyPublishedTooLate": len(ready_late),
        "latenessMs": {"p50": round(_pct(lateness, 0.50) * 1000, 1), "p99": round(_pct(lateness, 0.99) * 1000, 1),
                       "max": round(max(lateness, default=float("nan")) * 1000, 1),
                       "min": round(min(lateness, default=float("nan")) * 1000, 1)},
        "seenLatenessMs": {"p50": round(_pct(seen, 0.50) * 1000, 1), "p99": round(_pct(seen, 0.99) * 1000, 1)},
        "serviceCpuMs": cpu_ms,
        "cpuMsPerWorkload": round(cpu_ms / n, 3) if cpu_ms is not None else None,
        "serviceMaxRssMiB": round(cpu1.max_rss_bytes / 2**20, 1) if cpu1 else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kq bench --podsready", description=__doc__.split("\n\n")[0])
    p.add_argument("--podsready", type=int, required=True, metavar="N", help="admitted workloads with live timers")
    p.add_argument("--timeout-s", type=float, default=30.0,
                   help="waitForPodsReady.timeout (default 30s: all timers are live at once)")
    p.add_argument("--rate", type=float, default=2000.0, help="workloads admitted per second at most (default 2000)")
    p.add_argument("--workdir", type=Path, help="keep the bus store and logs here")
    p.add_argument("--goal-p99-ms", type=float, default=250.0)
    args = p.parse_args(argv)
    if args.podsready < 2 or args.timeout_s <= 0 or args.rate <= 0:
        print("error: --podsready >= 2, --timeout-s > 0, --rate > 0", file=sys.stderr)
        return 2

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="kq-bench-podsready-") as tmp:
        wd = args.workdir or Path(tmp)
        wd.mkdir(parents=True, exist_ok=True)
        res = asyncio.run(run_bench(args.podsready, args.timeout_s, args.rate, wd, say))
    print(yaml.safe_dump(res, sort_keys=False), end="")
    ok = (res["missed"] == 0 and res["wrongEvictions"] == 0 and res["evictions"] == res["expectedEvictions"]
          and res["latenessMs"]["p99"] < args.goal_p99_ms)
    return 0 if ok else 1
