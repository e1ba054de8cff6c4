"""A chaos run: the whole stack under load while faults are injected at seeded random points,
then the invariant checker over everything that happened.

    result = await run_chaos(ChaosConfig(dir=..., workloads=300, seed=7))
    result.ok, result.summary()

Jobs are created through the manager's API at `rate` per second, with at most `backlog`
unfinished at once; faults follow each other, `gap_s` apart (seeded), from `faults` in a
seeded order until every kind has been injected and every job created; then the run waits
for every workload to finish. kubesim journals every change (kq.chaos.check reads it after
the stack is down) and the decision log gives the reason of any workload left pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from kq import subjects
from kq.chaos import world
from kq.chaos.check import Checker, Report, check_journal, decode_record
from kq.chaos.faults import SHORT, Injected, Injector
from kq.kube import AlreadyExists, KubeClient, KubeError
from kq.messages import WorkloadPendingEvent, decision_decoder
from kq.runtime.delivery import Delivery
from kq.stack import Stack
from kq.stack.supervise import RestartPolicy

Say = Callable[[str], None]


@dataclass(frozen=True)
class ChaosConfig:
    dir: Path
    seed: int = 1
    workloads: int = 300
    rate: float = 20.0  # jobs created per second, at most
    backlog: int = 60  # created and not finished, at most
    faults: tuple[str, ...] = SHORT
    first_fault_s: float = 3.0  # after the first job
    gap_s: tuple[float, float] = (1.5, 4.0)  # between one fault's end and the next
    hold_s: float = 2.0  # how long a windowed fault lasts
    drain_timeout_s: float = 180.0
    startup_timeout_s: float = 90.0
    log_level: str = "warning"
    shuffle: bool = True  # False: the faults in the order given
    nats_cluster: int = 1  # nats-server nodes (3: a JetStream cluster with R3 streams, for the NATS_CLUSTER faults)


@dataclass
class ChaosResult:
    config: ChaosConfig
    report: Report
    injected: list[Injected]
    recovery_s: list[float | None]
    restarts: Counter[str] = field(default_factory=Counter)
    wall_s: float = 0.0
    finished: int = 0

    @property
    def all_finished(self) -> bool:
        return self.finished == self.config.workloads

    @property
    def idle(self) -> int:
        """Faults after the last admission of a run that finished everything: nothing left to recover."""
        return self.recovery_s.count(None) if self.all_finished else 0

    @property
    def not_recovered(self) -> int:
        return self.recovery_s.count(None) - self.idle

    @property
    def ok(self) -> bool:
        return not self.report.violations and not self.not_recovered and self.all_finished

    def figures(self) -> dict[str, Any]:
        rec = sorted(r for r in self.recovery_s if r is not None)
        return {
            "workloads": self.report.workloads, "jobs": self.report.jobs, "finished": self.finished,
            "ends": dict(self.report.ends), "faults": dict(Counter(f.kind for f in self.injected)),
            "violations": len(self.report.violations), "violationsByKind": dict(self.report.by_kind()),
            "recoveryP50S": _pct(rec, 50), "recoveryP99S": _pct(rec, 99), "recoveryMaxS": rec[-1] if rec else None,
            "notRecovered": self.not_recovered, "afterTheLastAdmission": self.idle, "restarts": dict(self.restarts),
            "journalRecords": self.report.records, "wallS": round(self.wall_s, 1), "seed": self.config.seed,
        }

    def summary(self) -> str:
        f = self.figures()
        lines = [f"chaos run (seed {f['seed']}): {f['workloads']} workloads for {f['jobs']} jobs, "
                 f"{f['finished']} finished, in {f['wallS']} s",
                 "  end states: " + ", ".join(f"{k} {v}" for k, v in sorted(f["ends"].items())),
                 "  faults injected: " + ", ".join(f"{k} {v}" for k, v in sorted(f["faults"].items())),
                 "  restarts by the supervisor: " + (", ".join(f"{k} {v}" for k, v in sorted(f["restarts"].items()))
                                                     or "none"),
                 f"  violations: {f['violations']}" + (f" {f['violationsByKind']}" if f["violations"] else ""),
                 f"  time to recover after a fault: p50 {f['recoveryP50S']} s, p99 {f['recoveryP99S']} s, "
                 f"max {f['recoveryMaxS']} s ({f['notRecovered']} not recovered, "
                 f"{f['afterTheLastAdmission']} after the last admission)"]
        by_kind: dict[str, list[float]] = {}
        for inj, r in zip(self.injected, self.recovery_s, strict=True):
            if r is not None:
                by_kind.setdefault(inj.kind, []).append(r)
        lines += [f"    {k:<20} {', '.join(f'{x:.2f}' for x in sorted(v))}" for k, v in sorted(by_kind.items())]
        lines += [f"  unfinished: {u}" for u in self.report.unfinished]
        lines += [f"  ! {v.cluster} t+{v.t - self.report.first_t:.2f}s {v.what}" for v in self.report.violations[:20]]
        return "\n".join(lines)


def _pct(xs: list[float], p: int) -> float | None:
    if not xs:
        return None
    if len(xs) == 1:
        return round(xs[0], 2)
    return round(statistics.quantiles(xs, n=100, method="inclusive")[p - 1], 2)


def recovery(injected: list[Injected], progress: list[float]) -> list[float | None]:
    """Per fault: from its end (the kill, or the undo) to the next workload the manager admits."""
    out: list[float | None] = []
    for f in injected:
        nxt = next((t for t in progress if t >= f.end), None)
        out.append(None if nxt is None else round(nxt - f.end, 3))
    return out


KUEUE_CONFIG: dict[str, Any] = {
    "waitForPodsReady": {"timeout": "5m", "blockAdmission": False},
    "multiKueue": {"gcInterval": "2s", "origin": "chaos", "workerLostTimeout": "20s"},
}


class _Live:
    """Follows the journal while the run goes, for pacing: how many workloads finished."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.checker = Checker()
        self._offset = 0

    def poll(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].splitlines():
            self.checker.feed(decode_record(line))

    @property
    def finished(self) -> int:
        return len(self.checker.finished)


async def _create(kube: KubeClient, obj: dict[str, Any], deadline: float) -> None:
    """Create, retrying what an injected fault refused (the driver meets the API's faults too)."""
    while True:
        try:
            await kube.create(obj["kind"], obj["metadata"].get("namespace"), obj)
            return
        except AlreadyExists:
            return  # an earlier try got through
        except KubeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _pending_reasons(stack: Stack) -> dict[tuple[str, str], str]:
    """The last Pending decision's message per manager Workload, from the decision log."""
    out: dict[tuple[str, str], str] = {}

    async def handle(d: Delivery) -> None:
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            dec = decision_decoder.decode(d.data)
            if isinstance(dec, WorkloadPendingEvent):
                out[(dec.namespace, dec.name)] = dec.message
            elif (dec.namespace, dec.name) in out:
                del out[(dec.namespace, dec.name)]  # decided since

    async with stack.bus.replay(subjects.EVENTS_STREAM, subjects.event_filter("manager", "workload"), handle) as r:
        await r.wait_caught_up(30.0)
    return out


async def run_chaos(cfg: ChaosConfig, say: Say | None = None) -> ChaosResult:
    say = say or (lambda _line: None)
    rng = random.Random(cfg.seed)
    journal = cfg.dir / "journal.jsonl"
    journal.unlink(missing_ok=True)
    t0 = time.monotonic()
    stack = Stack(cfg.dir / "stack", kueue_config=KUEUE_CONFIG, replicas={"admission": 2}, supervise=True,
                  restart_policy=RestartPolicy(initial_s=0.2, max_s=5.0, reset_after_s=20.0),
                  on_restart=lambda r: say(f"  t+{time.monotonic() - t0:6.1f}s restarted {r.name} after "
                                           f"{r.waited_s:.1f}s{' (failed: ' + r.error + ')' if r.error else ''}"),
                  clusters=(("manager", "manager"), (world.WORKER, "worker")), log_level=cfg.log_level,
                  timeout_s=cfg.startup_timeout_s, nats_cluster=cfg.nats_cluster,
                  kubesim_args=("--journal", str(journal), "--seed", str(cfg.seed)))
    injected: list[Injected] = []
    live = _Live(journal)
    pending_reasons: dict[tuple[str, str], str] = {}
    async with stack:
        say(f"stack up in {time.monotonic() - t0:.1f}s; {cfg.workloads} jobs, faults {', '.join(cfg.faults)}")
        kube = {c: await KubeClient.from_kubeconfig(stack.kubeconfig(c)) for c in ("manager", world.WORKER)}
        try:
            setup_deadline = time.monotonic() + 60
            for obj in world.manager_objects():
                await _create(kube["manager"], obj, setup_deadline)
            for obj in world.worker_objects():
                await _create(kube[world.WORKER], obj, setup_deadline)
            created = 0
            creating_done = asyncio.Event()

            async def create_jobs() -> None:
                nonlocal created
                job_rng = random.Random(cfg.seed * 7919 + 1)
                for i in range(cfg.workloads):
                    while created - live.finished >= cfg.backlog:
                        await asyncio.sleep(0.1)
                    await _create(kube["manager"], world.job(i, job_rng), time.monotonic() + 60)
                    created += 1
                    await asyncio.sleep(1.0 / cfg.rate)
                creating_done.set()

            async def follow() -> None:
                while True:
                    live.poll()
                    await asyncio.sleep(0.3)

            async def inject() -> None:
                kinds = list(cfg.faults)
                if cfg.shuffle:
                    rng.shuffle(kinds)
                await asyncio.sleep(cfg.first_fault_s)
                async with Injector(stack, hold_s=cfg.hold_s) as inj:
                    i = 0
                    while i < len(kinds) or not creating_done.is_set():
                        kind = kinds[i % len(kinds)]
                        f = await inj.inject(kind)
                        injected.append(f)
                        say(f"  t+{time.monotonic() - t0:6.1f}s fault {kind} {f.detail}".rstrip()
                            + f"  [{created}/{cfg.workloads} created, {live.finished} finished]")
                        i += 1
                        await asyncio.sleep(rng.uniform(*cfg.gap_s))

            follower = asyncio.create_task(follow())
            try:
                await asyncio.gather(create_jobs(), inject())
                deadline = time.monotonic() + cfg.drain_timeout_s
                said = time.monotonic()
                while live.finished < cfg.workloads and time.monotonic() < deadline:
                    await asyncio.sleep(0.5)
                    if time.monotonic() - said >= 10:
                        said = time.monotonic()
                        say(f"  t+{said - t0:6.1f}s draining: {live.finished}/{cfg.workloads} finished")
            finally:
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower
            if live.finished < cfg.workloads:
                say(f"  {live.finished} of {cfg.workloads} finished within {cfg.drain_timeout_s}s; reading reasons")
                pending_reasons = await _pending_reasons(stack)
        finally:
            for k in kube.values():
                await k.close()
        restarts = Counter(r.name for r in stack.restart_history())
    report = check_journal(journal, pending_reasons)
    result = ChaosResult(cfg, report, injected, recovery(injected, report.progress), restarts,
                         time.monotonic() - t0, len(report.finished_uids))
    return result
