"""Phase 4: the order in which nominated entries are admitted (Kueue classicalIterator, fairSharingIterator)."""

from __future__ import annotations

from collections.abc import Iterator

from .entry import Entry
from .fair_share import DRS, compare_drs, dominant_resource_share
from .quota import QuotaNode, add_usages, remove_usages


def classical_order(entries: list[Entry]) -> list[Entry]:
    """Entries that do not borrow first, then higher priority, then older (queue order timestamp)."""
    return sorted(
        entries,
        key=lambda e: (_borrowing(e), -e.info.priority, e.info.order_ts, e.info.key),
    )


def _borrowing(e: Entry) -> int:
    assert e.assignment is not None
    return e.assignment.borrowing


class FairSharingOrder:
    """Pops, per cohort tree, the entry whose queue would have the lowest share after admission.

    A tournament from the root: at every cohort the child (queue or sub-cohort) with the lowest
    dominant resource share, counting its nominated workload, wins; ties go to non-borrowing,
    then priority, then age. Shares are recomputed at every pop since admissions change usage.
    """

    def __init__(self, entries: list[Entry]) -> None:
        self.by_cq: dict[QuotaNode, Entry] = {e.cq.node: e for e in entries}
        self.values: dict[tuple[QuotaNode, int], DRS] = {}

    def __iter__(self) -> Iterator[Entry]:
        while self.by_cq:
            node = min(self.by_cq, key=lambda n: n.name)
            if node.parent is None:
                yield self.by_cq.pop(node)
                continue
            root = node.root()
            self._compute(root)
            winner = self._tournament(root)
            assert winner is not None
            del self.by_cq[winner.cq.node]
            yield winner

    def _compute(self, root: QuotaNode) -> None:
        self.values = {}
        for cq_node in root.subtree_cqs():
            e = self.by_cq.get(cq_node)
            if e is None:
                continue
            usage = e.usage
            add_usages(cq_node, usage)
            try:
                drs = dominant_resource_share(cq_node)
                for ancestor in cq_node.ancestors():
                    self.values[(ancestor, id(e))] = drs
                    drs = dominant_resource_share(ancestor)
            finally:
                remove_usages(cq_node, usage)

    def _less(self, a: Entry, b: Entry, parent: QuotaNode) -> bool:
        a_drs, b_drs = self.values[(parent, id(a))], self.values[(parent, id(b))]
        a_b = a_drs.borrowing_on(a.usage)
        b_b = b_drs.borrowing_on(b.usage)
        if a_b != b_b:
            return not a_b
        c = compare_drs(a_drs, b_drs)
        if c != 0:
            return c < 0
        if a.info.priority != b.info.priority:
            return a.info.priority > b.info.priority
        return a.info.order_ts < b.info.order_ts

    def _tournament(self, cohort: QuotaNode) -> Entry | None:
        candidates: list[Entry] = []
        for child in cohort.child_cohorts:
            c = self._tournament(child)
            if c is not None:
                candidates.append(c)
        for child in cohort.child_cqs:
            e = self.by_cq.get(child)
            if e is not None:
                candidates.append(e)
        if not candidates:
            return None
        best = candidates[0]
        for current in candidates[1:]:
            if self._less(current, best, cohort):
                best = current
        return best
