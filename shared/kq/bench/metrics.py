"""From recorded events to figures: pure, with the definitions of Kueue's recorder
(test/performance/scheduler/runner/recorder) where Kueue has one.

Times are milliseconds since the scheduler started (t = 0). The recorder (live or virtual)
appends a `CQReport` for every ClusterQueue status it sees and a `WorkloadSeen` for every
workload update; everything here is computed from those, the plan and the run's bounds.

- usage (Kueue): each ClusterQueue's admitted cpu (status.flavorsUsage, borrowed included) is held
  from one report to the next, integrated from its first to its last report; per class the sum
  over its queues, divided by (summed nominal quota x the class's window).
- runtime usage: cpu x runtime of the finished workloads only, over the same denominator (what a
  perfect recorder would count: no credit for runs cut short by preemption).
- time to admission: per workload, at its latest admission, Admitted transition time - creation
  time from the API objects (Kueue's recorder prefers these), and the runner-observed variant
  (first seen -> admission seen); class means divide by every workload of the class, as Kueue does.
- wall: the first moment at or after the last creation when every ClusterQueue's latest report
  shows no pending and no reserving workloads (or the queue is inactive).
- phases: the run cut where each class's last workload finished; per phase the workloads finished
  and the mean cpu held by admitted, unfinished workloads, over every cohort's quota (`phases`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from kq.bench.generate import BenchPlan, QueuePlan


class CQReport(msgspec.Struct, frozen=True, kw_only=True):
    t_ms: float
    cq: str
    usage_milli: int  # status.flavorsUsage[0].resources[0].total
    reserved_milli: int  # status.flavorsReservation[0].resources[0].total
    pending: int
    reserving: int
    active: bool = True


class WorkloadSeen(msgspec.Struct, frozen=True, kw_only=True):
    t_ms: float  # when the runner saw this state
    key: str  # namespace/name
    admitted: bool
    evicted: bool
    finished: bool
    created_ms: float | None = None  # metadata.creationTimestamp
    admitted_ms: float | None = None  # the Admitted condition's lastTransitionTime, while admitted
    rv: int = 0  # the object's resourceVersion: the API's own order of writes


class ProcessStats(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    max_rss_bytes: int  # VmHWM
    cpu_ms: int  # user + system


class RunLog(msgspec.Struct, kw_only=True):
    """What one run recorded; filled by live.py or virtual.py, read by `compute`."""

    mode: str  # live | virtual
    cq_reports: list[CQReport] = []
    workload_events: list[WorkloadSeen] = []
    created: int = 0
    all_created_ms: float | None = None  # when the last creation completed
    completed_ms: float | None = None  # when the runner saw the run complete (live); None: from the reports
    stopped_ms: float = 0.0  # when recording stopped (completion or timeout)
    timed_out: bool = False
    startup_ms: float = 0.0
    shutdown_ms: float = 0.0
    dropped_events: int = 0
    processes: list[ProcessStats] = []  # the system under test, each process
    processes_at_start: list[ProcessStats] = []  # the same when the queues existed (live; set-up cost apart)
    workloads_from_ms: float = 0.0  # when the workloads' creation began (live)
    runner: ProcessStats | None = None  # the benchmark's own process (not in the memory sum)
    runner_at_start: ProcessStats | None = None  # the same when the queues existed (its CPU in the run apart)
    cycles: int = 0  # admission cycles run (virtual mode)


class CQClassFigures(msgspec.Struct, frozen=True, kw_only=True):
    cpu_used: int  # mCPU x ms
    cpu_average_usage: int  # mCPU
    nominal_quota: int  # mCPU
    first_event_ms: int
    last_event_ms: int
    usage_percent: float
    runtime_usage_percent: float
    idle_while_pending_percent: float  # capacity left unused while something waited
    idle_while_empty_percent: float  # capacity unused because nothing waited
    evicted_work_percent: float  # admitted cpu x time of runs cut short by preemption


class WLClassFigures(msgspec.Struct, frozen=True, kw_only=True):
    count: int
    admitted: int
    finished: int
    total_evictions: int
    average_time_to_admission_ms: int
    average_observed_time_to_admission_ms: int
    average_time_to_finish_ms: int


class Phase(msgspec.Struct, frozen=True, kw_only=True):
    """A stretch of the run that ends when the last workload of a class finished (runner-observed):
    how many workloads (of any class) finished in it, and how much of the capacity the admitted,
    unfinished workloads held on average. A phase that finishes few while holding little had work
    waiting that the system did not get to: latency or CPU, not quota."""

    ends_with: str  # the class whose last finish ends it
    start_ms: float
    end_ms: float
    finished: int
    held_percent: float  # mean cpu held over the phase, % of every cohort's nominal quota together


class Figures(msgspec.Struct, frozen=True, kw_only=True):
    mode: str
    wall_ms: float | None  # None: never completed
    startup_ms: float
    shutdown_ms: float
    max_rss_bytes: int
    dropped_events: int
    created: int
    expected: int
    admitted: int
    finished: int
    timed_out: bool
    cq_classes: dict[str, CQClassFigures]
    wl_classes: dict[str, WLClassFigures]
    over_quota: tuple[str, ...]  # ClusterQueues or cohorts that held more than their quota (see _quota_peaks)
    max_cohort_usage_percent: float  # peak of a cohort's reserved cpu over its quota, in the API's order
    physical_wall_ms: float
    physical_usage_percent: float
    processes: tuple[ProcessStats, ...]
    runner: ProcessStats | None
    cycles: int
    # CPU ms per created workload of each process from the queues' creation to the end (live; set-up
    # and shut-down apart), "all" their sum; the bench driver (creating, watching, finishing) apart.
    cpu_ms_per_workload: dict[str, float] = {}
    driver_cpu_ms_per_workload: float | None = None
    phases: tuple[Phase, ...] = ()


# --- completion ----------------------------------------------------------------------------------


class CompletionTracker:
    """Online form of the wall definition: feed reports in time order, ask `done()`."""

    def __init__(self, queues: Iterable[str]) -> None:
        self._busy: dict[str, bool] = {q: True for q in queues}  # unreported counts as busy
        self._busy_count = len(self._busy)

    def feed(self, r: CQReport) -> None:
        if r.cq not in self._busy:
            return
        busy = r.active and (r.pending > 0 or r.reserving > 0)
        if busy != self._busy[r.cq]:
            self._busy[r.cq] = busy
            self._busy_count += 1 if busy else -1

    def idle(self) -> bool:
        return self._busy_count == 0

    def busy_queues(self) -> list[str]:
        return sorted(q for q, b in self._busy.items() if b)


def completion_ms(reports: Sequence[CQReport], queues: Iterable[str], all_created_ms: float | None) -> float | None:
    """The wall's end: the first report time >= all_created_ms after which every queue is idle."""
    if all_created_ms is None:
        return None
    tracker = CompletionTracker(queues)
    for r in _by_time(reports):
        tracker.feed(r)
        if r.t_ms >= all_created_ms and tracker.idle():
            return r.t_ms
    return all_created_ms if tracker.idle() else None


def _by_time(reports: Sequence[CQReport]) -> list[CQReport]:
    return sorted(reports, key=lambda r: r.t_ms)  # stable: same-time reports keep their order


# --- the physical limit ---------------------------------------------------------------------------


def cohort_capacity(plan: BenchPlan) -> dict[str, int]:
    """Each cohort's summed nominal quota (mCPU)."""
    capacity: dict[str, int] = {}
    for q in plan.queues:
        capacity[q.cohort] = capacity.get(q.cohort, 0) + q.nominal_milli
    return capacity


def physical_limit(plan: BenchPlan) -> tuple[float, float]:
    """(wall ms, usage %) of a zero-overhead scheduler: per cohort, work arriving at or after any
    arrival time t cannot finish before t + that work / the cohort's capacity, nor any workload
    before its arrival + runtime."""
    capacity = cohort_capacity(plan)
    cohort_of = {q.name: q.cohort for q in plan.queues}
    arrivals: dict[str, list[tuple[int, float]]] = {}
    wall = 0.0
    total_work = 0.0
    for w in plan.workloads:
        work = float(w.cpu_milli) * w.runtime_ms
        arrivals.setdefault(cohort_of[w.cluster_queue], []).append((w.at_ms, work))
        wall = max(wall, float(w.at_ms + w.runtime_ms))
        total_work += work
    for cohort, items in arrivals.items():
        cap = capacity.get(cohort, 0)
        if cap <= 0:
            continue
        items.sort()
        remaining = sum(work for _, work in items)
        i = 0
        while i < len(items):
            t = items[i][0]
            wall = max(wall, t + remaining / cap)
            while i < len(items) and items[i][0] == t:
                remaining -= items[i][1]
                i += 1
    total_cap = sum(capacity.values())
    usage = 100.0 * total_work / (total_cap * wall) if wall > 0 and total_cap > 0 else 0.0
    return wall, usage


# --- figures --------------------------------------------------------------------------------------


class _CQState:
    __slots__ = ("first", "last", "used", "max_reserved")

    def __init__(self, r: CQReport) -> None:
        self.first = r.t_ms
        self.last = r
        self.used = 0.0
        self.max_reserved = r.reserved_milli

    def feed(self, r: CQReport) -> None:
        if self.last.usage_milli > 0:
            self.used += self.last.usage_milli * (r.t_ms - self.last.t_ms)
        self.last = r
        self.max_reserved = max(self.max_reserved, r.reserved_milli)


class _WLState:
    __slots__ = ("first", "admitted", "evicted", "finished", "tta", "observed_tta", "ttf", "evictions",
                 "admit_seen", "ever_admitted", "evicted_work_ms")

    def __init__(self, t: float) -> None:
        self.first = t
        self.admitted = self.evicted = self.finished = self.ever_admitted = False
        self.tta = self.observed_tta = self.ttf = 0.0
        self.evictions = 0
        self.admit_seen: float | None = None
        self.evicted_work_ms = 0.0  # ms of admitted runs cut short


def _workload_states(events: Sequence[WorkloadSeen]) -> dict[str, _WLState]:
    states: dict[str, _WLState] = {}
    for ev in events:
        s = states.get(ev.key)
        if s is None:
            s = states[ev.key] = _WLState(ev.t_ms)
        if ev.admitted and not s.admitted:
            start, at = s.first, ev.t_ms
            if ev.created_ms is not None and ev.admitted_ms is not None and ev.admitted_ms >= ev.created_ms:
                start, at = ev.created_ms, ev.admitted_ms
            s.tta = at - start
            s.observed_tta = ev.t_ms - s.first
            s.admit_seen = ev.t_ms
            s.ever_admitted = True
        if ev.evicted and not s.evicted:
            s.evictions += 1
            if s.admit_seen is not None and not ev.finished:
                s.evicted_work_ms += ev.t_ms - s.admit_seen
                s.admit_seen = None
        if ev.finished and not s.finished:
            s.ttf = ev.t_ms - s.first
        s.admitted, s.evicted, s.finished = ev.admitted, ev.evicted, ev.finished
    return states


def _cohort_timeline(plan: BenchPlan, reports: Sequence[CQReport]) -> dict[str, dict[str, float]]:
    """Per cohort: unused capacity while something waited / while nothing waited (mCPU x ms), from
    the ClusterQueue reports; reports of one instant apply together."""
    queues = {q.name: q for q in plan.queues}
    capacity = cohort_capacity(plan)
    usage: dict[str, int] = {}
    pending: dict[str, int] = {}
    used_by_cohort: dict[str, int] = {c: 0 for c in capacity}
    pending_by_cohort: dict[str, int] = {c: 0 for c in capacity}
    out = {c: {"idle_pending": 0.0, "idle_empty": 0.0, "first": -1.0, "last": 0.0} for c in capacity}
    ordered = _by_time(reports)
    i = 0
    prev_t: float | None = None
    while i < len(ordered):
        t = ordered[i].t_ms
        if prev_t is not None:
            for c, cap in capacity.items():
                if out[c]["first"] < 0:
                    continue
                idle = max(0, cap - used_by_cohort[c]) * (t - prev_t)
                out[c]["idle_pending" if pending_by_cohort[c] > 0 else "idle_empty"] += idle
        while i < len(ordered) and ordered[i].t_ms == t:
            r = ordered[i]
            i += 1
            q = queues.get(r.cq)
            if q is None:
                continue
            c = q.cohort
            used_by_cohort[c] += r.usage_milli - usage.get(r.cq, 0)
            pending_by_cohort[c] += r.pending - pending.get(r.cq, 0)
            usage[r.cq], pending[r.cq] = r.usage_milli, r.pending
            if out[c]["first"] < 0:
                out[c]["first"] = t
            out[c]["last"] = t
        prev_t = t
    return out


def _quota_peaks(plan: BenchPlan, events: Sequence[WorkloadSeen]) -> tuple[list[str], float]:
    """Replay the workload updates in the API's order (resourceVersion) and sum the cpu of the
    workloads holding quota (admitted, not finished) per ClusterQueue and per cohort. ClusterQueue
    statuses cannot tell this: two queues' statuses are written one after the other, so a reader
    can see one queue's new admission before the other's release. Returns the queues/cohorts that
    went over (nominal + borrowingLimit, resp. the summed nominal quotas) and the peak cohort %."""
    queues = {q.name: q for q in plan.queues}
    workloads = {w.key: w for w in plan.workloads}
    capacity = cohort_capacity(plan)
    held: dict[str, int] = {}
    by_cq: dict[str, int] = {}
    by_cohort: dict[str, int] = {}
    over: set[str] = set()
    peak = 0.0
    for ev in sorted(events, key=lambda e: e.rv):
        w = workloads.get(ev.key)
        if w is None:
            continue
        q = queues[w.cluster_queue]
        now = w.cpu_milli if ev.admitted and not ev.finished else 0
        delta = now - held.get(ev.key, 0)
        if delta == 0:
            continue
        held[ev.key] = now
        by_cq[q.name] = by_cq.get(q.name, 0) + delta
        by_cohort[q.cohort] = by_cohort.get(q.cohort, 0) + delta
        if by_cq[q.name] > _limit(q, capacity):
            over.add(f"ClusterQueue {q.name}")
        cap = capacity[q.cohort]
        if by_cohort[q.cohort] > cap:
            over.add(f"cohort {q.cohort}")
        if cap > 0:
            peak = max(peak, 100.0 * by_cohort[q.cohort] / cap)
    return sorted(over), peak


def phases(plan: BenchPlan, events: Sequence[WorkloadSeen]) -> tuple[Phase, ...]:
    """The run cut at each class's last finish, in time order (classes with no finish have none).
    A workload holds its cpu from when it is seen admitted until it is seen finished or no longer
    admitted, as `_quota_peaks` counts it, but in the runner's time."""
    workloads = {w.key: w for w in plan.workloads}
    capacity = sum(cohort_capacity(plan).values())
    finished_at: dict[str, float] = {}
    held_since: dict[str, float] = {}
    intervals: list[tuple[float, float, int]] = []  # (from, to, mCPU)
    for ev in sorted(events, key=lambda e: e.t_ms):  # stable: one workload's events keep their order
        w = workloads.get(ev.key)
        if w is None:
            continue
        holding = ev.admitted and not ev.finished
        since = held_since.get(ev.key)
        if holding and since is None:
            held_since[ev.key] = ev.t_ms
        elif not holding and since is not None:
            intervals.append((since, ev.t_ms, w.cpu_milli))
            del held_since[ev.key]
        if ev.finished and ev.key not in finished_at:
            finished_at[ev.key] = ev.t_ms
    last = max((e.t_ms for e in events), default=0.0)
    intervals += [(since, last, workloads[key].cpu_milli) for key, since in held_since.items()]
    ends: dict[str, float] = {}
    for key, t in finished_at.items():
        cls = workloads[key].class_name
        ends[cls] = max(ends.get(cls, t), t)
    out: list[Phase] = []
    start, counted_from = 0.0, -math.inf  # the first phase counts a finish at its very start too
    for cls, end in sorted(ends.items(), key=lambda item: (item[1], item[0])):
        window = end - start
        held = sum(cpu * (min(to, end) - max(frm, start)) for frm, to, cpu in intervals if frm < end and to > start)
        out.append(Phase(
            ends_with=cls, start_ms=start, end_ms=end,
            finished=sum(1 for t in finished_at.values() if counted_from < t <= end),
            held_percent=100.0 * held / (capacity * window) if capacity > 0 and window > 0 else 0.0,
        ))
        start = counted_from = end
    return tuple(out)


def compute(plan: BenchPlan, log: RunLog) -> Figures:
    queues = {q.name: q for q in plan.queues}
    cq_states: dict[str, _CQState] = {}
    for r in _by_time(log.cq_reports):
        s = cq_states.get(r.cq)
        if s is None:
            cq_states[r.cq] = _CQState(r)
        else:
            s.feed(r)
    wl_states = _workload_states(log.workload_events)
    workloads = {w.key: w for w in plan.workloads}
    cohort_idle = _cohort_timeline(plan, log.cq_reports)

    cq_classes: dict[str, CQClassFigures] = {}
    for cls in sorted({q.class_name for q in plan.queues}):
        members = [q for q in plan.queues if q.class_name == cls]
        reported = [cq_states[q.name] for q in members if q.name in cq_states]
        used = sum(s.used for s in reported)
        nominal = sum(q.nominal_milli for q in members)
        first = min((s.first for s in reported), default=0.0)
        last = max((s.last.t_ms for s in reported), default=0.0)
        window = last - first
        names = {q.name for q in members}
        runtime_work = 0.0
        evicted_work = 0.0
        for key, st in wl_states.items():
            w = workloads.get(key)
            if w is None or w.cluster_queue not in names:
                continue
            if st.finished:
                runtime_work += float(w.cpu_milli) * w.runtime_ms
            evicted_work += float(w.cpu_milli) * st.evicted_work_ms
        cohorts = {q.cohort for q in members}
        idle_p = sum(cohort_idle[c]["idle_pending"] for c in cohorts)
        idle_e = sum(cohort_idle[c]["idle_empty"] for c in cohorts)
        denom = nominal * window
        pct = (lambda x, d=denom: 100.0 * x / d) if denom > 0 else (lambda x: 0.0)
        cq_classes[cls] = CQClassFigures(
            cpu_used=int(used),
            cpu_average_usage=int(used // window) if window > 0 else 0,
            nominal_quota=nominal,
            first_event_ms=int(first),
            last_event_ms=int(last),
            usage_percent=pct(used),
            runtime_usage_percent=pct(runtime_work),
            idle_while_pending_percent=pct(idle_p),
            idle_while_empty_percent=pct(idle_e),
            evicted_work_percent=pct(evicted_work),
        )

    wl_classes: dict[str, WLClassFigures] = {}
    by_class: dict[str, list[_WLState]] = {}
    for key, st in wl_states.items():
        w = workloads.get(key)
        if w is not None:
            by_class.setdefault(w.class_name, []).append(st)
    for cls in sorted({w.class_name for w in plan.workloads}):
        states = by_class.get(cls, [])
        n = len(states)
        wl_classes[cls] = WLClassFigures(
            count=n,
            admitted=sum(1 for s in states if s.ever_admitted),
            finished=sum(1 for s in states if s.finished),
            total_evictions=sum(s.evictions for s in states),
            average_time_to_admission_ms=int(sum(s.tta for s in states) // n) if n else 0,
            average_observed_time_to_admission_ms=int(sum(s.observed_tta for s in states) // n) if n else 0,
            average_time_to_finish_ms=int(sum(s.ttf for s in states) // n) if n else 0,
        )

    capacity = cohort_capacity(plan)
    over_status = [f"ClusterQueue {name} (status)" for name, s in sorted(cq_states.items())
                   if name in queues and s.max_reserved > _limit(queues[name], capacity)]
    over_workloads, peak = _quota_peaks(plan, log.workload_events)
    phys_wall, phys_usage = physical_limit(plan)
    return Figures(
        mode=log.mode,
        wall_ms=log.completed_ms if log.completed_ms is not None else completion_ms(
            log.cq_reports, queues, log.all_created_ms),
        startup_ms=log.startup_ms,
        shutdown_ms=log.shutdown_ms,
        # Live: the stack's processes; virtual: the one process that is the whole system.
        max_rss_bytes=(sum(p.max_rss_bytes for p in log.processes) if log.processes
                       else log.runner.max_rss_bytes if log.runner is not None else 0),
        dropped_events=log.dropped_events,
        created=log.created,
        expected=len(plan.workloads),
        admitted=sum(1 for s in wl_states.values() if s.ever_admitted),
        finished=sum(1 for s in wl_states.values() if s.finished),
        timed_out=log.timed_out,
        cq_classes=cq_classes,
        wl_classes=wl_classes,
        over_quota=tuple(over_workloads + over_status),
        max_cohort_usage_percent=peak,
        physical_wall_ms=phys_wall,
        physical_usage_percent=phys_usage,
        processes=tuple(log.processes),
        runner=log.runner,
        cycles=log.cycles,
        phases=phases(plan, log.workload_events),
        **_run_cpu(log),
    )


def _run_cpu(log: RunLog) -> dict[str, Any]:
    """cpu_ms_per_workload and driver_cpu_ms_per_workload of Figures (empty without a live start)."""
    if not log.processes_at_start or not log.created:
        return {}
    start = {p.name: p.cpu_ms for p in log.processes_at_start}
    per = {p.name: (p.cpu_ms - start.get(p.name, 0)) / log.created for p in log.processes}
    per["all"] = sum(per.values())
    driver = None
    if log.runner is not None and log.runner_at_start is not None:
        driver = (log.runner.cpu_ms - log.runner_at_start.cpu_ms) / log.created
    return {"cpu_ms_per_workload": per, "driver_cpu_ms_per_workload": driver}


def _limit(q: QueuePlan, capacity: dict[str, int]) -> int:
    """The most a ClusterQueue may hold: nominal + borrowingLimit, and never more than its cohort's quota."""
    cohort_total = capacity[q.cohort]
    if q.borrowing_limit_milli is None:
        return cohort_total
    return min(q.nominal_milli + q.borrowing_limit_milli, cohort_total)
