"""Entry point for preemption: targets for an assignment, and the oracle the flavor assigner asks."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from .assignment import Assignment
from .fair_preemption import fair_targets
from .flavors import NO_CANDIDATES, POSSIBLE_PREEMPT, POSSIBLE_RECLAIM
from .model import FairSharingConfig
from .preemption import PreemptionContext, Target, classical_targets
from .quota import FR, lowest_fitting_subtree_height
from .runtime import ClusterQueueRuntime
from .snapshot import Snapshot
from .workloads import PendingInfo


class Preemptor:
    def __init__(self, snap: Snapshot, fair_sharing: FairSharingConfig | None) -> None:
        self.snap = snap
        self.fair_sharing = fair_sharing
        # Targets already computed while the snapshot's usage stays as it is (see `unchanged`):
        # the flavor assigner's oracle and get_targets often ask the very same question.
        self._memo: dict[tuple[str, str, frozenset[FR], frozenset[tuple[FR, int]]], list[Target]] | None = None

    @contextmanager
    def unchanged(self) -> Iterator[None]:
        """A stretch in which the caller does not change any usage (simulations restore theirs):
        identical target searches inside it are answered once."""
        self._memo = {}
        try:
            yield
        finally:
            self._memo = None

    def targets_for(
        self, info: PendingInfo, cq: ClusterQueueRuntime, frs: frozenset[FR], usage: Mapping[FR, int]
    ) -> list[Target]:
        memo = self._memo
        if memo is not None:
            key = (info.key, cq.name, frs, frozenset(usage.items()))
            found = memo.get(key)
            if found is None:
                found = memo[key] = self._search(info, cq, frs, usage)
            return list(found)
        return self._search(info, cq, frs, usage)

    def _search(
        self, info: PendingInfo, cq: ClusterQueueRuntime, frs: frozenset[FR], usage: Mapping[FR, int]
    ) -> list[Target]:
        ctx = PreemptionContext(self.snap, info, cq, frs, usage)
        if self.fair_sharing is not None:
            return fair_targets(ctx, self.fair_sharing.preemption_strategies)
        return classical_targets(ctx)

    def get_targets(self, info: PendingInfo, cq: ClusterQueueRuntime, assignment: Assignment) -> list[Target]:
        return self.targets_for(
            info, cq, assignment.frs_needing_preemption(), assignment.total_requests_for(info.wl)
        )

    def simulate(self, info: PendingInfo, cq: ClusterQueueRuntime, fr: FR, quantity: int) -> tuple[int, int]:
        """Kueue PreemptionOracle.SimulatePreemption for one flavor/resource."""
        targets = self.targets_for(info, cq, frozenset((fr,)), {fr: quantity})
        if not targets:
            borrow, _ = lowest_fitting_subtree_height(cq.node, fr, quantity)
            return NO_CANDIDATES, borrow
        restore = self.snap.simulate_usage_removal(t.info for t in targets)
        try:
            borrow_after, _ = lowest_fitting_subtree_height(cq.node, fr, quantity)
        finally:
            restore()
        if any(t.info.cq == cq.name for t in targets):
            return POSSIBLE_PREEMPT, borrow_after
        return POSSIBLE_RECLAIM, borrow_after
