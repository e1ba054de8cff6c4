"""`kq bench --virtual-time`: the admission core alone, as a discrete-event simulation.

It lives beside the core it drives (kq never imports `services`); `kq bench` finds it by name
(kq.bench.cli.VIRTUAL_BENCH). It is kq's one virtual-time simulator of the admission core.

No bus, no API server, no processes: the plan's objects go straight into
`SchedulerState` (converted by the admission core's own from_api, so the core sees what the
live service would), and a virtual clock (ms) moves from one event to the next:

- creations at their scheduled times;
- one cycle whenever something changed (`has_work`), at the current virtual time; its
  decisions take effect `cycle_latency_ms` later (default 0: at once), and the scheduler
  runs no other cycle meanwhile, as a single scheduler loop would;
- an admission starts the workload's runtime; when it ends the workload is marked finished;
- a preemption marks the victim evicted and releases its quota at once (what the watcher does
  for a workload with no job), and cancels its run: when admitted again it runs its full
  runtime again.

Everything is deterministic: the same plan gives the same figures, run after run.
"""

from __future__ import annotations

import gc
import heapq
import os
import time
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from kq.bench.generate import BenchPlan, WorkloadPlan, setup_objects, workload_object
from kq.bench.metrics import CQReport, RunLog, WorkloadSeen
from kq.bench.procstats import process_stats
from services.admission.collector import GC_THRESHOLDS
from services.admission.core import Admission, CycleResult, FlavorUsage, SchedulerConfig, SchedulerState, Workload
from services.admission.core.from_api import event_from_api
from services.admission.core.from_api import workload as workload_from_api

# One progress line per this much real time.
PROGRESS_EVERY_S = 1.0
# A scheduler that keeps finding work at one instant without the clock moving is a bug in the core.
MAX_CYCLES_PER_INSTANT = 100_000

Progress = Callable[[float, int, int, int], None]  # (virtual ms, created, admitted, finished)

replace = msgspec.structs.replace


class _Finish(NamedTuple):
    key: str
    run: int


_Payload = WorkloadPlan | _Finish | CycleResult  # creation, end of a run, a cycle's delayed effects


class VirtualRunError(RuntimeError):
    pass


class _Sim:
    def __init__(self, plan: BenchPlan, cycle_latency_ms: float, progress: Progress | None) -> None:
        self.plan = plan
        self.latency = float(cycle_latency_ms)
        self.progress = progress
        self.state = SchedulerState(SchedulerConfig())
        for obj in setup_objects(plan):
            ev = event_from_api(obj)
            if ev is not None:
                self.state.apply(ev)
        self.log = RunLog(mode="virtual")
        self.records: dict[str, Workload] = {}  # key -> the core Workload as "the API" holds it
        self.plans: dict[str, WorkloadPlan] = {w.key: w for w in plan.workloads}
        self.runs: dict[str, int] = {}  # key -> id of its current run (a stale finish is ignored)
        self.heap: list[tuple[float, int, _Payload]] = []  # (t, seq, payload)
        self.seq = 0
        self.rv = 0
        self.busy_until = 0.0
        self.admitted = 0
        self.finished = 0
        self._last_progress = time.monotonic()

    # --- the world's side ------------------------------------------------------------------------

    def push(self, t: float, payload: _Payload) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, payload))

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _write(self, key: str, **changes: object) -> None:
        w = replace(self.records[key], resource_version=self._next_rv(), **changes)
        self.records[key] = w
        self.state.apply(w)

    def _seen(self, t: float, key: str, *, admitted: bool, evicted: bool = False, finished: bool = False) -> None:
        w = self.records[key]
        self.log.workload_events.append(WorkloadSeen(
            t_ms=t, key=key, admitted=admitted, evicted=evicted, finished=finished,
            created_ms=w.creation_time * 1000.0,
            admitted_ms=t if admitted and not finished else None, rv=self.rv,
        ))

    def create(self, t: float, w: WorkloadPlan) -> None:
        core = workload_from_api(workload_object(w, uid=f"bench-{w.index}"))
        core = replace(core, creation_time=t / 1000.0, resource_version=self._next_rv())
        self.records[w.key] = core
        self.state.apply(core)
        self.log.created += 1
        self._seen(t, w.key, admitted=False)

    def finish(self, t: float, key: str, run: int) -> None:
        if self.runs.get(key) != run:
            return  # evicted since: that run was cut short
        self._write(key, finished=True)
        self.finished += 1
        self._seen(t, key, admitted=True, finished=True)

    def _start(self, t: float, key: str) -> None:
        run = self.runs.get(key, 0) + 1
        self.runs[key] = run
        self.push(t + self.plans[key].runtime_ms, _Finish(key, run))

    def _evict(self, t: float, key: str, reason: str) -> None:
        w = self.records.get(key)
        if w is None or w.admission is None:
            return
        self.runs[key] = self.runs.get(key, 0) + 1  # cancels the running timer
        self._write(key, evicted_reason=reason, evicted_time=t / 1000.0)
        self._seen(t, key, admitted=True, evicted=True)
        self._write(key, admission=None, admitted=False, quota_reserved_time=None)
        self._seen(t, key, admitted=False, evicted=True)

    def apply_result(self, t: float, r: CycleResult) -> None:
        for s in r.cluster_queues:
            self.log.cq_reports.append(CQReport(
                t_ms=t, cq=s.name, usage_milli=_first_total(s.flavors_usage),
                reserved_milli=_first_total(s.flavors_reservation), pending=s.pending_workloads,
                reserving=s.reserving_workloads, active=s.active,
            ))
        for d in r.admissions:
            self._write(d.workload, admission=Admission(cluster_queue=d.cluster_queue, pod_sets=d.pod_sets),
                        quota_reserved_time=t / 1000.0, admitted=d.admitted, evicted_reason=None, evicted_time=None)
            if d.admitted:
                self.admitted += 1
                self._seen(t, d.workload, admitted=True)
                self._start(t, d.workload)
        for c in r.checks_ready:
            self._write(c.workload, admitted=True)
            self.admitted += 1
            self._seen(t, c.workload, admitted=True)
            self._start(t, c.workload)
        for p in r.preemptions:
            self._evict(t, p.victim, "Preempted")
        for e in r.evictions:
            self._evict(t, e.workload, e.reason)
        for deactivation in r.deactivations:
            self._write(deactivation.workload, active=False)

    # --- the loop --------------------------------------------------------------------------------

    def _cycles(self, t: float) -> None:
        if t < self.busy_until:
            return
        now_s = t / 1000.0
        n = 0
        while self.state.has_work(now_s):
            r = self.state.schedule(now_s)
            self.log.cycles += 1
            if self.latency > 0:
                self.busy_until = t + self.latency
                self.push(self.busy_until, r)
                return
            self.apply_result(t, r)
            n += 1
            if n > MAX_CYCLES_PER_INSTANT:
                raise VirtualRunError(f"the core kept finding work at t={t:.0f} ms for {n} cycles")

    def run(self) -> RunLog:
        for w in self.plan.workloads:
            self.push(float(w.at_ms), w)
        self.log.all_created_ms = float(self.plan.last_creation_ms)
        t = 0.0
        while True:
            while self.heap and self.heap[0][0] <= t:
                _, _, payload = heapq.heappop(self.heap)
                match payload:
                    case WorkloadPlan():
                        self.create(t, payload)
                    case _Finish(key, run):
                        self.finish(t, key, run)
                    case CycleResult():
                        self.apply_result(t, payload)
            self._cycles(t)
            self._report(t)
            nexts: list[float] = []
            if self.heap:
                nexts.append(self.heap[0][0])
            wake = self.state.next_wakeup()
            if wake is not None and wake * 1000.0 > t:  # a due one was released by the cycle just run
                nexts.append(wake * 1000.0)
            if self.busy_until > t and self.state.has_work(t / 1000.0):
                nexts.append(self.busy_until)
            if not nexts:
                break
            t = min(nexts)
        self.log.stopped_ms = t
        return self.log

    def _report(self, t: float) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if now - self._last_progress >= PROGRESS_EVERY_S:
            self._last_progress = now
            self.progress(t, self.log.created, self.admitted, self.finished)


def _first_total(flavors: tuple[FlavorUsage, ...]) -> int:
    """Kueue's recorder reads flavors[0].resources[0].total."""
    if flavors and flavors[0].resources:
        return int(flavors[0].resources[0].total)
    return 0


def run_virtual(plan: BenchPlan, *, cycle_latency_ms: float = 0.0, progress: Progress | None = None) -> RunLog:
    """Simulate the whole plan on a virtual clock; returns the recorded events (and, as `runner`,
    this process's peak memory and CPU: the core's whole cost, harness included)."""
    old = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)  # as the service runs
    try:
        log = _Sim(plan, cycle_latency_ms, progress).run()
    finally:
        gc.set_threshold(*old)
    log.runner = process_stats("kq bench (core + harness)", os.getpid())
    return log
