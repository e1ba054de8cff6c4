"""Choosing preemption targets under fair sharing (Kueue preemption.fairPreemptions, fairsharing/).

Target ClusterQueues are visited from the root, always descending into the child with the
highest dominant resource share; a candidate in another queue is preempted only when the
configured strategy holds between the preemptor's share (with the incoming workload) and the
target's share (LessThanOrEqualToFinalShare: after removing the candidate;
LessThanInitialShare: before), or unconditionally while the preemptor stays within its
nominal quota.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from .fair_share import DRS, NEGATIVE_DRS, compare_drs, dominant_resource_share
from .preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    PreemptionContext,
    Target,
    candidate_order,
    fill_back,
    restore,
    satisfies_policy,
    workload_fits,
)
from .quota import QuotaNode, add_usages, borrowing_with, over_children, remove_usages
from .workloads import ReservedInfo


def less_than_or_equal_to_final_share(preemptor_new: DRS, target_old: DRS, target_new: DRS) -> bool:
    return compare_drs(preemptor_new, target_new) <= 0


def less_than_initial_share(preemptor_new: DRS, target_old: DRS, target_new: DRS) -> bool:
    return compare_drs(preemptor_new, target_old) < 0


Strategy = Callable[[DRS, DRS, DRS], bool]

STRATEGIES: dict[str, Strategy] = {
    "LessThanOrEqualToFinalShare": less_than_or_equal_to_final_share,
    "LessThanInitialShare": less_than_initial_share,
}


def _find_candidates(ctx: PreemptionContext) -> list[ReservedInfo]:
    cq = ctx.cq
    p = cq.spec.preemption
    fresh = ctx.snap.fresh
    out: list[ReservedInfo] = []

    def take(source: dict[str, ReservedInfo], policy: str) -> None:
        for info in source.values():
            if info.key in fresh or not satisfies_policy(ctx.preemptor, info, policy):
                continue
            if info.uses_any(ctx.frs):
                out.append(info)

    if p.within_cluster_queue != "Never":
        take(cq.workloads, p.within_cluster_queue)
    if cq.node.parent is not None and p.reclaim_within_cohort != "Never":
        cohorts = [cq.node.root()]
        while cohorts:
            cohort = cohorts.pop()
            cohorts.extend(cohort.child_cohorts)
            for node in over_children(cohort, ctx.frs):  # queues borrowing a contested resource
                if node.is_cq and node is not cq.node and ctx.snap.is_active(node):
                    take(ctx.snap.runtime(node).workloads, p.reclaim_within_cohort)
    return out


class _Ordering:
    """Kueue TargetClusterQueueOrdering: which ClusterQueue to take the next candidate from."""

    def __init__(self, ctx: PreemptionContext, candidates: list[ReservedInfo]) -> None:
        self.ctx = ctx
        self.preemptor = ctx.cq.node
        self.ancestors = set(self.preemptor.ancestors())
        self.by_cq: dict[str, list[ReservedInfo]] = {}
        for c in candidates:
            self.by_cq.setdefault(c.cq, []).append(c)
        self.pruned_cqs: set[QuotaNode] = set()
        self.pruned_cohorts: set[QuotaNode] = set()
        self.order = candidate_order(ctx.cq.name)

    def has_workload(self, node: QuotaNode) -> bool:
        return bool(self.by_cq.get(node.name))

    def pop(self, node: QuotaNode) -> ReservedInfo:
        return self.by_cq[node.name].pop(0)

    def drop(self, node: QuotaNode) -> None:
        self.pruned_cqs.add(node)

    def __iter__(self) -> Iterator[QuotaNode]:
        if self.preemptor.parent is None:
            while self.preemptor not in self.pruned_cqs and self.has_workload(self.preemptor):
                yield self.preemptor
            return
        root = self.preemptor.root()
        while root not in self.pruned_cohorts:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: QuotaNode) -> QuotaNode | None:
        best_cq: QuotaNode | None = None
        best_cq_drs = NEGATIVE_DRS
        for node in cohort.child_cqs:
            if node in self.pruned_cqs or not self.ctx.snap.is_active(node):
                continue
            drs = dominant_resource_share(node)
            if (not drs.borrowing and node is not self.preemptor) or not self.has_workload(node):
                self.pruned_cqs.add(node)
                continue
            c = compare_drs(drs, best_cq_drs)
            if c == 0 and best_cq is not None:
                if self.order(self.by_cq[node.name][0]) < self.order(self.by_cq[best_cq.name][0]):
                    best_cq = node
            elif c == 1:
                best_cq, best_cq_drs = node, drs
        best_cohort: QuotaNode | None = None
        best_cohort_drs = NEGATIVE_DRS
        for child in cohort.child_cohorts:
            if child in self.pruned_cohorts:
                continue
            drs = dominant_resource_share(child)
            if not drs.borrowing and child not in self.ancestors:
                self.pruned_cohorts.add(child)
            elif compare_drs(drs, best_cohort_drs) >= 0:
                best_cohort, best_cohort_drs = child, drs
        if best_cohort is None and best_cq is None:
            self.pruned_cohorts.add(cohort)
            return None
        if best_cohort is not None and compare_drs(best_cohort_drs, best_cq_drs) >= 0:
            return self._next(best_cohort)
        return best_cq

    def _almost_lca(self, node: QuotaNode, lca: QuotaNode) -> QuotaNode:
        below = node
        for ancestor in node.ancestors():
            if ancestor is lca:
                return below
            below = ancestor
        raise AssertionError(f"{lca.name} is not an ancestor of {node.name}")

    def _almost_lcas(self, target: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
        for ancestor in target.ancestors():
            if ancestor in self.ancestors:
                return self._almost_lca(self.preemptor, ancestor), self._almost_lca(target, ancestor)
        raise AssertionError(f"{target.name} shares no cohort with {self.preemptor.name}")

    def shares(self, target: QuotaNode) -> tuple[DRS, DRS]:
        p, t = self._almost_lcas(target)
        return dominant_resource_share(p), dominant_resource_share(t)

    def target_share_after_removal(self, target: QuotaNode, info: ReservedInfo) -> DRS:
        remove_usages(target, info.usage)
        try:
            return dominant_resource_share(self._almost_lcas(target)[1])
        finally:
            add_usages(target, info.usage)


def _fits_fair(ctx: PreemptionContext) -> bool:
    """workload_fits with the incoming usage (added for share computations) taken out again."""
    remove_usages(ctx.cq.node, ctx.usage)
    try:
        return workload_fits(ctx, True)
    finally:
        add_usages(ctx.cq.node, ctx.usage)


def _run_first(
    ctx: PreemptionContext, candidates: list[ReservedInfo], strategy: Strategy
) -> tuple[bool, list[Target], list[ReservedInfo]]:
    ordering = _Ordering(ctx, candidates)
    snap = ctx.snap
    targets: list[Target] = []
    retry: list[ReservedInfo] = []
    within_nominal = not any(borrowing_with(ctx.cq.node, fr, 0) for fr in ctx.frs)
    for node in ordering:
        if node is ctx.cq.node:
            info = ordering.pop(node)
            snap.remove_workload(info)
            targets.append(Target(info, IN_CLUSTER_QUEUE))
            if _fits_fair(ctx):
                return True, targets, []
            continue
        if within_nominal:
            info = ordering.pop(node)
            snap.remove_workload(info)
            targets.append(Target(info, IN_COHORT_RECLAMATION))
            if _fits_fair(ctx):
                return True, targets, []
            continue
        preemptor_new, target_old = ordering.shares(node)
        if math.isinf(preemptor_new.weighted_share()) and not math.isinf(target_old.weighted_share()):
            while ordering.has_workload(node):
                retry.append(ordering.pop(node))
            continue
        while ordering.has_workload(node):
            info = ordering.pop(node)
            target_new = ordering.target_share_after_removal(node, info)
            if strategy(preemptor_new, target_old, target_new):
                snap.remove_workload(info)
                targets.append(Target(info, IN_COHORT_FAIR_SHARING))
                if _fits_fair(ctx):
                    return True, targets, []
                break  # shares changed: pick the next queue afresh
            retry.append(info)
    return False, targets, retry


def _run_second(
    ctx: PreemptionContext, retry: list[ReservedInfo], targets: list[Target]
) -> tuple[bool, list[Target]]:
    ordering = _Ordering(ctx, retry)
    snap = ctx.snap
    for node in ordering:
        preemptor_new, target_old = ordering.shares(node)
        info = ordering.pop(node)
        if less_than_initial_share(preemptor_new, target_old, target_old):
            snap.remove_workload(info)
            targets.append(Target(info, IN_COHORT_FAIR_SHARING))
            if _fits_fair(ctx):
                return True, targets
        ordering.drop(node)
    return False, targets


def fair_targets(ctx: PreemptionContext, strategies: tuple[str, ...]) -> list[Target]:
    candidates = _find_candidates(ctx)
    if not candidates:
        return []
    candidates.sort(key=candidate_order(ctx.cq.name))
    add_usages(ctx.cq.node, ctx.usage)  # shares include the incoming workload
    try:
        fits, targets, retry = _run_first(ctx, candidates, STRATEGIES[strategies[0]])
        if not fits and len(strategies) > 1:
            fits, targets = _run_second(ctx, retry, targets)
    finally:
        remove_usages(ctx.cq.node, ctx.usage)
    if not fits:
        restore(ctx.snap, targets)
        return []
    targets = fill_back(ctx, targets, True)
    restore(ctx.snap, targets)
    return targets
