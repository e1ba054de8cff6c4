"""Per-domain counts as one placement sees them, with local changes on top.

A placement reads five numbers per domain (Kueue's domainState): pods, pods when a
leader also takes its place, slices, slices with the leader, leaders (0/1 per leaf,
max below). `FastCounts` reads them from a maintained view (no leader); `FullCounts`
computes them over the whole tree (pod-set groups, and the reference the property
tests compare the fast path with). Changes made while descending stay in `State`.
"""

from __future__ import annotations

from services.tas.core.tree import CapacityTree
from services.tas.core.views import Shape, SliceCounts, count_in

__all__ = ["POD", "POD_WL", "SLC", "SLC_WL", "LEADER", "Source", "FastCounts", "FullCounts", "GroupCounts", "State"]

POD, POD_WL, SLC, SLC_WL, LEADER = range(5)


class Source:
    fast: SliceCounts | None = None

    def get(self, d: int) -> list[int]:
        raise NotImplementedError

    def peek(self, d: int) -> list[int]:
        """Like get, but may return the source's own list: read only."""
        return self.get(d)


class FastCounts(Source):
    def __init__(self, agg: SliceCounts) -> None:
        self.fast = agg
        self._pod = agg.view.pod
        self._slc = agg.slc

    def get(self, d: int) -> list[int]:
        p = self._pod[d]
        s = self._slc[d]
        return [p, p, s, s, 0]


class FullCounts(Source):
    """Kueue's fillInCounts over every domain, optionally with a leader pod."""

    def __init__(
        self,
        tree: CapacityTree,
        shape: Shape,
        slice_level: int,
        slice_size: int,
        leader: tuple[tuple[str, int], ...] | None,
        restrict: int | None = None,
        exclude: frozenset[str] = frozenset(),
    ) -> None:
        """`restrict`: only leaves under that domain; `exclude`: nodes not to use."""
        self.tree = tree
        self.shape = shape
        self.slice_level = slice_level
        self.slice_size = slice_size
        self.leader = leader
        self.restrict = restrict
        self.exclude = exclude
        n = len(tree.dvalues)
        self.state = [[0, 0, 0, 0, 0] for _ in range(n)]
        for leaf in tree.by_level[tree.last].values():
            self._leaf(leaf)
        for lv in range(tree.last - 1, -1, -1):
            for d in tree.by_level[lv].values():
                self._parent(d, lv)

    def _leaf(self, leaf: int) -> None:
        tree = self.tree
        st = self.state[leaf]
        st[:] = [0, 0, 0, 0, 0]
        if self.restrict is not None and tree.ancestor_at(leaf, tree.dlevel[self.restrict]) != self.restrict:
            return
        free = tree.leaf_free(leaf, self.shape, self.exclude)
        st[POD] = count_in(free, self.shape.requests)
        if self.leader is not None and count_in(free, self.leader) > 0:
            st[LEADER] = 1
            for r, v in self.leader:
                free[r] = free.get(r, 0) - v
        st[POD_WL] = count_in(free, self.shape.requests)
        if tree.last == self.slice_level:
            st[SLC] = st[POD] // self.slice_size
            st[SLC_WL] = st[POD_WL] // self.slice_size

    def _parent(self, d: int, level: int) -> None:
        slice_level, slice_size, leader_required = self.slice_level, self.slice_size, self.leader is not None
        st = self.state[d]
        pods = slices = leaders = 0
        contributes = False
        min_pod_diff = min_slc_diff = 1 << 62
        for c in self.tree.dchildren[d]:
            cs = self.state[c]
            pods += cs[POD]
            slices += cs[SLC]
            if not leader_required or cs[LEADER] > 0:
                contributes = True
                min_pod_diff = min(min_pod_diff, cs[POD] - cs[POD_WL])
                min_slc_diff = min(min_slc_diff, cs[SLC] - cs[SLC_WL])
            leaders = max(leaders, cs[LEADER])
        st[POD] = pods
        st[POD_WL] = pods - min_pod_diff if contributes else 0
        slc_wl = slices - min_slc_diff if contributes else 0
        st[LEADER] = leaders
        if level == slice_level:
            slices = pods // slice_size
            slc_wl = st[POD_WL] // slice_size
        st[SLC] = slices
        st[SLC_WL] = slc_wl

    def get(self, d: int) -> list[int]:
        return list(self.state[d])

    def peek(self, d: int) -> list[int]:
        return self.state[d]


class GroupCounts(FullCounts):
    """FullCounts for a leader + workers shape, kept current like the views: a changed leaf
    recomputes itself and its ancestors (each from its children), nothing else."""

    def __init__(self, tree: CapacityTree, shape: Shape, slice_level: int, slice_size: int,
                 leader: tuple[tuple[str, int], ...]) -> None:
        super().__init__(tree, shape, slice_level, slice_size, leader)
        self.pending: set[int] = set()

    def add_domain(self, d: int) -> None:
        self.state.append([0, 0, 0, 0, 0])

    def catch_up(self) -> None:
        if not self.pending:
            return
        tree = self.tree
        parents: set[int] = set()
        for leaf in self.pending:
            self._leaf(leaf)
            d = tree.dparent[leaf]
            while d >= 0:
                parents.add(d)
                d = tree.dparent[d]
        self.pending.clear()
        for d in sorted(parents, key=lambda x: -tree.dlevel[x]):  # children before parents
            self._parent(d, tree.dlevel[d])


class State:
    """Domain states for one placement: copied from the source on first touch."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self._local: dict[int, list[int]] = {}

    def touched(self) -> bool:
        """Whether this placement changed any domain's counts yet."""
        return bool(self._local)

    def peek(self, d: int) -> list[int]:
        """Read-only view of a domain's counts (local changes included)."""
        st = self._local.get(d)
        return st if st is not None else self.src.peek(d)

    def __call__(self, d: int) -> list[int]:
        st = self._local.get(d)
        if st is None:
            st = self._local[d] = self.src.get(d)
        return st
