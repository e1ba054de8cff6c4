"""Choosing preemption targets, classic algorithm (Kueue pkg/scheduler/preemption, classical/).

Candidates are admitted workloads that use a flavor/resource the preemptor needs and that the
ClusterQueue's policies allow it to evict: in its own queue (withinClusterQueue) or in queues of
its cohort tree that use more than their quota (reclaimWithinCohort, borrowWithinCohort). They
are removed in order until the preemptor fits, then added back in reverse order while it still
fits, so no more is preempted than needed. Everything here is a what-if on the snapshot that is
restored before returning: targets are values with reasons; the shell issues the evictions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .quota import (
    FR,
    QuotaNode,
    add_usages,
    available,
    borrowing_with,
    fits_in_quota,
    over_children,
    remove_usages,
    within_nominal,
)
from .runtime import ClusterQueueRuntime
from .snapshot import Snapshot
from .workloads import PendingInfo, ReservedInfo

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

HUMAN_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}

# How a candidate may be preempted (Kueue classical.preemptionVariant).
NEVER, WITHIN_CQ, HIERARCHICAL_RECLAIM, RECLAIM_WITHOUT_BORROWING, RECLAIM_WHILE_BORROWING = range(5)
_VARIANT_REASON = {
    WITHIN_CQ: IN_CLUSTER_QUEUE,
    HIERARCHICAL_RECLAIM: IN_COHORT_RECLAMATION,
    RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
    RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING,
}


# Candidates a walk removes one by one before it checks whether removing all of them could help.
WALK_BEFORE_BOUND = 8


class Target:
    __slots__ = ("info", "reason")

    def __init__(self, info: ReservedInfo, reason: str) -> None:
        self.info = info
        self.reason = reason

    def __repr__(self) -> str:
        return f"Target({self.info.key}, {self.reason})"


class PreemptionContext:
    __slots__ = ("snap", "preemptor", "cq", "frs", "usage")

    def __init__(
        self,
        snap: Snapshot,
        preemptor: PendingInfo,
        cq: ClusterQueueRuntime,
        frs: frozenset[FR],
        usage: Mapping[FR, int],
    ) -> None:
        self.snap = snap
        self.preemptor = preemptor
        self.cq = cq
        self.frs = frs
        self.usage = usage


def satisfies_policy(preemptor: PendingInfo, candidate: ReservedInfo, policy: str) -> bool:
    lower = preemptor.priority > candidate.priority
    if policy == "LowerPriority":
        return lower
    if policy == "LowerOrNewerEqualPriority":
        return lower or (preemptor.priority == candidate.priority and preemptor.order_ts < candidate.order_ts)
    return policy == "Any"


def candidate_order(cq_name: str) -> Callable[[ReservedInfo], tuple[bool, bool, int, float, str]]:
    """Kueue CandidatesOrdering: evicted first, other queues first, lower priority, newest reservation."""

    def key(c: ReservedInfo) -> tuple[bool, bool, int, float, str]:
        return (not c.evicted, c.cq == cq_name, c.priority, -c.reserved_time, c.uid)

    return key


def workload_fits(ctx: PreemptionContext, allow_borrowing: bool) -> bool:
    node = ctx.cq.node
    for fr, v in ctx.usage.items():
        if not allow_borrowing and borrowing_with(node, fr, v):
            return False
        if v > max(0, available(node, fr)):
            return False
    return True


def fill_back(ctx: PreemptionContext, targets: list[Target], allow_borrowing: bool) -> list[Target]:
    """Add targets back, newest removal first, while the preemptor still fits."""
    snap = ctx.snap
    for i in range(len(targets) - 2, -1, -1):
        snap.add_workload(targets[i].info)
        if workload_fits(ctx, allow_borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            snap.remove_workload(targets[i].info)
    return targets


def restore(snap: Snapshot, targets: list[Target]) -> None:
    for t in targets:
        snap.add_workload(t.info)


def borrowing_within_cohort_forbidden(cq: ClusterQueueRuntime) -> tuple[bool, int | None]:
    bwc = cq.spec.preemption.borrow_within_cohort
    if bwc is None or bwc.policy == "Never":
        return True, None
    return False, bwc.max_priority_threshold


# --- classic algorithm ------------------------------------------------------------------------


class _Candidate:
    __slots__ = ("info", "lca", "variant")

    def __init__(self, info: ReservedInfo, lca: QuotaNode | None, variant: int) -> None:
        self.info = info
        self.lca = lca
        self.variant = variant


def _classify(ctx: PreemptionContext, info: ReservedInfo, hierarchical_advantage: bool) -> int:
    if not info.uses_any(ctx.frs):
        return NEVER
    same = info.cq == ctx.cq.name
    p = ctx.cq.spec.preemption
    if not satisfies_policy(ctx.preemptor, info, p.within_cluster_queue if same else p.reclaim_within_cohort):
        return NEVER
    if same:
        return WITHIN_CQ
    if hierarchical_advantage:
        return HIERARCHICAL_RECLAIM
    forbidden, threshold = borrowing_within_cohort_forbidden(ctx.cq)
    if forbidden:
        return RECLAIM_WITHOUT_BORROWING
    incoming = ctx.preemptor.priority
    if info.priority >= incoming or (threshold is not None and info.priority > threshold):
        return RECLAIM_WITHOUT_BORROWING
    return RECLAIM_WHILE_BORROWING


def _from_cq(
    ctx: PreemptionContext, cq: ClusterQueueRuntime, lca: QuotaNode | None, advantage: bool, out: list[_Candidate]
) -> None:
    fresh = ctx.snap.fresh
    for info in cq.workloads.values():
        if info.key in fresh:
            continue
        variant = _classify(ctx, info, advantage)
        if variant != NEVER:
            out.append(_Candidate(info, lca, variant))


def _collect_in_subtree(
    ctx: PreemptionContext,
    current: QuotaNode,
    subtree_root: QuotaNode,
    skip: QuotaNode | None,
    advantage: bool,
    out: list[_Candidate],
) -> None:
    """Candidates under `current` in children over their quota (Kueue collectCandidatesInSubtree).

    Children within their quota on the contested resources are never entered. The order of
    collection does not matter: candidates are sorted afterwards on a total order.
    """
    for child in over_children(current, ctx.frs):
        if child.is_cq:
            if child is not ctx.cq.node and ctx.snap.is_active(child):
                _from_cq(ctx, ctx.snap.runtime(child), subtree_root, advantage, out)
        elif child is not skip:
            _collect_in_subtree(ctx, child, subtree_root, skip, advantage, out)


def _hierarchical_candidates(ctx: PreemptionContext, with_priority: bool) -> tuple[list[_Candidate], list[_Candidate]]:
    """Other queues' candidates: those the preemptor has a hierarchical advantage over, and the
    others (priority candidates), these only when `with_priority` (the caller knows none is usable)."""
    hierarchy: list[_Candidate] = []
    priority: list[_Candidate] = []
    node = ctx.cq.node
    if node.parent is None or ctx.cq.spec.preemption.reclaim_within_cohort == "Never":
        return hierarchy, priority
    advantage, remaining = fits_in_quota(node, ctx.usage)
    previous: QuotaNode | None = None
    for subtree_root in node.ancestors():
        if advantage or with_priority:
            _collect_in_subtree(ctx, subtree_root, subtree_root, previous, advantage,
                                hierarchy if advantage else priority)
        fits, remaining = fits_in_quota(subtree_root, remaining)
        advantage = advantage or fits
        previous = subtree_root
    return hierarchy, priority


def _valid(ctx: PreemptionContext, c: _Candidate, borrowing: bool) -> bool:
    if c.info.cq == ctx.cq.name:
        return True
    if borrowing and c.variant == RECLAIM_WITHOUT_BORROWING:
        return False
    node = ctx.snap.cqs[c.info.cq].node
    if within_nominal(node, ctx.frs):
        return False
    for ancestor in node.ancestors():
        if ancestor is c.lca:
            break
        if within_nominal(ancestor, ctx.frs):
            return False
    return True


def _under_nominal(ctx: PreemptionContext) -> bool:
    node = ctx.cq.node
    for fr in ctx.frs:
        q = node.quotas.get(fr)
        if (q.nominal if q is not None else 0) <= node.usage.get(fr, 0):
            return False
    return True


def _fits_without_all(ctx: PreemptionContext, cands: list[_Candidate], allow_borrowing: bool) -> bool:
    """Would the preemptor fit with every one of `cands` gone? Their usage is removed summed per
    ClusterQueue (one quota walk per queue), then put back."""
    per_cq: dict[str, dict[FR, int]] = {}
    for c in cands:
        u = per_cq.setdefault(c.info.cq, {})
        for fr, v in c.info.usage.items():
            u[fr] = u.get(fr, 0) + v
    removed = [(ctx.snap.cqs[name].node, u) for name, u in per_cq.items()]
    for node, u in removed:
        remove_usages(node, u)
    try:
        return workload_fits(ctx, allow_borrowing)
    finally:
        for node, u in removed:
            add_usages(node, u)


def classical_targets(ctx: PreemptionContext, exhaustive: bool = False) -> list[Target]:
    """Kueue classicalPreemptions, with two shortcuts that change no outcome (`exhaustive` turns
    them off, for tests):

    - with borrowWithinCohort forbidden and the queue at or over its nominal quota only the
      borrowing attempt runs, where every priority candidate (ReclaimWithoutBorrowing) is
      invalid: they are not collected at all;
    - a walk that removed WALK_BEFORE_BOUND candidates without a fit removes every candidate
      still valid at once: if the preemptor does not fit even then, the walk cannot end in a fit
      (removals only add capacity, and a candidate never turns valid by others' removal), so it
      stops there. Walks that fit early pay nothing for it.
    """
    forbidden, _ = borrowing_within_cohort_forbidden(ctx.cq)
    only_borrowing = forbidden and not _under_nominal(ctx)
    same: list[_Candidate] = []
    if ctx.cq.spec.preemption.within_cluster_queue != "Never":
        _from_cq(ctx, ctx.cq, None, False, same)
    hierarchy, priority = _hierarchical_candidates(ctx, with_priority=exhaustive or not only_borrowing)
    order = candidate_order(ctx.cq.name)
    ordered: list[_Candidate] = []
    lists = [sorted(lst, key=lambda c: order(c.info)) for lst in (hierarchy, priority, same)]
    for evicted in (True, False):
        for lst in lists:
            ordered.extend(c for c in lst if c.info.evicted == evicted)

    if (not hierarchy and not priority) or only_borrowing:
        attempts: tuple[bool, ...] = (True,)
    elif forbidden and not hierarchy:
        attempts = (False, True)
    else:
        attempts = (True, False)

    snap = ctx.snap
    for allow_borrowing in attempts:
        targets: list[Target] = []
        for i, c in enumerate(ordered):
            if not _valid(ctx, c, allow_borrowing):
                continue
            snap.remove_workload(c.info)
            targets.append(Target(c.info, _VARIANT_REASON[c.variant]))
            if workload_fits(ctx, allow_borrowing):
                targets = fill_back(ctx, targets, allow_borrowing)
                restore(snap, targets)
                return targets
            if len(targets) == WALK_BEFORE_BOUND and not exhaustive:
                rest = [d for d in ordered[i + 1:] if _valid(ctx, d, allow_borrowing)]
                if not _fits_without_all(ctx, rest, allow_borrowing):
                    break
        restore(snap, targets)
    return []
