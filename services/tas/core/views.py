"""Per-shape count views: how many pods (and slices) of one pod shape fit in every domain.

A view is built once per pod shape (requests, tolerations, node selector) and then
kept current: a change to one leaf updates its ancestors' sums and, for the levels
that were queried, a sorted index of (slices, pods, values) keys, so a placement
finds the best-fit or least-free domain of a level by bisection instead of a scan.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator
from typing import TYPE_CHECKING

from services.tas.core.model import NodeInfo
from services.tas.core.shape import NONE, Shape, count_in

if TYPE_CHECKING:
    from services.tas.core.tree import CapacityTree

__all__ = ["Shape", "ShapeCounts", "SliceCounts", "count_in", "shape_view"]

_EMPTY: dict[str, int] = {}
SMALL_LEVEL = 128  # levels with at most this many domains are sorted when asked instead of kept sorted
_Key = tuple[int, int, tuple[str, ...], int]




def _limiting(free: dict[str, int], requests: tuple[tuple[str, int], ...]) -> str:
    return min(requests, key=lambda rv: (free.get(rv[0], 0) // rv[1], rv[0]))[0]


def _why_not(tree: CapacityTree, node: NodeInfo, shape: Shape) -> str:
    for t in node.taints:
        if t.effect == "PreferNoSchedule":
            continue
        if not any(x.tolerates(t) for x in shape.tolerations + tree.flavor.tolerations):
            return "taint " + (f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}")
    return "nodeSelector"


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
        self.index: dict[int, list[_Key]] = {}  # kept sorted as counts change (levels of many domains)
        self._scratch: dict[int, tuple[int, list[_Key]]] = {}  # small levels: sorted when asked, per version
        self.version = 0

    def add_domain(self, d: int) -> None:
        self.slc.append(0)
        lv = self.view.tree.dlevel[d]
        idx = self.index.get(lv)
        if idx is not None:
            insort(idx, (0, 0, self.view.tree.dvalues[d], d))

    def pushed(self, path: list[tuple[int, int, int]]) -> None:
        """`path`: (domain, old pods, new pods) from a leaf up to its root."""
        tree = self.view.tree
        self.version += 1
        dlevel, dvalues, index = tree.dlevel, tree.dvalues, self.index
        dslc = 0
        slc = self.slc
        top = self.level
        for d, old_p, new_p in path:
            lv = dlevel[d]
            if lv > top:
                continue
            old_s = slc[d]
            if lv == top:
                new_s = new_p // self.size
                dslc = new_s - old_s
            else:
                new_s = old_s + dslc
            slc[d] = new_s
            idx = index.get(lv)
            if idx is not None:
                values = dvalues[d]
                del idx[bisect_left(idx, (old_s, old_p, values, d))]
                insort(idx, (new_s, new_p, values, d))

    def _index(self, level: int) -> list[_Key]:
        idx = self.index.get(level)
        if idx is not None:
            return idx
        scratch = self._scratch.get(level)
        if scratch is not None and scratch[0] == self.version:
            return scratch[1]
        domains = self.view.tree.by_level[level]
        pod = self.view.pod
        idx = sorted((self.slc[d], pod[d], v, d) for v, d in domains.items())
        if len(domains) > SMALL_LEVEL:
            self.index[level] = idx
        else:
            self._scratch[level] = (self.version, idx)
        return idx

    def last(self, level: int) -> int:
        """Last domain of LeastFreeCapacity order (most slices)."""
        return self._index(level)[-1][3]

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
        # why leaves hold no pod (for the "doesn't fit" message), kept as tallies
        self.reason: dict[int, tuple[int, str | None]] = {}
        self.tally: dict[str, int] = {}
        n = len(tree.dvalues)
        self.pod = [0] * n
        for d in tree.by_level[tree.last].values():
            self.pod[d] = self.leaf_count(d)
        for lv in range(tree.last - 1, -1, -1):
            for d in tree.by_level[lv].values():
                self.pod[d] = sum(self.pod[c] for c in tree.dchildren[d])
        self.slices: dict[tuple[int, int], SliceCounts] = {}
        self.pending: set[int] = set()  # leaves changed since the view was last used

    def catch_up(self) -> None:
        if self.pending:
            for leaf in sorted(self.pending):
                self.leaf_changed(leaf)
            self.pending.clear()

    def eligible(self, node: NodeInfo) -> bool:
        cached = self._eligible.get(node.name)
        if cached is not None and cached[0] is node:
            return cached[1]
        ok = self.tree.eligible(node, self.shape.tolerations, self.shape.selector)
        self._eligible[node.name] = (node, ok)
        return ok

    def leaf_count(self, leaf: int) -> int:
        count, total, why = self._leaf_count(leaf)
        old = self.reason.get(leaf)
        new = (total, why)
        if old != new:
            tally = self.tally
            if old is not None:
                tally["total"] -= old[0]
                if old[1] is not None:
                    tally[old[1]] -= 1
            tally["total"] = tally.get("total", 0) + total
            if why is not None:
                tally[why] = tally.get(why, 0) + 1
            self.reason[leaf] = new
        return count

    def _leaf_count(self, leaf: int) -> tuple[int, int, str | None]:
        """(pods that fit, nodes it counts as, why none fits when it counts)."""
        tree = self.tree
        names = tree.leaf_nodes.get(leaf)
        if not names:
            return 0, 0, None
        if len(names) > 1:
            free = tree.leaf_free(leaf, self.shape)
            c = count_in(free, self.shape.requests)
            return c, 1, (None if c else "resource " + _limiting(free, self.shape.requests))
        node = tree.nodes[names[0]]
        if not node.ready or node.unschedulable:
            return 0, 0, None
        if not self.eligible(node):
            return 0, 1, _why_not(tree, node, self.shape)
        alloc = node.allocatable
        used = tree.node_used.get(node.name, _EMPTY)
        held = tree.leaf_held.get(leaf, _EMPTY)
        best = NONE
        limit = ""
        for r, v in self.shape.requests:
            c = (alloc.get(r, 0) - used.get(r, 0) - held.get(r, 0)) // v
            if c < best:
                best, limit = c, r
        if best <= 0:
            return 0, 1, "resource " + limit
        return best, 1, None

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

    def exclusions(self) -> tuple[int, list[str]]:
        """Nodes considered and why some hold no pod, as Kueue words it."""
        reasons = []
        for why, n in self.tally.items():
            if why == "total" or n == 0:
                continue
            kind, _, what = why.partition(" ")
            reasons.append(f"nodeSelector: {n}" if why == "nodeSelector" else f'{kind} "{what}": {n}')
        return self.tally.get("total", 0), sorted(reasons)

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


def shape_view(tree: CapacityTree, shape: Shape) -> ShapeCounts:
    """The tree's maintained count view for `shape` (built on first use)."""
    return tree.cached(shape, lambda: ShapeCounts(tree, shape))
