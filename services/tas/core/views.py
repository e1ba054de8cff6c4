"""Per-shape count views: how many pods (and slices) of one pod shape fit in every domain.

A view is built once per pod shape (requests, tolerations, node selector) and then
kept current: a change to one leaf updates its ancestors' sums and, for the levels
that were queried, a sorted index of (slices, pods, values) keys, so a placement
finds the best-fit or least-free domain of a level by bisection instead of a scan.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from services.tas.core.model import NodeInfo, TolerationSpec

if TYPE_CHECKING:
    from services.tas.core.tree import CapacityTree

__all__ = ["Shape", "ShapeCounts", "SliceCounts"]

_EMPTY: dict[str, int] = {}
_Key = tuple[int, int, tuple[str, ...], int]


class Shape(NamedTuple):
    requests: tuple[tuple[str, int], ...]  # one pod, with ("pods", 1); only positive amounts
    tolerations: tuple[TolerationSpec, ...]
    selector: tuple[tuple[str, str], ...]


def count_in(free: dict[str, int], requests: tuple[tuple[str, int], ...]) -> int:
    best = -1
    for r, v in requests:
        c = free.get(r, 0) // v
        if best < 0 or c < best:
            best = c
    return max(best, 0)


class SliceCounts:
    """Slices of `size` pods within one domain of `level`, summed above that level."""

    def __init__(self, view: ShapeCounts, level: int, size: int) -> None:
        self.view = view
        self.level = level
        self.size = size
        tree = view.tree
        n = len(tree.dvalues)
        self.slc = [0] * n
        pod = view.pod
        for lv in range(level, -1, -1):
            for d in tree.by_level[lv].values():
                if lv == level:
                    self.slc[d] = pod[d] // size
                else:
                    self.slc[d] = sum(self.slc[c] for c in tree.dchildren[d])
        self.index: dict[int, list[_Key]] = {}

    def add_domain(self, d: int) -> None:
        self.slc.append(0)
        lv = self.view.tree.dlevel[d]
        idx = self.index.get(lv)
        if idx is not None:
            insort(idx, (0, 0, self.view.tree.dvalues[d], d))

    def pushed(self, path: list[tuple[int, int, int]]) -> None:
        """`path`: (domain, old pods, new pods) from a leaf up to its root."""
        tree = self.view.tree
        dslc = 0
        slc = self.slc
        for d, old_p, new_p in path:
            lv = tree.dlevel[d]
            if lv > self.level:
                continue
            old_s = slc[d]
            new_s = new_p // self.size if lv == self.level else old_s + dslc
            if lv == self.level:
                dslc = new_s - old_s
            slc[d] = new_s
            idx = self.index.get(lv)
            if idx is not None:
                values = tree.dvalues[d]
                i = bisect_left(idx, (old_s, old_p, values, d))
                del idx[i]
                insort(idx, (new_s, new_p, values, d))

    def _index(self, level: int) -> list[_Key]:
        idx = self.index.get(level)
        if idx is None:
            tree = self.view.tree
            pod = self.view.pod
            idx = sorted((self.slc[d], pod[d], v, d) for v, d in tree.by_level[level].items())
            self.index[level] = idx
        return idx

    def first_at_least(self, level: int, needed: int) -> int | None:
        """The domain with the fewest slices >= needed (then fewest pods, then values): Kueue's BestFit."""
        idx = self._index(level)
        i = bisect_left(idx, (needed,))
        return idx[i][3] if i < len(idx) else None

    def most(self, level: int) -> int | None:
        """First domain of BestFit order (most slices, then fewest pods, then values)."""
        idx = self._index(level)
        if not idx:
            return None
        i = bisect_left(idx, (idx[-1][0],))
        return idx[i][3]

    def descending(self, level: int) -> Iterator[int]:
        """BestFit order: slices descending, then pods and values ascending."""
        idx = self._index(level)
        end = len(idx)
        while end > 0:
            start = bisect_left(idx, (idx[end - 1][0],), 0, end)
            for k in idx[start:end]:
                yield k[3]
            end = start

    def ascending_from(self, level: int, needed: int) -> Iterator[int]:
        """LeastFreeCapacity order from the first domain with >= needed slices."""
        idx = self._index(level)
        for k in idx[bisect_left(idx, (needed,)) :]:
            yield k[3]


class ShapeCounts:
    """Pods of one shape that fit per domain, kept current as leaves change."""

    def __init__(self, tree: CapacityTree, shape: Shape) -> None:
        self.tree = tree
        self.shape = shape
        self._eligible: dict[str, tuple[NodeInfo, bool]] = {}
        n = len(tree.dvalues)
        self.pod = [0] * n
        for d in tree.by_level[tree.last].values():
            self.pod[d] = self.leaf_count(d)
        for lv in range(tree.last - 1, -1, -1):
            for d in tree.by_level[lv].values():
                self.pod[d] = sum(self.pod[c] for c in tree.dchildren[d])
        self.slices: dict[tuple[int, int], SliceCounts] = {}

    def eligible(self, node: NodeInfo) -> bool:
        cached = self._eligible.get(node.name)
        if cached is not None and cached[0] is node:
            return cached[1]
        ok = self.tree.eligible(node, self.shape.tolerations, self.shape.selector)
        self._eligible[node.name] = (node, ok)
        return ok

    def leaf_count(self, leaf: int) -> int:
        tree = self.tree
        names = tree.leaf_nodes.get(leaf)
        if not names:
            return 0
        if len(names) > 1:
            return count_in(tree.leaf_free(leaf, self.shape), self.shape.requests)
        node = tree.nodes[names[0]]
        if not self.eligible(node):
            return 0
        alloc = node.allocatable
        used = tree.node_used.get(node.name, _EMPTY)
        held = tree.leaf_held.get(leaf, _EMPTY)
        best = -1
        for r, v in self.shape.requests:
            c = (alloc.get(r, 0) - used.get(r, 0) - held.get(r, 0)) // v
            if best < 0 or c < best:
                best = c
        return max(best, 0)

    def slice_counts(self, level: int, size: int) -> SliceCounts:
        key = (level, size)
        agg = self.slices.get(key)
        if agg is None:
            agg = self.slices[key] = SliceCounts(self, level, size)
        return agg

    def add_domain(self, d: int) -> None:
        self.pod.append(0)
        for agg in self.slices.values():
            agg.add_domain(d)

    def leaf_changed(self, leaf: int) -> None:
        new = self.leaf_count(leaf)
        delta = new - self.pod[leaf]
        if delta == 0:
            return
        path: list[tuple[int, int, int]] = []
        d = leaf
        parent = self.tree.dparent
        pod = self.pod
        while d >= 0:
            old = pod[d]
            pod[d] = old + delta
            path.append((d, old, old + delta))
            d = parent[d]
        for agg in self.slices.values():
            agg.pushed(path)
