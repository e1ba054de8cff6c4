"""One admission cycle (Kueue pkg/scheduler/scheduler.go schedule()), as numbered phases.

 0. release timers and parked workloads whose fate may have changed
 1. take one head per active ClusterQueue
 2. open the cycle-scoped snapshot
 3. nominate: flavor assignment and preemption targets for each head
 4. order the entries (classic or fair sharing)
 5. admit or preempt, greedily, re-checking the fit against what this cycle already took
 6. requeue what was not admitted and report why
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from . import check_rules
from . import workload_sync as ws
from .assignment import DEFERRED_FIT, FIT, NO_FIT, PREEMPT, Assignment
from .decisions import AdmissionDecision, CycleResult, PreemptionDecision
from .entry import IMMEDIATE_BEST_EFFORT, Entry, EntryState
from .flavors import FlavorAssigner, search_partial_counts
from .model import LabelSelector
from .ordering import FairSharingOrder, classical_order
from .ownership import owned_result
from .parts import Parts
from .preemption import Target
from .preemption_issue import issue_preemptions
from .preemptor import Preemptor
from .quota import FR, add_usages, available, remove_usages
from .runtime import ClusterQueueRuntime
from .selectors import selector_matches
from .snapshot import Snapshot
from .status import changed_statuses
from .tas_admission import placed
from .workloads import PendingInfo, ReservedInfo, can_be_partially_admitted


class Cycle:
    def __init__(self, p: Parts, now: float) -> None:
        self.p = p
        self.now = now
        self.snap = Snapshot(p.tree.cqs, p.tree.flavors)
        self.preemptor = Preemptor(self.snap, p.config.fair_sharing)
        self.admissions: list[AdmissionDecision] = []
        self.preemptions: list[PreemptionDecision] = []
        self.preempted: dict[str, ReservedInfo] = {}  # victims chosen in this cycle (add with preempt)
        # The victims' usage summed per ClusterQueue, per cohort tree (id of its root): a fit check
        # removes one sum per queue of its own tree, not every victim of the cycle (O(victims) per
        # entry made a cycle with thousands of preemptions run for minutes).
        self.victim_usage: dict[int, dict[str, dict[FR, int]]] = {}
        self.victims: dict[int, dict[str, ReservedInfo]] = {}  # the same victims by tree (id of its root)
        self.reserved_roots: set[int] = set()  # trees where the cycle holds capacity for someone

    # --- phase 3 ------------------------------------------------------------------------------

    def nominate(self, heads: list[tuple[PendingInfo, ClusterQueueRuntime]]) -> tuple[list[Entry], list[Entry]]:
        tree = self.p.tree
        entries: list[Entry] = []
        inadmissible: list[Entry] = []
        for info, cq in heads:
            e = Entry(info, cq, tree.epoch_of(cq))
            w = info.wl
            labels = tree.namespaces.get(w.namespace)
            if any(c.state in ("Retry", "Rejected") for c in w.admission_checks):
                e.message, e.reason = "The workload has failed admission checks", "PendingEvaluation"
            elif labels is None:
                e.message = f'workload namespace "{w.namespace}" does not exist: namespaces "{w.namespace}" not found'
                e.reason = "Misconfigured"
            elif not selector_matches(cq.spec.namespace_selector, labels):
                e.message, e.reason = "workload namespace doesn't match ClusterQueue selector", "Misconfigured"
                e.requeue_reason = "NamespaceMismatch"
            else:
                e.record(*self.assignments(e))
                entries.append(e)
                continue
            inadmissible.append(e)
        return entries, inadmissible

    def assignments(
        self, e: Entry, nomination: dict[str, dict[str, str]] | None = None
    ) -> tuple[Assignment, list[Target]]:
        with self.preemptor.unchanged():  # flavor assignment and target search only simulate
            return self._assignments(e, nomination)

    def _assignments(
        self, e: Entry, nomination: dict[str, dict[str, str]] | None
    ) -> tuple[Assignment, list[Target]]:
        p, info, cq = self.p, e.info, e.cq
        if info.last_assignment is not None and info.last_assignment.outdated(cq.generation, p.cycle):
            info.last_assignment = None
        fair = p.config.fair_sharing is not None
        assigner = FlavorAssigner(info, cq, p.tree.flavors, self.preemptor, fair, p.cycle, nomination)
        full = assigner.assign()
        mode = full.mode()
        if mode == FIT:
            return full, []
        if mode == PREEMPT:
            targets = self.preemptor.get_targets(info, cq, full)
            if targets:
                return full, targets
        if can_be_partially_admitted(info.wl):

            def fits(counts: list[int]) -> tuple[Assignment, list[Target]] | None:
                a = assigner.assign(counts)
                m = a.mode()
                if m == FIT:
                    return a, []
                if m == PREEMPT:
                    t = self.preemptor.get_targets(info, cq, a)
                    if t:
                        return a, t
                return None

            found = search_partial_counts(info.wl.pod_sets, fits)
            if found is not None:
                return found
        return full, []

    # --- phase 5 ------------------------------------------------------------------------------

    def preempt(self, info: ReservedInfo) -> None:
        if info.key in self.preempted:
            return
        self.preempted[info.key] = info
        root = id(self.snap.cqs[info.cq].node.root())
        self.victims.setdefault(root, {})[info.key] = info
        per_cq = self.victim_usage.setdefault(root, {})
        per_cq[info.cq] = _summed(per_cq.get(info.cq), info.usage)

    def _fits(self, cq: ClusterQueueRuntime, usage: dict[FR, int], targets: list[Target]) -> bool:
        """Kueue fits(): does `usage` fit with this cycle's victims and `targets` gone? Only the
        victims of cq's own tree can change what it has available."""
        root = cq.node.root()
        per_cq = self.victim_usage.get(id(root), {})
        extra = [t.info for t in targets if t.info.key not in self.preempted]
        if extra:
            per_cq = dict(per_cq)
            for info in extra:
                if self.snap.cqs[info.cq].node.root() is root:
                    per_cq[info.cq] = _summed(per_cq.get(info.cq), info.usage)
        removed = [(self.snap.cqs[name].node, u) for name, u in per_cq.items()]
        for node, u in removed:
            remove_usages(node, u)
        try:
            return all(max(0, available(cq.node, fr)) >= q for fr, q in usage.items())
        finally:
            for node, u in removed:
                add_usages(node, u)

    def _fits_beside_victims(self, cq: ClusterQueueRuntime, usage: dict[FR, int]) -> bool:
        """An admission needing no preemption must fit beside what is still reserved. _fits (Kueue's
        fits()) counts this cycle's victims as gone for every entry, so a workload could take a
        victim's share while the victim still holds it: reserved past quota until the eviction
        lands. kq never reserves past quota; the workload is admitted once the victims are gone."""
        return all(max(0, available(cq.node, fr)) >= q for fr, q in usage.items())

    def _overlaps(self, targets: list[Target]) -> bool:
        return any(t.info.key in self.preempted for t in targets)

    def _refresh_assignment(self, e: Entry) -> dict[FR, int]:
        """Kueue updateAssignmentIfNeeded: recompute when targets overlap another entry's victims.
        Whether it fits (Kueue computes it here) is asked later, by `process`, and only of the
        entries that get that far: nothing changes the state in between, and a fit check walks
        every victim queue of the tree twice."""
        assert e.assignment is not None
        if not self._overlaps(e.targets):
            return e.assignment.usage
        # Victims in other trees change neither this tree's quota nor its preemption candidates.
        root = id(e.cq.node.root())
        restore = self.snap.simulate_removal_summed(self.victims.get(root, {}).values(),
                                                    self.victim_usage.get(root, {}))
        e.info.last_assignment = None
        nomination = e.assignment.flavor_mapping()
        try:
            a, t = self.assignments(e, nomination)
        finally:
            restore()
        e.record(a, t)
        if a.mode() == FIT:
            a.set_mode(DEFERRED_FIT)  # fits only once the other preemptions complete
        return a.usage

    def reserve(self, cq: ClusterQueueRuntime, usage: dict[FR, int]) -> None:
        self.snap.reserve_for_cycle(cq, usage)
        self.reserved_roots.add(id(cq.node.root()))

    def process(self, e: Entry) -> None:
        cq = e.cq
        e.tainted = id(cq.node.root()) in self.reserved_roots
        usage = self._refresh_assignment(e)
        a = e.assignment
        assert a is not None
        mode = a.mode()
        if mode == NO_FIT:
            e.requeue_reason = "NoFit"
            e.reason = a.no_fit_reason or "Pending"
            return
        if mode == PREEMPT and not e.targets:
            e.requeue_reason = "PreemptionNoCandidates"
            e.reason = "WaitingForQuota"
            if cq.spec.preemption.reclaim_within_cohort != "Any":
                self.reserve(cq, self._to_reserve(e))
            return
        if mode == DEFERRED_FIT:
            e.message = (
                "Workload has overlapping preemption targets with another workload, "
                "but will fit after these preemptions complete"
            )
            e.reason, e.requeue_reason = "WaitingForPreemptedWorkloads", "PendingPreemption"
            e.info.last_assignment = None
            self.reserve(cq, usage)
            return
        if self._overlaps(e.targets):
            e.skip("Workload has overlapping preemption targets with another workload")
            return
        if not self._fits(cq, usage, e.targets) or (mode == FIT and not self._fits_beside_victims(cq, usage)):
            e.skip("Workload no longer fits after processing another workload")
            return
        if mode == FIT and not placed(self, e, usage):
            return
        for t in e.targets:
            self.preempt(t.info)
        if mode == PREEMPT:
            self.reserve(cq, usage)
            e.reason = "WaitingForPreemptedWorkloads"
            self.preemptions += issue_preemptions(self.p, e)
            return
        if self._pods_not_ready():
            e.message = "waiting for all admitted workloads to be in PodsReady condition"
            e.reason = e.requeue_reason = "WaitingForPodsReady"
            return
        self._admit(e)

    def _pods_not_ready(self) -> bool:
        """waitForPodsReady.blockAdmission: a workload holding quota (ours of this cycle included)
        does not have PodsReady=True, so nothing else is admitted (Kueue waitForPodsReadyIfNeeded)."""
        if not self.p.config.block_admission:
            return False
        return any(not r.wl.pods_ready for r in self.p.book.reserved.values())

    def _to_reserve(self, e: Entry) -> dict[FR, int]:
        """Kueue quotaResourcesToReserve: hold what this queue could take without preempting."""
        a, node = e.assignment, e.cq.node
        assert a is not None
        out: dict[FR, int] = {}
        for fr, v in a.usage.items():
            q = node.quotas.get(fr)
            nominal = q.nominal if q is not None else 0
            used = node.usage.get(fr, 0)
            if a.borrowing > 0:
                out[fr] = v if q is None or q.borrowing_limit is None else min(v, nominal + q.borrowing_limit - used)
            else:
                out[fr] = max(0, min(v, nominal - used))
        return out

    def _admit(self, e: Entry) -> None:
        d = self.decision(e)
        ws.assume(self.p, d)
        self.snap.fresh.add(d.workload)
        e.state = EntryState.ASSUMED
        self.admissions.append(d)

    def decision(self, e: Entry) -> AdmissionDecision:
        p, cq, a, w = self.p, e.cq, e.assignment, e.info.wl
        assert a is not None
        pod_sets = a.to_pod_set_assignments()
        if e.topology:
            pod_sets = tuple(msgspec.structs.replace(ps, topology_assignment=e.topology.get(ps.name))
                             for ps in pod_sets)
        if e.delayed:
            pod_sets = tuple(msgspec.structs.replace(ps, delayed_topology_request="Pending") if ps.name in e.delayed
                             else ps for ps in pod_sets)
        checks = cq.checks_for({f for p in pod_sets for f in p.flavors.values()})
        return AdmissionDecision(
            id=p.ids.next("reserve", w.uid, w.resource_version),
            workload=w.key,
            uid=w.uid,
            resource_version=w.resource_version,
            cluster_queue=cq.name,
            pod_sets=pod_sets,
            borrowing=a.borrowing > 0,
            admission_checks=checks,
            admitted=not checks,
            message=f"Quota reserved in ClusterQueue {cq.name}",
        )

    # --- phase 6 ------------------------------------------------------------------------------

    def requeue(self, entries: list[Entry]) -> None:
        p = self.p
        for e in entries:
            if e.state is EntryState.ASSUMED:
                continue
            reason = e.requeue_reason
            if e.state is EntryState.SKIPPED and not reason:
                reason = "FailedAfterNomination"
            q = e.cq.queue
            immediate = reason != "NamespaceMismatch" if q.strict_fifo else reason in IMMEDIATE_BEST_EFFORT
            key = e.info.key
            if p.book.pending.get(key) is e.info:
                q.requeue(e.info, immediate, reason, self.now)
                if not q.is_parked(key) and not e.tainted:
                    q.stall = (e.info, e.epoch)
            if reason != "WaitingForTopology":  # a round trip to the solver: not worth a status write
                ws.report_pending(p, e.info.wl, e.reason or "Pending", e.message)


def _summed(a: dict[FR, int] | None, b: Mapping[FR, int]) -> dict[FR, int]:
    """a + b per resource, as a new dict (a is shared with earlier fit checks' snapshots of it)."""
    out = dict(a) if a else {}
    for fr, v in b.items():
        out[fr] = out.get(fr, 0) + v
    return out


def _release_due(p: Parts, now: float) -> None:
    """Phase 0: backoffs that ended, and trees where something freed capacity or changed quota;
    admitted workloads past their maximum execution time are deactivated."""
    check_rules.deactivate_expired(p, now)
    tree = p.tree
    for info in p.book.pop_due(now):
        cq = tree.cq_for_lq(info.lq_key)
        if cq is not None and cq.queue.unpark(info.key, now):
            p.reporter.mark_cq(cq.name)
    for root in tree.take_requeue_roots():
        for node in [root] if root.is_cq else root.subtree_cqs():
            cq = tree.cqs.get(node.name)
            if cq is None:
                continue
            selector = cq.spec.namespace_selector

            def eligible(info: PendingInfo, selector: LabelSelector | None = selector) -> bool:
                labels = tree.namespaces.get(info.wl.namespace)
                return labels is not None and selector_matches(selector, labels)

            if cq.queue.unpark_all(now, eligible):
                p.reporter.mark_cq(cq.name)


def _take_heads(p: Parts) -> list[tuple[PendingInfo, ClusterQueueRuntime]]:
    """Phase 1: one head per active ClusterQueue whose head is worth trying."""
    heads: list[tuple[PendingInfo, ClusterQueueRuntime]] = []
    for cq in list(p.tree.schedulable()):
        info = cq.queue.pop()
        if info is not None:
            heads.append((info, cq))
    return heads


def run_cycle(p: Parts, now: float, report_status: bool = True) -> CycleResult:
    p.now = now
    _release_due(p, now)
    heads = _take_heads(p)
    admissions: tuple[AdmissionDecision, ...] = ()
    preemptions: tuple[PreemptionDecision, ...] = ()
    if heads:
        p.cycle += 1
        cycle = Cycle(p, now)
        entries, inadmissible = cycle.nominate(heads)
        ordered = FairSharingOrder(entries) if p.config.fair_sharing is not None else classical_order(entries)
        for e in ordered:
            cycle.process(e)
        cycle.snap.end_cycle()
        cycle.requeue(entries + inadmissible)
        admissions, preemptions = tuple(cycle.admissions), tuple(cycle.preemptions)
    admissions = tuple(p.placements.take_ready()) + admissions  # placed since the last cycle
    pending = p.reporter.take_pending()
    evictions, deactivations, checks_ready = p.ledger.take()
    cq_status, lq_status = changed_statuses(p) if report_status else ((), ())
    return owned_result(p, CycleResult(
        cycle=p.cycle,
        admissions=admissions,
        preemptions=preemptions,
        evictions=tuple(evictions),
        deactivations=tuple(deactivations),
        checks_ready=tuple(checks_ready),
        pending=tuple(pending),
        cluster_queues=cq_status,
        local_queues=lq_status,
        placements=tuple(p.placements.take()),
        repairs=tuple(p.placements.take_repairs()),
    ))
