"""The admission core's public interface.

    state = SchedulerState(SchedulerConfig(...))
    state.apply(event)            # one handler per event kind, dispatched from one match
    result = state.schedule(now)  # one admission cycle -> CycleResult
    state.forget(key)             # an admission command was refused: roll the assumption back
    state.forget_eviction(key)    # an eviction/preemption command was refused: may be issued again
    state.admission_applied(key, resource_version)  # optional: the admit command landed at that version

`now` is float seconds on the caller's clock (virtual in tests and replays). Everything is
deterministic: the same sequence of calls yields the same results and decision ids.

The state itself has one owner per piece (parts.py): the queue tree, the workload book, the
issue ledger and the status reporter. This facade only dispatches; nothing imports it back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from . import queue_events as qe
from . import workload_sync as ws
from .cycle import run_cycle
from .decisions import AdmissionDecision, CycleResult
from .model import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    Deleted,
    Event,
    LocalQueue,
    Namespace,
    PlacementAnswer,
    ResourceFlavor,
    SchedulerConfig,
    Topology,
    Workload,
    WorkloadPriorityClass,
)
from .ownership import OwnsTree, owns_workload
from .parts import Parts
from .runtime import ClusterQueueRuntime, CohortRuntime, LocalQueueRuntime
from .validation import validate
from .workloads import PendingInfo, ReservedInfo


class SchedulerState:
    def __init__(self, config: SchedulerConfig | None = None, owns: OwnsTree | None = None) -> None:
        """`owns`: sharded admission decides only for the cohort trees whose root name it accepts
        (ownership.py); None decides for every tree."""
        self.config = config or SchedulerConfig()
        self._p = Parts(self.config, owns)

    # --- public interface --------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        """Apply one event. Invalid events raise InvalidEvent and change nothing."""
        validate(event)
        p = self._p
        match event:
            case Workload():
                ws.apply_workload(p, event)
            case ClusterQueue():
                qe.apply_cluster_queue(p, event)
            case Cohort():
                p.tree.apply_cohort(event)
            case LocalQueue():
                qe.apply_local_queue(p, event)
            case ResourceFlavor():
                qe.apply_flavor(p, event)
            case Namespace():
                qe.apply_namespace(p, event)
            case WorkloadPriorityClass():
                qe.apply_priority_class(p, event)
            case AdmissionCheck():
                qe.apply_admission_check(p, event)
            case Topology():
                qe.apply_topology(p, event.name, exists=True)
            case PlacementAnswer():
                ws.apply_placement_answer(p, event)
            case Deleted():
                qe.apply_deleted(p, event)

    def schedule(self, now: float, report_status: bool = True) -> CycleResult:
        """One admission cycle at `now`. With report_status=False, queue statuses are not computed
        now (they accumulate and come with a later call), so a busy shell can report them less often."""
        return run_cycle(self._p, now, report_status)

    def assume(self, decision: AdmissionDecision) -> None:
        ws.assume(self._p, decision)

    def forget(self, key: str) -> None:
        ws.forget(self._p, key)

    def forget_eviction(self, key: str) -> None:
        ws.forget_eviction(self._p, key)

    def admission_applied(self, key: str, resource_version: str) -> None:
        ws.admission_applied(self._p, key, resource_version)

    def placement_outstanding(self, key: str, request_id: str) -> bool:
        """Is this question to the topology solver still waiting for its answer?"""
        req = self._p.placements.asked.get(key)
        return req is not None and req.id == request_id and self._p.placements.answer_to(req) is None

    def next_wakeup(self) -> float | None:
        """The earliest time a backoff or a maximum execution time ends (call schedule then), or None."""
        book = self._p.book
        times = [t for t in (book.next_wakeup(), book.next_deadline()) if t is not None]
        return min(times) if times else None

    def has_work(self, now: float | None = None) -> bool:
        """Would schedule(now) publish anything: decisions to make or report, or queue statuses?"""
        return self.has_status_changes() or self.has_scheduling_work(now)

    def has_scheduling_work(self, now: float | None = None) -> bool:
        """Heads worth trying, parked workloads to bring back, a backoff ended by `now`, decisions queued."""
        p = self._p
        if p.reporter.has_pending() or p.ledger.has_output() or p.tree.has_requeues() or p.placements.has_output():
            return True
        if now is not None:
            wake = self.next_wakeup()
            if wake is not None and wake <= now:
                return True
        return p.tree.any_schedulable()

    def has_status_changes(self) -> bool:
        """Queue statuses to compute and, where they changed, report (see schedule's report_status)."""
        return self._p.reporter.has_changes()

    def owns_workload(self, key: str) -> bool:
        """Sharded admission: is this workload in one of the trees decided here?"""
        return owns_workload(self._p, key)

    def owned_roots(self) -> dict[str, bool]:
        """Every ClusterQueue by name -> whether its tree is decided here."""
        owns = self._p.owns
        return {n: owns is None or owns(cq.node.root().name) for n, cq in self._p.tree.cqs.items()}

    # --- read-only views (the shell, tests, dumps) ------------------------------------------------

    @property
    def workloads(self) -> Mapping[str, Workload]:
        return self._p.book.workloads

    @property
    def reserved(self) -> Mapping[str, ReservedInfo]:
        return self._p.book.reserved

    @property
    def pending(self) -> Mapping[str, PendingInfo]:
        return self._p.book.pending

    @property
    def cqs(self) -> Mapping[str, ClusterQueueRuntime]:
        return self._p.tree.cqs

    @property
    def cohorts(self) -> Mapping[str, CohortRuntime]:
        return self._p.tree.cohorts

    @property
    def local_queues(self) -> Mapping[str, LocalQueueRuntime]:
        return self._p.tree.lqs

    def iter_reserved(self) -> Iterator[ReservedInfo]:
        return iter(self._p.book.reserved.values())

    def queue_dump(self, cq_name: str) -> tuple[list[str], list[str]]:
        """(active keys in pop order, parked keys) of a ClusterQueue."""
        q = self._p.tree.cqs[cq_name].queue
        return q.ordered_active(), sorted(q.parked_keys())
