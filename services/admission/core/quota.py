"""Quota and usage through the cohort tree (Kueue pkg/cache/scheduler/resource_node.go).

A node is a ClusterQueue or a Cohort. `subtree_quota` is the node's own nominal quota plus
what its children lend it (their subtree quota minus what their lending limits keep local);
`usage` is, for a ClusterQueue, the sum of its reserving workloads and, for a Cohort, the
part of its children's usage that exceeds what they keep local. Usage is updated
incrementally (add/remove bubble up only the part beyond the local quota), so the whole
tree is a function of the ClusterQueue usages: adding and then removing the same amount,
in any interleaving, restores every node exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

FR = tuple[str, str]  # (flavor, resource)


class Quota:
    __slots__ = ("nominal", "borrowing_limit", "lending_limit")

    def __init__(self, nominal: int, borrowing_limit: int | None, lending_limit: int | None) -> None:
        self.nominal = nominal
        self.borrowing_limit = borrowing_limit
        self.lending_limit = lending_limit

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quota) and (
            (self.nominal, self.borrowing_limit, self.lending_limit)
            == (other.nominal, other.borrowing_limit, other.lending_limit)
        )

    def __repr__(self) -> str:
        return f"Quota({self.nominal}, {self.borrowing_limit}, {self.lending_limit})"


class QuotaNode:
    """Mutable quota/usage state of one ClusterQueue or Cohort. Children are kept sorted by name."""

    __slots__ = (
        "name",
        "is_cq",
        "parent",
        "quotas",
        "subtree_quota",
        "usage",
        "child_cqs",
        "child_cohorts",
        "fair_weight",
        "over",
        "_lendable",
        "_height",
    )

    def __init__(self, name: str, is_cq: bool) -> None:
        self.name = name
        self.is_cq = is_cq
        self.parent: QuotaNode | None = None
        self.quotas: dict[FR, Quota] = {}
        self.subtree_quota: dict[FR, int] = {}
        self.usage: dict[FR, int] = {}
        self.child_cqs: list[QuotaNode] = []
        self.child_cohorts: list[QuotaNode] = []
        self.fair_weight = 1.0
        # children whose usage of a flavor/resource exceeds their subtree quota (preemption candidates)
        self.over: dict[FR, dict[QuotaNode, None]] = {}
        self._lendable: dict[str, int] | None = None
        self._height: int | None = None

    def __repr__(self) -> str:
        return f"QuotaNode({'cq' if self.is_cq else 'cohort'} {self.name})"

    def ancestors(self) -> Iterator[QuotaNode]:
        """Parent first, root last."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def subtree_cqs(self) -> list[QuotaNode]:
        out = list(self.child_cqs)
        for c in self.child_cohorts:
            out.extend(c.subtree_cqs())
        return out


def _insert_sorted(children: list[QuotaNode], node: QuotaNode) -> None:
    i = 0
    while i < len(children) and children[i].name < node.name:
        i += 1
    children.insert(i, node)


def link(child: QuotaNode, parent: QuotaNode | None) -> None:
    """Move `child` under `parent` (None detaches). The caller rebuilds the affected trees."""
    old = child.parent
    if old is parent:
        return
    if old is not None:
        (old.child_cqs if child.is_cq else old.child_cohorts).remove(child)
    child.parent = parent
    if parent is not None:
        _insert_sorted(parent.child_cqs if child.is_cq else parent.child_cohorts, child)


# --- arithmetic ------------------------------------------------------------------------------


def local_quota(node: QuotaNode, fr: FR) -> int:
    """Capacity only this subtree sees: what the lending limit keeps out of the parent."""
    q = node.quotas.get(fr)
    if q is not None and q.lending_limit is not None:
        return max(0, node.subtree_quota.get(fr, 0) - q.lending_limit)
    return 0


def local_available(node: QuotaNode, fr: FR) -> int:
    return max(0, local_quota(node, fr) - node.usage.get(fr, 0))


def available(node: QuotaNode, fr: FR) -> int:
    """Unused capacity reachable from `node` through its ancestors, honouring borrowing limits.

    Negative when the subtree is over-admitted (quota was removed after admission). Walked root
    first without recursion, local_quota inlined: it runs for every head, every fit check and
    every preemption candidate (the arithmetic is exactly that of local_quota/local_available).
    """
    chain: list[QuotaNode] = []
    while node.parent is not None:
        chain.append(node)
        node = node.parent
    avail = node.subtree_quota.get(fr, 0) - node.usage.get(fr, 0)
    for n in reversed(chain):
        q = n.quotas.get(fr)
        used = n.usage.get(fr, 0)
        if q is None:
            avail += 0 if used >= 0 else -used  # no quota here: local quota 0
            continue
        lq = 0
        if q.lending_limit is not None:
            lq = n.subtree_quota.get(fr, 0) - q.lending_limit
            if lq < 0:
                lq = 0
        if q.borrowing_limit is not None:
            through = n.subtree_quota.get(fr, 0) - lq - (used - lq if used > lq else 0) + q.borrowing_limit
            if through < avail:
                avail = through
        avail += lq - used if lq > used else 0
    return avail


def potential_available(node: QuotaNode, fr: FR) -> int:
    """The most `node` could ever use of `fr` with no usage anywhere, honouring borrowing limits."""
    if node.parent is None:
        return node.subtree_quota.get(fr, 0)
    avail = local_quota(node, fr) + potential_available(node.parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        avail = min(node.subtree_quota.get(fr, 0) + q.borrowing_limit, avail)
    return avail


def _track_over(node: QuotaNode, parent: QuotaNode, fr: FR) -> None:
    if node.usage.get(fr, 0) > node.subtree_quota.get(fr, 0):
        over = parent.over.get(fr)
        if over is None:
            parent.over[fr] = {node: None}
        else:
            over[node] = None
    else:
        over = parent.over.get(fr)
        if over is not None:
            over.pop(node, None)


def _note_over(node: QuotaNode, parent: QuotaNode, fr: FR, used: int) -> None:
    """_track_over with the node's new usage already at hand."""
    over = parent.over.get(fr)
    if used > node.subtree_quota.get(fr, 0):
        if over is None:
            parent.over[fr] = {node: None}
        else:
            over[node] = None
    elif over is not None:
        over.pop(node, None)


# add_usage and remove_usage run for every reservation, release and preemption simulation: one
# loop up the tree, no recursion.


def add_usage(node: QuotaNode, fr: FR, val: int) -> None:
    while True:
        used = node.usage.get(fr, 0)
        local = local_quota(node, fr)
        la = local - used if local > used else 0
        used += val
        node.usage[fr] = used
        parent = node.parent
        if parent is None:
            return
        _note_over(node, parent, fr, used)
        if val <= la:
            return
        node, val = parent, val - la


def remove_usage(node: QuotaNode, fr: FR, val: int) -> None:
    while True:
        used = node.usage.get(fr, 0)
        local = local_quota(node, fr)
        stored_in_parent = used - local
        used -= val
        node.usage[fr] = used
        parent = node.parent
        if parent is None:
            return
        _note_over(node, parent, fr, used)
        if stored_in_parent <= 0:
            return
        node, val = parent, min(val, stored_in_parent)


def over_children(node: QuotaNode, frs: Iterable[FR]) -> list[QuotaNode]:
    """Children of `node` using more than their subtree quota of any of `frs` (in no particular order)."""
    found: dict[QuotaNode, None] = {}
    for fr in frs:
        over = node.over.get(fr)
        if over:
            found.update(over)
    return list(found)


def add_usages(node: QuotaNode, usage: Mapping[FR, int]) -> None:
    for fr, v in usage.items():
        if v:
            add_usage(node, fr, v)


def remove_usages(node: QuotaNode, usage: Mapping[FR, int]) -> None:
    for fr, v in usage.items():
        if v:
            remove_usage(node, fr, v)


def borrowing_with(node: QuotaNode, fr: FR, val: int) -> bool:
    """Would `node` use more than its (subtree) quota of `fr` with `val` more?"""
    return node.subtree_quota.get(fr, 0) < node.usage.get(fr, 0) + val


def within_nominal(node: QuotaNode, frs: Iterable[FR]) -> bool:
    sq, us = node.subtree_quota, node.usage
    return all(sq.get(fr, 0) >= us.get(fr, 0) for fr in frs)


def fits_in_quota(node: QuotaNode, requests: Mapping[FR, int]) -> tuple[bool, dict[FR, int]]:
    """Do `requests` fit in the node's own subtree quota, and what is left for the parent to provide."""
    fits = True
    remaining: dict[FR, int] = {}
    for fr, v in requests.items():
        if node.subtree_quota.get(fr, 0) < node.usage.get(fr, 0) + v:
            fits = False
        remaining[fr] = max(0, v - local_available(node, fr))
    return fits, remaining


def height(node: QuotaNode) -> int:
    """Distance to the furthest leaf; a cohort holding only ClusterQueues has height 1."""
    if node._height is None:
        h = min(len(node.child_cqs) + len(node.child_cohorts), 1)
        for c in node.child_cohorts:
            h = max(h, height(c) + 1)
        node._height = h
    return node._height


def lowest_fitting_subtree_height(cq: QuotaNode, fr: FR, val: int) -> tuple[int, bool]:
    """Height of the lowest subtree around `cq` whose quota fits `val` more of `fr`.

    Also says whether that subtree is smaller than the whole tree (reclaim may then be possible
    within it). Kueue FindHeightOfLowestSubtreeThatFits.
    """
    if not borrowing_with(cq, fr, val) or cq.parent is None:
        return 0, cq.parent is not None
    remaining = val - local_available(cq, fr)
    for node in cq.ancestors():
        if not borrowing_with(node, fr, remaining):
            return height(node), node.parent is not None
        remaining -= local_available(node, fr)
    return height(cq.root()), False


def lendable(node: QuotaNode) -> dict[str, int]:
    """Per resource name: what `node` could borrow at most, summed over flavors (for DRS)."""
    if node._lendable is None:
        root = node.root()
        out: dict[str, int] = {}
        for fr in root.subtree_quota:
            out[fr[1]] = out.get(fr[1], 0) + potential_available(node, fr)
        node._lendable = out
    return node._lendable


# --- rebuilding after structure or quota changes ------------------------------------------------


def rebuild_tree(root: QuotaNode) -> None:
    """Recompute subtree quotas and cohort usages from the ClusterQueue usages, top-down."""
    _invalidate(root)
    if root.is_cq:
        root.subtree_quota = {fr: q.nominal for fr, q in root.quotas.items()}
        return
    _update_cohort(root)


def _invalidate(node: QuotaNode) -> None:
    node._lendable = None
    node._height = None
    for c in node.child_cqs:
        c._lendable = None
    for c in node.child_cohorts:
        _invalidate(c)


def _update_cohort(cohort: QuotaNode) -> None:
    cohort.subtree_quota = {fr: q.nominal for fr, q in cohort.quotas.items()}
    cohort.usage = {}
    cohort.over = {}
    for child in cohort.child_cohorts:
        _update_cohort(child)
        _accumulate(cohort, child)
    for child in cohort.child_cqs:
        child.subtree_quota = {fr: q.nominal for fr, q in child.quotas.items()}
        _accumulate(cohort, child)
    for child in cohort.child_cohorts + cohort.child_cqs:
        for fr in sorted(set(child.usage) | set(child.subtree_quota)):
            _track_over(child, cohort, fr)


def _accumulate(parent: QuotaNode, child: QuotaNode) -> None:
    psq, pus = parent.subtree_quota, parent.usage
    for fr, q in child.subtree_quota.items():
        psq[fr] = psq.get(fr, 0) + q - local_quota(child, fr)
    for fr, u in child.usage.items():
        pus[fr] = pus.get(fr, 0) + max(0, u - local_quota(child, fr))
