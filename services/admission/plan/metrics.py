"""What the scheduler's metrics say after some cycles: pure, from the cycles' results and the core's
read-only views, as kq.metric_updates values (the term records them; kq.metrics serves them).

Kueue's names and labels (pkg/metrics/metrics.go); quantities in Kueue's units (cores, bytes:
the core counts milli-units). Wait times are measured from the workload's creation, or from its
requeue (eviction) when it was requeued, as Kueue's "created or requeued".
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from kq.metric_updates import Gauges, Inc, MetricUpdate, Observe
from services.admission.core.decisions import (
    ChecksReadyDecision,
    ClusterQueueStatus,
    CycleResult,
    FlavorUsage,
    LocalQueueStatus,
)
from services.admission.core.model import Workload
from services.admission.core.state import SchedulerState

_DECISION_KINDS = ("admissions", "preemptions", "evictions", "deactivations", "checks_ready", "pending")


def attempt(result: CycleResult, duration_s: float) -> list[MetricUpdate]:
    """One admission attempt (a cycle): success when it reserved quota or preempted for a head (Kueue:
    an entry assumed or evicting), else inadmissible."""
    outcome = "success" if result.admissions or result.preemptions else "inadmissible"
    return [Inc("kueue_admission_attempts_total", {"result": outcome}),
            Observe("kueue_admission_attempt_duration_seconds", {"result": outcome}, max(0.0, duration_s))]


def _units(milli: float) -> float:
    return milli / 1000.0


def _limit(milli: int | None) -> float:
    return math.inf if milli is None else _units(milli)


def queued_since(wl: Workload) -> float:
    times = [t for t in (wl.evicted_time, wl.requeue_at) if t is not None]
    return max([wl.creation_time, *times])


class _Workloads:
    def __init__(self, state: SchedulerState) -> None:
        self.state = state

    def labels(self, key: str) -> tuple[dict[str, str], dict[str, str], Workload | None]:
        """(ClusterQueue-side extra labels, LocalQueue labels, the workload) for a workload key."""
        wl = self.state.workloads.get(key)
        if wl is None:
            return {"priority_class": ""}, {}, None
        pc = wl.priority_class or ""
        return {"priority_class": pc}, {"name": wl.queue_name, "namespace": wl.namespace, "priority_class": pc}, wl

    def cluster_queue_of(self, key: str) -> str:
        reserved = self.state.reserved.get(key)
        if reserved is not None:
            return reserved.cq
        wl = self.state.workloads.get(key)
        lq = None if wl is None else self.state.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
        return "" if lq is None else lq.spec.cluster_queue


def decisions(results: Iterable[CycleResult], state: SchedulerState, now: float) -> list[MetricUpdate]:
    """Counters and wait times of what the cycles decided (call before the next input changes the state)."""
    out: list[MetricUpdate] = []
    wls = _Workloads(state)
    for r in results:
        for kind in _DECISION_KINDS:
            if n := len(getattr(r, kind)):
                out.append(Inc("kq_decisions_total", {"kind": kind}, n))
        for a in r.admissions:
            cq_extra, lq, wl = wls.labels(a.workload)
            wait = 0.0 if wl is None else max(0.0, now - queued_since(wl))
            out += _counted("quota_reserved_workloads_total", "quota_reserved_wait_time_seconds",
                            a.cluster_queue, cq_extra, lq, wait)
            if a.admitted:
                out += _counted("admitted_workloads_total", "admission_wait_time_seconds", a.cluster_queue,
                                cq_extra, lq, wait)
        for c in r.checks_ready:
            out += _checks_ready(c, wls, now)
        for p in r.preemptions:
            out.append(Inc("kueue_preempted_workloads_total",
                           {"preempting_cluster_queue": wls.cluster_queue_of(p.preemptor), "reason": p.reason}))
            out += _evicted(p.victim, p.victim_cluster_queue, "Preempted", p.reason, wls)
        for e in r.evictions:
            out += _evicted(e.workload, wls.cluster_queue_of(e.workload), e.reason, "", wls)
    return out


def _counted(total: str, wait_metric: str, cq: str, cq_extra: dict[str, str], lq: dict[str, str],
             wait: float) -> Iterator[MetricUpdate]:
    yield Inc(f"kueue_{total}", {"cluster_queue": cq, **cq_extra})
    yield Observe(f"kueue_{wait_metric}", {"cluster_queue": cq, **cq_extra}, wait)
    if lq:
        yield Inc(f"kueue_local_queue_{total}", lq)
        yield Observe(f"kueue_local_queue_{wait_metric}", lq, wait)


def _checks_ready(c: ChecksReadyDecision, wls: _Workloads, now: float) -> Iterator[MetricUpdate]:
    cq_extra, lq, wl = wls.labels(c.workload)
    wait = 0.0 if wl is None else max(0.0, now - queued_since(wl))
    yield from _counted("admitted_workloads_total", "admission_wait_time_seconds", c.cluster_queue, cq_extra, lq, wait)
    if wl is not None and wl.quota_reserved_time is not None:
        checks = max(0.0, now - wl.quota_reserved_time)
        yield Observe("kueue_admission_checks_wait_time_seconds", {"cluster_queue": c.cluster_queue, **cq_extra},
                      checks)
        if lq:
            yield Observe("kueue_local_queue_admission_checks_wait_time_seconds", lq, checks)


def _evicted(key: str, cq: str, reason: str, cause: str, wls: _Workloads) -> Iterator[MetricUpdate]:
    cq_extra, lq, _wl = wls.labels(key)
    yield Inc("kueue_evicted_workloads_total", {"cluster_queue": cq, "reason": reason, "underlying_cause": cause,
                                                **cq_extra})
    if lq:
        yield Inc("kueue_local_queue_evicted_workloads_total", {**lq, "reason": reason, "underlying_cause": cause})


# --- gauges from the queue statuses a cycle reported -------------------------------------------


def _flavor_rows(flavors: tuple[FlavorUsage, ...]) -> tuple[tuple[dict[str, str], float], ...]:
    return tuple(({"flavor": f.name, "resource": r.name}, _units(r.total)) for f in flavors for r in f.resources)


class Gauged:
    """What the queue gauges were last reported from, per queue and cohort (one term's; the shell
    clears the gauges when a term ends). A queue's status report then re-emits only the gauges whose
    inputs changed: most of a report repeats its quotas, its Active status and half its counts, and
    building them was most of what a status cost in metrics (~40 us a queue at 5,000 queues)."""

    def __init__(self) -> None:
        # status, parked, the spec (by identity: replaced when it changes), the quotas (a copy)
        self.cqs: dict[str, tuple[ClusterQueueStatus, int, object, dict[Any, Any]]] = {}
        self.lqs: dict[tuple[str, str], tuple[LocalQueueStatus, int]] = {}  # status, parked
        self.cohorts: dict[str, dict[tuple[str, str], int]] = {}  # subtree quota


class ReportedStatuses:
    """The queue statuses the cycles reported since the gauges were last built, the last per queue.
    The shell builds the gauges from them only when they are read (kq.metrics defer): a busy queue
    reports its status every round, the gauges are scraped far less often."""

    def __init__(self) -> None:
        self.cqs: dict[str, ClusterQueueStatus] = {}
        self.lqs: dict[tuple[str, str], LocalQueueStatus] = {}

    def add(self, results: Iterable[CycleResult]) -> None:
        for r in results:
            self.cqs.update((s.name, s) for s in r.cluster_queues)
            self.lqs.update(((s.namespace, s.name), s) for s in r.local_queues)

    def take_gauges(self, state: SchedulerState, gauged: Gauged | None = None) -> list[MetricUpdate]:
        """The ClusterQueue and LocalQueue gauges of every queue reported since the last take (with
        `gauged`, only those whose inputs changed since it last saw them), forgetting the reports."""
        cqs, lqs = self.cqs, self.lqs
        self.cqs, self.lqs = {}, {}
        return _gauges(cqs, lqs, state, gauged or Gauged())


def _gauges(cqs: dict[str, ClusterQueueStatus], lqs: dict[tuple[str, str], LocalQueueStatus],
            state: SchedulerState, memo: Gauged) -> list[MetricUpdate]:
    out: list[MetricUpdate] = []
    for _name, s in sorted(cqs.items()):
        out += _cluster_queue_gauges(s, state, memo)
    parked = _ParkedByLocalQueue(state)
    for (ns, name), ls in sorted(lqs.items()):
        out += _local_queue_gauges(ns, name, ls, state, parked, memo)
    if cqs:
        # The cohorts above the reported queues only: a round's cost must not grow with every cohort.
        touched = {n.name for name in cqs if (rt := state.cqs.get(name)) is not None for n in rt.node.ancestors()}
        out += _cohort_gauges(state, touched, memo)
    return out


def _cluster_queue_gauges(s: ClusterQueueStatus, state: SchedulerState, memo: Gauged) -> Iterator[MetricUpdate]:
    scope = {"cluster_queue": s.name}
    rt = state.cqs.get(s.name)
    parked = rt.queue.parked_count() if rt is not None else 0
    spec = rt.spec if rt is not None else None
    quotas = rt.node.quotas if rt is not None else {}
    prev = memo.cqs.get(s.name)
    spec_same = prev is not None and prev[2] is spec and prev[3] == quotas
    memo.cqs[s.name] = (s, parked, spec, prev[3] if spec_same and prev is not None else dict(quotas))
    was, was_parked = (prev[0], prev[1]) if prev is not None else (None, -1)
    cohort = (rt.spec.cohort or "") if rt is not None else ""
    yield from _count_gauges("kueue_", scope, s, parked, was, was_parked)
    if was is None or was.active != s.active:
        current = "active" if s.active else "pending"
        yield Gauges("kueue_cluster_queue_status", scope, tuple(({"status": st}, 1.0 if st == current else 0.0)
                                                                for st in ("pending", "active", "terminated")))
    fr_scope = {"cohort": cohort, "cluster_queue": s.name}
    if was is None or not spec_same or was.flavors_reservation != s.flavors_reservation:
        yield Gauges("kueue_cluster_queue_resource_reservation", fr_scope, _flavor_rows(s.flavors_reservation))
    if was is None or not spec_same or was.flavors_usage != s.flavors_usage:
        yield Gauges("kueue_cluster_queue_resource_usage", fr_scope, _flavor_rows(s.flavors_usage))
    if not spec_same:  # quotas and cohort come from the spec only
        for metric, value in (("nominal_quota", lambda q: _units(q.nominal)),
                              ("borrowing_limit", lambda q: _limit(q.borrowing_limit)),
                              ("lending_limit", lambda q: _limit(q.lending_limit))):
            yield Gauges(f"kueue_cluster_queue_{metric}", fr_scope,
                         tuple(({"flavor": f, "resource": r}, value(q)) for (f, r), q in sorted(quotas.items())))
    if s.weighted_share is not None and (was is None or not spec_same or was.weighted_share != s.weighted_share):
        share = math.nan if math.isinf(s.weighted_share) else s.weighted_share
        yield Gauges("kueue_cluster_queue_weighted_share", scope, (({"cohort": cohort}, share),))


def _count_gauges(prefix: str, scope: dict[str, str], s: ClusterQueueStatus | LocalQueueStatus, parked: int,
                  was: ClusterQueueStatus | LocalQueueStatus | None, was_parked: int) -> Iterator[MetricUpdate]:
    """The pending / reserving / admitted gauges a ClusterQueue and a LocalQueue both report, each
    only when its inputs changed since the last report (was None: the first)."""
    if was is None or was.pending_workloads != s.pending_workloads or was_parked != parked:
        yield Gauges(f"{prefix}pending_workloads", scope, (({"status": "active"}, float(s.pending_workloads - parked)),
                                                          ({"status": "inadmissible"}, float(parked))))
    if was is None or was.reserving_workloads != s.reserving_workloads:
        yield Gauges(f"{prefix}reserving_active_workloads", scope, (({}, float(s.reserving_workloads)),))
    if was is None or was.admitted_workloads != s.admitted_workloads:
        yield Gauges(f"{prefix}admitted_active_workloads", scope, (({}, float(s.admitted_workloads)),))


class _ParkedByLocalQueue:
    """Parked workloads per LocalQueue, counted once per ClusterQueue per report (not once per
    LocalQueue: a pass over the ClusterQueue's parked workloads each time)."""

    def __init__(self, state: SchedulerState) -> None:
        self.state = state
        self.counts: dict[str, Counter[str]] = {}  # ClusterQueue -> LocalQueue key -> parked

    def __call__(self, cq: str, lq_key: str) -> int:
        counts = self.counts.get(cq)
        if counts is None:
            rt = self.state.cqs.get(cq)
            counts = Counter()
            if rt is not None and rt.queue.parked_count():
                counts.update(_lq_key(self.state, k) for k in rt.queue.parked_keys())
            self.counts[cq] = counts
        return counts[lq_key]


def _local_queue_gauges(ns: str, name: str, s: LocalQueueStatus, state: SchedulerState,
                        parked_in: _ParkedByLocalQueue, memo: Gauged) -> Iterator[MetricUpdate]:
    scope = {"name": name, "namespace": ns}
    lq = state.local_queues.get(f"{ns}/{name}")
    parked = parked_in(lq.spec.cluster_queue, f"{ns}/{name}") if lq is not None else 0
    prev = memo.lqs.get((ns, name))
    memo.lqs[(ns, name)] = (s, parked)
    was, was_parked = prev if prev is not None else (None, -1)
    yield from _count_gauges("kueue_local_queue_", scope, s, parked, was, was_parked)
    if was is None or was.active != s.active:
        current = "True" if s.active else "False"
        yield Gauges("kueue_local_queue_status", scope,
                     tuple(({"active": a}, 1.0 if a == current else 0.0) for a in ("True", "False", "Unknown")))
    if was is None or was.flavors_reservation != s.flavors_reservation:
        yield Gauges("kueue_local_queue_resource_reservation", scope, _flavor_rows(s.flavors_reservation))
    if was is None or was.flavors_usage != s.flavors_usage:
        yield Gauges("kueue_local_queue_resource_usage", scope, _flavor_rows(s.flavors_usage))


def _lq_key(state: SchedulerState, workload_key: str) -> str:
    wl = state.workloads.get(workload_key)
    return "" if wl is None else f"{wl.namespace}/{wl.queue_name}"


def _cohort_gauges(state: SchedulerState, names: set[str], memo: Gauged) -> Iterator[MetricUpdate]:
    for name in sorted(names):
        c = state.cohorts.get(name)
        if c is None or memo.cohorts.get(name) == c.node.subtree_quota:
            continue
        memo.cohorts[name] = dict(c.node.subtree_quota)
        yield Gauges("kueue_cohort_subtree_quota", {"cohort": name},
                     tuple(({"flavor": f, "resource": r}, _units(v))
                           for (f, r), v in sorted(c.node.subtree_quota.items())))
