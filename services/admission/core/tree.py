"""The queue tree: ClusterQueues, cohorts, LocalQueues and the objects they refer to, with quota.

Only the tree links and unlinks quota nodes, rebuilds their totals and counts epochs. An epoch
(per cohort tree, plus one global) is bumped by anything that may change a decision there, so a
head that failed at one epoch is not tried again before it moves. Trees whose parked workloads
should come back next cycle are collected in `requeue_roots`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .model import AdmissionCheck, Cohort, LocalQueue, ResourceFlavor
from .quota import QuotaNode, link, rebuild_tree
from .reporter import StatusReporter
from .runtime import ClusterQueueRuntime, CohortRuntime, LocalQueueRuntime, quotas_of


class QueueTree:
    def __init__(self, reporter: StatusReporter) -> None:
        self.reporter = reporter
        self.owns: Callable[[str], bool] | None = None  # sharded admission: trees decided here (ownership.py)
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cqs: dict[str, ClusterQueueRuntime] = {}
        self._with_active: dict[str, None] = {}  # ClusterQueues with active workloads (see add_cq)
        self.cohorts: dict[str, CohortRuntime] = {}
        self.lqs: dict[str, LocalQueueRuntime] = {}
        self.lqs_by_cq: dict[str, dict[str, None]] = {}  # LocalQueues naming a ClusterQueue, known or not
        self.namespaces: dict[str, dict[str, str]] = {}
        self.priority_classes: dict[str, int] = {}
        self.admission_checks: dict[str, AdmissionCheck] = {}
        self.topologies: set[str] = set()  # names of the Topologies that exist (TAS)
        self._epochs: dict[str, int] = {}
        self._global_epoch = 0
        self._requeue_roots: dict[int, QuotaNode] = {}
        self._requeue_everything = False  # requeue_all() since the last take: resolved once, when taken

    # --- epochs and requeues -------------------------------------------------------------------

    @staticmethod
    def _root_key(node: QuotaNode) -> str:
        root = node.root()
        return ("cq:" if root.is_cq else "co:") + root.name

    def epoch_of(self, cq: ClusterQueueRuntime) -> tuple[int, int]:
        return self._epochs.get(self._root_key(cq.node), 0), self._global_epoch

    def bump_node(self, node: QuotaNode) -> None:
        k = self._root_key(node)
        self._epochs[k] = self._epochs.get(k, 0) + 1

    def bump_cq(self, name: str) -> None:
        cq = self.cqs.get(name)
        if cq is not None:
            self.bump_node(cq.node)

    def bump_global(self) -> None:
        self._global_epoch += 1

    def request_requeue(self, node: QuotaNode) -> None:
        root = node.root()
        self._requeue_roots[id(root)] = root

    def requeue_all(self) -> None:
        # Lazy: a burst of namespaces (one per queue at start-up) must not cost a pass over every
        # ClusterQueue each; the trees are resolved once, at the next take.
        self._requeue_everything = True

    def has_requeues(self) -> bool:
        return self._requeue_everything or bool(self._requeue_roots)

    def take_requeue_roots(self) -> list[QuotaNode]:
        if self._requeue_everything:
            self._requeue_everything = False
            for cq in self.cqs.values():
                if cq.queue.parked_count():  # only parked workloads come back
                    self.request_requeue(cq.node)
        roots = list(self._requeue_roots.values())
        self._requeue_roots.clear()
        return roots

    # --- lookups ---------------------------------------------------------------------------------

    def cq_for_lq(self, lq_key: str) -> ClusterQueueRuntime | None:
        lq = self.lqs.get(lq_key)
        if lq is None or lq.stopped:
            return None
        return self.cqs.get(lq.spec.cluster_queue)

    def in_cycle(self, cq: ClusterQueueRuntime) -> bool:
        return any(self.cohorts[n.name].blocked_parent is not None for n in cq.node.ancestors())

    def stalled(self, cq: ClusterQueueRuntime) -> bool:
        """The head failed at the current epoch and nothing it waits on moved since."""
        stall = cq.queue.stall
        if stall is None:
            return False
        head = cq.queue.peek()
        return head is stall[0] and stall[1] == self.epoch_of(cq) and head is not None and not head.pending_flavors()

    def _worth_trying(self, cq: ClusterQueueRuntime) -> bool:
        return (cq.active and cq.queue.has_active() and (self.owns is None or self.owns(cq.node.root().name))
                and not self.in_cycle(cq) and not self.stalled(cq))

    def schedulable(self) -> Iterator[ClusterQueueRuntime]:
        """ClusterQueues whose head is worth trying, by name (only those with active workloads are
        looked at: a cycle's cost must not grow with the idle queues)."""
        for name in sorted(self._with_active):
            cq = self.cqs[name]
            if self._worth_trying(cq):
                yield cq

    def any_schedulable(self) -> bool:
        return any(self._worth_trying(self.cqs[name]) for name in self._with_active)

    def add_cq(self, cq: ClusterQueueRuntime) -> None:
        """A new ClusterQueue; the tree follows whether its queue has active workloads."""
        self.cqs[cq.name] = cq

        def on_active(active: bool, name: str = cq.name) -> None:
            if active:
                self._with_active[name] = None
            else:
                self._with_active.pop(name, None)

        cq.queue.on_active = on_active
        if cq.queue.has_active():
            self._with_active[cq.name] = None

    def mark_lq(self, lq_key: str) -> None:
        if lq_key in self.lqs:
            self.reporter.mark_lq(lq_key)

    def mark_cq_and_lqs(self, cq: ClusterQueueRuntime) -> None:
        self.reporter.mark_cq(cq.name)
        for lq_key in cq.lqs:
            self.mark_lq(lq_key)

    def rebuild(self, node: QuotaNode) -> None:
        root = node.root()
        rebuild_tree(root)
        for n in [root] if root.is_cq else root.subtree_cqs():
            cq = self.cqs.get(n.name)
            if cq is not None:
                cq.generation += 1
                self.reporter.mark_cq(cq.name)
        self.bump_node(root)
        self.request_requeue(root)

    # --- cohorts -------------------------------------------------------------------------------

    def cohort(self, name: str) -> CohortRuntime:
        c = self.cohorts.get(name)
        if c is None:
            c = self.cohorts[name] = CohortRuntime(name)
        return c

    def drop_cohort_if_unused(self, name: str | None) -> None:
        c = self.cohorts.get(name) if name else None
        if name is None or c is None or c.spec is not None or c.node.child_cqs or c.node.child_cohorts:
            return
        parent = c.node.parent
        link(c.node, None)
        del self.cohorts[name]
        if parent is not None:
            self.rebuild(parent)
            self.drop_cohort_if_unused(parent.name)

    def _would_cycle(self, child: CohortRuntime, parent_name: str) -> bool:
        node: QuotaNode | None = self.cohort(parent_name).node
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
        link(c.node, self.cohort(parent_name).node if parent_name else None)
        if old is not None and old is not c.node.parent:
            self.rebuild(old)
            self.drop_cohort_if_unused(old.name)

    def _retry_blocked_parents(self) -> None:
        for c in list(self.cohorts.values()):
            if c.blocked_parent is not None and not self._would_cycle(c, c.blocked_parent):
                self._set_cohort_parent(c, c.blocked_parent)
                self.rebuild(c.node)

    def apply_cohort(self, spec: Cohort) -> None:
        c = self.cohort(spec.name)
        if c.spec == spec:
            return  # a record with the same spec (status, labels): no rebuild of the whole tree
        c.spec = spec
        c.node.quotas = quotas_of(spec.resource_groups)
        c.node.fair_weight = spec.fair_weight
        self._set_cohort_parent(c, spec.parent)
        self._retry_blocked_parents()
        self.rebuild(c.node)

    def delete_cohort(self, name: str) -> None:
        c = self.cohorts.get(name)
        if c is None:
            return
        c.spec = None
        c.node.quotas = {}
        c.node.fair_weight = 1.0
        self._set_cohort_parent(c, None)
        self._retry_blocked_parents()
        self.rebuild(c.node)
        self.drop_cohort_if_unused(name)

    # --- cluster queues --------------------------------------------------------------------------

    def link_cq(self, cq: ClusterQueueRuntime, cohort: str | None) -> None:
        """(Re)attach a ClusterQueue under its cohort; the old parent's tree is rebuilt (the caller
        rebuilds the queue's own once its reservations are attached)."""
        old_parent = cq.node.parent
        new_parent = self.cohort(cohort).node if cohort else None
        link(cq.node, new_parent)
        if old_parent is not None and old_parent is not new_parent:
            self.rebuild(old_parent)
            self.drop_cohort_if_unused(old_parent.name)

    def unlink_cq(self, cq: ClusterQueueRuntime) -> None:
        parent = cq.node.parent
        self.bump_node(cq.node)
        link(cq.node, None)
        del self.cqs[cq.name]
        cq.queue.on_active = None
        self._with_active.pop(cq.name, None)
        self.reporter.forget_cq(cq.name)
        for lq_key in cq.lqs:
            self.mark_lq(lq_key)
        if parent is not None:
            self.rebuild(parent)
            self.drop_cohort_if_unused(parent.name)

    def refresh_active(self, cq: ClusterQueueRuntime) -> bool:
        """Recompute the Active condition; True when it flipped."""
        reasons: list[tuple[str, str]] = []
        if cq.stopped:
            reasons.append(("Stopped", "is stopped"))
        missing = [f for f in cq.flavor_names if f not in self.flavors]
        if missing:
            reasons.append(("FlavorNotFound", f"references missing ResourceFlavor(s): {','.join(missing)}"))
        no_topology = sorted({t for f in cq.flavor_names if (rf := self.flavors.get(f)) is not None
                              and (t := rf.topology_name) and t not in self.topologies})
        if no_topology:
            reasons.append(("TopologyNotFound", f"references missing Topology(s): {','.join(no_topology)}"))
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
        if was == cq.active:
            return False
        self.bump_node(cq.node)
        self.mark_cq_and_lqs(cq)
        return True

    # --- local queues ----------------------------------------------------------------------------

    def register_lq(self, spec: LocalQueue) -> LocalQueueRuntime:
        lq = LocalQueueRuntime(spec)
        self.lqs[lq.key] = lq
        self.lqs_by_cq.setdefault(spec.cluster_queue, {})[lq.key] = None
        cq = self.cqs.get(spec.cluster_queue)
        if cq is not None:
            cq.lqs[lq.key] = None
            self.reporter.mark_cq(cq.name)
        return lq

    def unregister_lq(self, key: str, cq_name: str) -> None:
        by = self.lqs_by_cq.get(cq_name)
        if by is not None:
            by.pop(key, None)
            if not by:
                del self.lqs_by_cq[cq_name]
        cq = self.cqs.get(cq_name)
        if cq is not None:
            cq.lqs.pop(key, None)
            self.reporter.mark_cq(cq.name)
