"""The admission core's state and its public interface.

    state = SchedulerState(SchedulerConfig(...))
    state.apply(event)            # one handler per event kind, dispatched from one match
    result = state.schedule(now)  # one admission cycle -> CycleResult
    state.forget(key)             # an admission command was refused: roll the assumption back
    state.forget_eviction(key)    # an eviction/preemption command was refused: may be issued again
    state.admission_applied(key, resource_version)  # optional: the admit command landed at that version

`now` is float seconds on the caller's clock (virtual in tests and replays). Everything is
deterministic: the same sequence of calls yields the same results and decision ids.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator

from . import workload_sync as ws
from .decisions import AdmissionDecision, ClusterQueueStatus, CycleResult, LocalQueueStatus
from .model import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    Deleted,
    Event,
    LocalQueue,
    Namespace,
    ResourceFlavor,
    SchedulerConfig,
    Workload,
    WorkloadPriorityClass,
)
from .outbox import Outbox
from .quota import QuotaNode, link, rebuild_tree
from .runtime import ClusterQueueRuntime, CohortRuntime, LocalQueueRuntime, quotas_of
from .validation import validate
from .workloads import PendingInfo, ReservedInfo


class SchedulerState:
    def __init__(self, config: SchedulerConfig | None = None) -> None:
        self.config = config or SchedulerConfig()
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cqs: dict[str, ClusterQueueRuntime] = {}
        self.cohorts: dict[str, CohortRuntime] = {}
        self.lqs: dict[str, LocalQueueRuntime] = {}
        self.lqs_by_cq: dict[str, dict[str, None]] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.priority_classes: dict[str, int] = {}
        self.admission_checks: dict[str, AdmissionCheck] = {}
        self.workloads: dict[str, Workload] = {}  # latest record per namespace/name
        self.pending: dict[str, PendingInfo] = {}  # admissible workloads, queued or blocked
        self.pending_by_lq: dict[str, dict[str, None]] = {}
        self.reserved: dict[str, ReservedInfo] = {}  # workloads holding quota
        self.orphans_by_cq: dict[str, dict[str, None]] = {}  # reserved in a ClusterQueue we do not know
        self.evictions_issued: dict[str, str] = {}  # key -> uid: evictions/preemptions not yet seen
        self.checks_ready_issued: dict[str, str] = {}
        self.deactivations_issued: dict[str, str] = {}
        self.epochs: dict[str, int] = {}  # per cohort tree: bumped by anything that may change a decision
        self.global_epoch = 0
        self.requeue_roots: dict[int, QuotaNode] = {}  # trees whose parked workloads come back next cycle
        self.timers: list[tuple[float, str, str]] = []  # (requeue_at, key, uid)
        self.outbox = Outbox()
        self.reported_pending: dict[str, tuple[str, str]] = {}
        self.reported_cq: dict[str, ClusterQueueStatus] = {}
        self.reported_lq: dict[str, LocalQueueStatus] = {}
        self.dirty_cqs: dict[str, None] = {}
        self.dirty_lqs: dict[str, None] = {}
        self.cycle = 0
        self.now = -math.inf  # the `now` of the latest schedule() call
        self._counters: dict[str, int] = {}

    # --- public interface --------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        """Apply one event. Invalid events raise InvalidEvent and change nothing."""
        validate(event)
        match event:
            case Workload():
                ws.apply_workload(self, event)
            case ClusterQueue():
                self._apply_cluster_queue(event)
            case Cohort():
                self._apply_cohort(event)
            case LocalQueue():
                self._apply_local_queue(event)
            case ResourceFlavor():
                self.flavors[event.name] = event
                self._flavor_changed(event.name)
            case Namespace():
                self.namespaces[event.name] = dict(event.labels)
                self._global_change(requeue_all=True)
            case WorkloadPriorityClass():
                self.priority_classes[event.name] = event.value
                ws.priority_class_changed(self, event.name)
            case AdmissionCheck():
                self.admission_checks[event.name] = event
                self._check_changed(event.name)
            case Deleted():
                self._apply_deleted(event)

    def schedule(self, now: float, report_status: bool = True) -> CycleResult:
        """One admission cycle at `now`. With report_status=False, queue statuses are not computed
        now (they accumulate and come with a later call), so a busy shell can report them less often."""
        from .cycle import run_cycle

        return run_cycle(self, now, report_status)

    def assume(self, decision: AdmissionDecision) -> None:
        ws.assume(self, decision)

    def forget(self, key: str) -> None:
        ws.forget(self, key)

    def forget_eviction(self, key: str) -> None:
        if self.evictions_issued.pop(key, None) is not None:
            info = self.reserved.get(key)
            if info is not None:
                self.bump_cq(info.cq)

    def admission_applied(self, key: str, resource_version: str) -> None:
        info = self.reserved.get(key)
        if info is not None and info.assumed and resource_version.isdigit():
            info.applied_rv = int(resource_version)

    def next_wakeup(self) -> float | None:
        """The earliest time a backoff ends (call schedule then), or None."""
        while self.timers:
            at, key, uid = self.timers[0]
            info = self.pending.get(key)
            if info is not None and info.uid == uid and info.wl.requeue_at == at:
                return at
            heapq.heappop(self.timers)
        return None

    def has_work(self, now: float | None = None) -> bool:
        """Would schedule(now) publish anything: decisions to make or report, or queue statuses?"""
        return self.has_status_changes() or self.has_scheduling_work(now)

    def has_scheduling_work(self, now: float | None = None) -> bool:
        """Heads worth trying, parked workloads to bring back, a backoff ended by `now`, decisions queued."""
        if self.outbox or self.requeue_roots:
            return True
        if now is not None:
            wake = self.next_wakeup()
            if wake is not None and wake <= now:
                return True
        return any(
            cq.active and cq.queue.has_active() and not self.in_cycle(cq) and not self._stalled(cq)
            for cq in self.cqs.values()
        )

    def has_status_changes(self) -> bool:
        """Queue statuses to compute and, where they changed, report (see schedule's report_status)."""
        return bool(self.dirty_cqs or self.dirty_lqs)

    # --- ids, epochs, tree helpers --------------------------------------------------------------

    def decision_id(self, kind: str, uid: str, resource_version: str) -> str:
        n = self._counters.get(uid, 0) + 1
        self._counters[uid] = n
        return f"{kind}:{uid}:{resource_version}:{n}"

    def forget_counter(self, uid: str) -> None:
        self._counters.pop(uid, None)

    @staticmethod
    def root_key(node: QuotaNode) -> str:
        root = node.root()
        return ("cq:" if root.is_cq else "co:") + root.name

    def epoch_of(self, cq: ClusterQueueRuntime) -> tuple[int, int]:
        return self.epochs.get(self.root_key(cq.node), 0), self.global_epoch

    def bump_node(self, node: QuotaNode) -> None:
        k = self.root_key(node)
        self.epochs[k] = self.epochs.get(k, 0) + 1

    def bump_cq(self, name: str) -> None:
        cq = self.cqs.get(name)
        if cq is not None:
            self.bump_node(cq.node)

    def request_requeue(self, node: QuotaNode) -> None:
        root = node.root()
        self.requeue_roots[id(root)] = root

    def _stalled(self, cq: ClusterQueueRuntime) -> bool:
        stall = cq.queue.stall
        if stall is None:
            return False
        head = cq.queue.peek()
        return head is stall[0] and stall[1] == self.epoch_of(cq) and not head.pending_flavors()

    def _global_change(self, requeue_all: bool) -> None:
        self.global_epoch += 1
        if requeue_all:
            for cq in self.cqs.values():
                self.request_requeue(cq.node)

    def cq_for_lq(self, lq_key: str) -> ClusterQueueRuntime | None:
        lq = self.lqs.get(lq_key)
        if lq is None or lq.stopped:
            return None
        return self.cqs.get(lq.spec.cluster_queue)

    def mark_lq(self, lq_key: str) -> None:
        if lq_key in self.lqs:
            self.dirty_lqs[lq_key] = None

    def _rebuild(self, node: QuotaNode) -> None:
        root = node.root()
        rebuild_tree(root)
        cqs = [root] if root.is_cq else root.subtree_cqs()
        for n in cqs:
            cq = self.cqs.get(n.name)
            if cq is not None:
                cq.generation += 1
                self.dirty_cqs[cq.name] = None
        self.bump_node(root)
        self.request_requeue(root)

    # --- cohorts -------------------------------------------------------------------------------

    def _cohort(self, name: str) -> CohortRuntime:
        c = self.cohorts.get(name)
        if c is None:
            c = self.cohorts[name] = CohortRuntime(name)
        return c

    def _drop_cohort_if_unused(self, name: str | None) -> None:
        c = self.cohorts.get(name) if name else None
        if c is None or c.spec is not None or c.node.child_cqs or c.node.child_cohorts:
            return
        parent = c.node.parent
        link(c.node, None)
        del self.cohorts[name]  # type: ignore[arg-type]
        if parent is not None:
            self._rebuild(parent)
            self._drop_cohort_if_unused(parent.name)

    def _would_cycle(self, child: CohortRuntime, parent_name: str) -> bool:
        node: QuotaNode | None = self._cohort(parent_name).node
        while node is not None:
            if node is child.node:
                return True
            node = node.parent
        return False

    def _set_cohort_parent(self, c: CohortRuntime, parent_name: str | None) -> None:
        old = c.node.parent
        c.blocked_parent = None
        if parent_name is not None and self._would_cycle(c, parent_name):
            c.blocked_parent = parent_name  # Kueue skips trees with cycles; so do we, by not linking
            parent_name = None
        link(c.node, self._cohort(parent_name).node if parent_name else None)
        if old is not None and old is not c.node.parent:
            self._rebuild(old)
            self._drop_cohort_if_unused(old.name)

    def _apply_cohort(self, spec: Cohort) -> None:
        c = self._cohort(spec.name)
        c.spec = spec
        c.node.quotas = quotas_of(spec.resource_groups)
        c.node.fair_weight = spec.fair_weight
        self._set_cohort_parent(c, spec.parent)
        self._retry_blocked_parents()
        self._rebuild(c.node)

    def _retry_blocked_parents(self) -> None:
        for c in list(self.cohorts.values()):
            if c.blocked_parent is not None and not self._would_cycle(c, c.blocked_parent):
                self._set_cohort_parent(c, c.blocked_parent)
                self._rebuild(c.node)

    def in_cycle(self, cq: ClusterQueueRuntime) -> bool:
        return any(self.cohorts[n.name].blocked_parent is not None for n in cq.node.ancestors())

    # --- cluster queues ------------------------------------------------------------------------

    def _apply_cluster_queue(self, spec: ClusterQueue) -> None:
        cq = self.cqs.get(spec.name)
        created = cq is None
        old_drain = "None"
        if cq is None:
            cq = self.cqs[spec.name] = ClusterQueueRuntime(spec)
            old_parent: QuotaNode | None = None
        else:
            old_parent = cq.node.parent
            old_drain = cq.spec.stop_policy
            cq.configure(spec)
        new_parent = self._cohort(spec.cohort).node if spec.cohort else None
        link(cq.node, new_parent)
        if old_parent is not None and old_parent is not new_parent:
            self._rebuild(old_parent)
            self._drop_cohort_if_unused(old_parent.name)
        if created:
            ws.adopt_orphans(self, cq)
            for lq_key in list(self.lqs_by_cq.get(spec.name, ())):
                cq.lqs[lq_key] = None
                ws.recount_lq(self, lq_key)
        self._rebuild(cq.node)
        self.refresh_active(cq)
        if created:
            for lq_key in list(cq.lqs):
                ws.enqueue_lq_workloads(self, lq_key)
        if spec.stop_policy == "HoldAndDrain" and (created or old_drain != "HoldAndDrain"):
            ws.drain_cluster_queue(self, cq)
        self.dirty_cqs[cq.name] = None
        for lq_key in cq.lqs:
            self.mark_lq(lq_key)

    def refresh_active(self, cq: ClusterQueueRuntime) -> None:
        """Recompute the Active condition; on a change, refresh pending messages of its workloads."""
        reasons: list[tuple[str, str]] = []
        if cq.stopped:
            reasons.append(("Stopped", "is stopped"))
        missing = [f for f in cq.flavor_names if f not in self.flavors]
        if missing:
            reasons.append(("FlavorNotFound", f"references missing ResourceFlavor(s): {','.join(missing)}"))
        checks = sorted(cq.checks)
        absent = [c for c in checks if c not in self.admission_checks]
        if absent:
            reasons.append(("AdmissionCheckNotFound", f"references missing AdmissionCheck(s): {','.join(absent)}"))
        inactive = [c for c in checks if c in self.admission_checks and not self.admission_checks[c].active]
        if inactive:
            reasons.append(("AdmissionCheckInactive", f"references inactive AdmissionCheck(s): {','.join(inactive)}"))
        was = cq.active
        if reasons:
            cq.active = False
            cq.active_reason = reasons[0][0]
            cq.active_message = f"Can't admit new workloads: {', '.join(m for _, m in reasons)}."
        else:
            cq.active, cq.active_reason, cq.active_message = True, "Ready", "Can admit new workloads"
        if was != cq.active:
            self.dirty_cqs[cq.name] = None
            self.bump_node(cq.node)
            for lq_key in cq.lqs:
                self.mark_lq(lq_key)
            ws.report_blockers_for_cq(self, cq)

    def _flavor_changed(self, name: str) -> None:
        self.global_epoch += 1
        for cq in self.cqs.values():
            if name in cq.flavor_names:
                self.refresh_active(cq)
                self.request_requeue(cq.node)

    def _check_changed(self, name: str) -> None:
        self.global_epoch += 1
        for cq in self.cqs.values():
            if name in cq.checks:
                self.refresh_active(cq)
                self.request_requeue(cq.node)

    # --- local queues --------------------------------------------------------------------------

    def _apply_local_queue(self, spec: LocalQueue) -> None:
        key = f"{spec.namespace}/{spec.name}"
        old = self.lqs.get(key)
        if old is not None:
            if old.spec == spec:
                return
            ws.dequeue_lq_workloads(self, key)
            self._unregister_lq(key, old.spec.cluster_queue)
            drain_now = spec.stop_policy == "HoldAndDrain" and old.spec.stop_policy != "HoldAndDrain"
        else:
            drain_now = spec.stop_policy == "HoldAndDrain"
        lq = LocalQueueRuntime(spec)
        self.lqs[key] = lq
        self.lqs_by_cq.setdefault(spec.cluster_queue, {})[key] = None
        cq = self.cqs.get(spec.cluster_queue)
        if cq is not None:
            cq.lqs[key] = None
            self.dirty_cqs[cq.name] = None
        ws.recount_lq(self, key)
        ws.enqueue_lq_workloads(self, key)
        if drain_now:
            ws.drain_local_queue(self, lq)
        self.dirty_lqs[key] = None

    def _unregister_lq(self, key: str, cq_name: str) -> None:
        by = self.lqs_by_cq.get(cq_name)
        if by is not None:
            by.pop(key, None)
            if not by:
                del self.lqs_by_cq[cq_name]
        cq = self.cqs.get(cq_name)
        if cq is not None:
            cq.lqs.pop(key, None)
            self.dirty_cqs[cq.name] = None

    # --- deletions -----------------------------------------------------------------------------

    def _apply_deleted(self, d: Deleted) -> None:
        match d.kind:
            case "Workload":
                ws.delete_workload(self, f"{d.namespace}/{d.name}")
            case "ClusterQueue":
                self._delete_cluster_queue(d.name)
            case "Cohort":
                c = self.cohorts.get(d.name)
                if c is not None:
                    c.spec = None
                    c.node.quotas = {}
                    c.node.fair_weight = 1.0
                    self._set_cohort_parent(c, None)
                    self._retry_blocked_parents()
                    self._rebuild(c.node)
                    self._drop_cohort_if_unused(d.name)
            case "LocalQueue":
                key = f"{d.namespace}/{d.name}"
                old = self.lqs.get(key)
                if old is not None:
                    ws.dequeue_lq_workloads(self, key)
                    self._unregister_lq(key, old.spec.cluster_queue)
                    del self.lqs[key]
                    self.reported_lq.pop(key, None)
                    self.dirty_lqs.pop(key, None)
                    ws.report_blockers_for_lq(self, key)
            case "ResourceFlavor":
                if self.flavors.pop(d.name, None) is not None:
                    self._flavor_changed(d.name)
            case "Namespace":
                if self.namespaces.pop(d.name, None) is not None:
                    self._global_change(requeue_all=True)
            case "WorkloadPriorityClass":
                if self.priority_classes.pop(d.name, None) is not None:
                    ws.priority_class_changed(self, d.name)
            case "AdmissionCheck":
                if self.admission_checks.pop(d.name, None) is not None:
                    self._check_changed(d.name)

    def _delete_cluster_queue(self, name: str) -> None:
        cq = self.cqs.get(name)
        if cq is None:
            return
        queued = cq.queue.clear()
        for key in list(cq.workloads):
            self.orphans_by_cq.setdefault(name, {})[key] = None
        cq.workloads.clear()
        parent = cq.node.parent
        self.bump_node(cq.node)
        link(cq.node, None)
        del self.cqs[name]
        for info in queued:
            ws.report_blocker(self, info)
        self.reported_cq.pop(name, None)
        self.dirty_cqs.pop(name, None)
        for lq_key in cq.lqs:
            self.mark_lq(lq_key)
        if parent is not None:
            self._rebuild(parent)
            self._drop_cohort_if_unused(parent.name)

    # --- introspection (tests, dumps) -------------------------------------------------------------

    def iter_reserved(self) -> Iterator[ReservedInfo]:
        return iter(self.reserved.values())

    def queue_dump(self, cq_name: str) -> tuple[list[str], list[str]]:
        """(active keys in pop order, parked keys) of a ClusterQueue."""
        q = self.cqs[cq_name].queue
        return q.ordered_active(), sorted(q.parked_keys())
