"""One ClusterQueue's pending workloads (Kueue pkg/cache/queue/cluster_queue.go).

Order: the sticky preemptor first (BestEffortFIFO), then higher priority, older queue-order
timestamp, uid. Inadmissible workloads are parked: they return when something that could
change their fate happens (`unpark_all`), when their backoff ends, or when their flavor scan
has flavors left.

Workloads of one shape (Kueue's scheduling equivalence hash) share a sub-heap. When one of
them finds no fit in a BestEffortFIFO queue, Kueue parks every equivalent workload and sends
new ones of that shape straight to the parked set; here that is parking the sub-heap, and
`unpark_all` re-activates sub-heaps, so neither costs a pass over the workloads. Workloads
parked on their own (backoff, namespace mismatch, failed checks) are kept apart. Heap entries
are invalidated lazily by a per-workload sequence number.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from .workloads import PendingInfo, Shape

NOFIT_REASONS = ("NoFit", "PreemptionNoCandidates")

_SortKey = tuple[int, int, float, str]
_Entry = tuple[_SortKey, int, str]


def _backoff_expired(info: PendingInfo, now: float) -> bool:
    at = info.wl.requeue_at
    return at is None or now >= at


class _Group:
    """Workloads of one shape: a heap, its live members, and whether the whole group is parked."""

    __slots__ = ("shape", "heap", "live", "parked", "offered")

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.heap: list[_Entry] = []
        self.live: dict[str, PendingInfo] = {}
        self.parked = False
        self.offered: int | None = None  # seq of the entry standing for this group in the queue's top heap

    def top(self) -> _Entry | None:
        heap, live = self.heap, self.live
        while heap:
            e = heap[0]
            info = live.get(e[2])
            if info is not None and info.seq == e[1]:
                return e
            heapq.heappop(heap)
        return None


class PendingQueue:
    __slots__ = ("strict_fifo", "_groups", "_tops", "_singles", "_where", "_seq", "_n_active", "sticky", "stall",
                 "on_active")

    def __init__(self, strict_fifo: bool) -> None:
        self.strict_fifo = strict_fifo
        # Told when the queue gains its first active workload (True) or loses its last (False):
        # the tree keeps the queues with active workloads, so a cycle never walks the idle ones.
        self.on_active: Callable[[bool], None] | None = None
        self._n_active = 0
        self._reset()

    @property
    def _active_count(self) -> int:
        return self._n_active

    @_active_count.setter
    def _active_count(self, n: int) -> None:
        was, self._n_active = self._n_active, n
        if (was > 0) != (n > 0) and self.on_active is not None:
            self.on_active(n > 0)

    def _reset(self) -> None:
        self._groups: dict[Shape, _Group] = {}
        self._tops: list[tuple[_SortKey, int, Shape]] = []  # one entry per active group top (lazy)
        self._singles: dict[str, PendingInfo] = {}  # parked on their own
        self._where: dict[str, _Group | None] = {}  # key -> its group, or None when a single
        self._seq = 0
        self._active_count = 0  # workloads in active groups
        self.sticky: str | None = None
        # (head, epoch) of a head whose retry cannot change anything until the epoch moves
        self.stall: tuple[PendingInfo, tuple[int, int]] | None = None

    # --- inspection --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._where)

    def has_active(self) -> bool:
        return self._active_count > 0

    def get(self, key: str) -> PendingInfo | None:
        if key not in self._where:
            return None
        g = self._where[key]
        return self._singles[key] if g is None else g.live[key]

    def is_parked(self, key: str) -> bool:
        if key not in self._where:
            return False
        g = self._where[key]
        return g is None or g.parked

    def infos(self) -> Iterator[PendingInfo]:
        for g in self._groups.values():
            yield from g.live.values()
        yield from self._singles.values()

    def parked_keys(self) -> list[str]:
        return [k for k in self._where if self.is_parked(k)]

    def parked_count(self) -> int:
        """len(parked_keys()) without the pass: every workload not in an active group is parked."""
        return len(self._where) - self._active_count

    def ordered_active(self) -> list[str]:
        """Active keys in pop order (for tests and dumps)."""
        live = [
            e
            for g in self._groups.values()
            if not g.parked
            for e in g.heap
            if e[2] in g.live and g.live[e[2]].seq == e[1]
        ]
        return [e[2] for e in sorted(live)]

    # --- plumbing -----------------------------------------------------------------------------

    def _sort_key(self, info: PendingInfo) -> _SortKey:
        sticky = 0 if (self.sticky == info.key and not self.strict_fifo) else 1
        return (sticky, -info.priority, info.order_ts, info.wl.uid)

    def _group(self, shape: Shape) -> _Group:
        g = self._groups.get(shape)
        if g is None:
            g = self._groups[shape] = _Group(shape)
        return g

    def _offer_top(self, g: _Group) -> None:
        """Make sure the group's current top stands in the top heap (once)."""
        if g.parked:
            return
        e = g.top()
        if e is not None and e[1] != g.offered:
            g.offered = e[1]
            heapq.heappush(self._tops, (e[0], e[1], g.shape))

    def _detach(self, key: str) -> PendingInfo | None:
        if key not in self._where:
            return None
        g = self._where.pop(key)
        if g is None:
            return self._singles.pop(key)
        info = g.live.pop(key)
        if not g.parked:
            self._active_count -= 1
            if not g.live:
                del self._groups[g.shape]  # a parked group outlives its members, as Kueue's bulk-moved hashes do
        return info

    def _insert(self, info: PendingInfo, g: _Group) -> None:
        self._seq += 1
        info.seq = self._seq
        g.live[info.key] = info
        self._where[info.key] = g
        heapq.heappush(g.heap, (self._sort_key(info), info.seq, info.key))
        if not g.parked:
            self._active_count += 1
            self._offer_top(g)

    def _park_single(self, info: PendingInfo) -> None:
        self._singles[info.key] = info
        self._where[info.key] = None

    def _activate(self, g: _Group) -> None:
        if g.parked:
            g.parked = False
            g.offered = None
            self._active_count += len(g.live)
            self._offer_top(g)

    def peek(self) -> PendingInfo | None:
        tops = self._tops
        while tops:
            _, seq, shape = tops[0]
            g = self._groups.get(shape)
            if g is not None and not g.parked and g.offered == seq:
                e = g.top()
                if e is not None and e[1] == seq:
                    return g.live[e[2]]
                heapq.heappop(tops)
                g.offered = None
                self._offer_top(g)  # the group's top changed: offer its current one
                continue
            heapq.heappop(tops)
        return None

    # --- operations ---------------------------------------------------------------------------

    def push_or_update(self, info: PendingInfo, now: float, relevant_change: bool) -> None:
        """A new or updated admissible workload (Kueue ClusterQueue.PushOrUpdate)."""
        key = info.key
        was_single = key in self._singles
        was_parked = self.is_parked(key)
        if was_single and not relevant_change:
            self._singles[key] = info
            return
        if was_parked and not relevant_change:
            old_group = self._where[key]
            if old_group is not None and old_group.shape == info.shape:
                self._detach(key)
                self._insert(info, old_group)
                return
        was_active = key in self._where and not was_parked
        self._detach(key)
        if not was_active and not _backoff_expired(info, now):
            self._park_single(info)
            return
        self._insert(info, self._group(info.shape))  # joins a parked group if its shape is parked

    def pop(self) -> PendingInfo | None:
        info = self.peek()
        if info is None:
            return None
        g = self._where[info.key]
        self._detach(info.key)
        if g is not None and g.live:
            self._offer_top(g)
        return info

    def delete(self, key: str) -> PendingInfo | None:
        info = self._detach(key)
        if self.sticky == key:
            self.sticky = None
        return info

    def set_sticky(self, key: str | None) -> None:
        old = self.sticky
        self.sticky = key
        if old is not None and old != key and self._where.get(old) is not None:
            info = self._detach(old)
            assert info is not None
            self._insert(info, self._group(info.shape))  # re-key the former sticky workload

    def requeue(self, info: PendingInfo, immediate: bool, reason: str, now: float) -> bool:
        """Put back a head that was not admitted (Kueue requeueIfNotPresent). True if inserted."""
        key = info.key
        if reason in ("PendingPreemption", "PendingMigration"):
            self.set_sticky(key)
        if key in self._where:
            if self.is_parked(key) and _backoff_expired(info, now) and (immediate or info.pending_flavors()):
                self._detach(key)
                g = self._group(info.shape)
                self._activate(g)
                self._insert(info, g)
                return True
            return False
        if _backoff_expired(info, now) and (immediate or info.pending_flavors()):
            g = self._group(info.shape)
            self._activate(g)
            self._insert(info, g)
            return True
        if not self.strict_fifo and reason in NOFIT_REASONS:
            g = self._group(info.shape)
            if not g.parked:
                g.parked = True
                g.offered = None
                self._active_count -= len(g.live)
            self._insert(info, g)
            return True
        self._park_single(info)
        return True

    def unpark_all(self, now: float, eligible: Callable[[PendingInfo], bool]) -> int:
        """Bring parked workloads back (Kueue queueInadmissibleWorkloads). Returns how many."""
        moved = 0
        for shape, g in list(self._groups.items()):
            if g.parked:
                moved += len(g.live)
                self._activate(g)
                if not g.live:
                    del self._groups[shape]
        for key, info in list(self._singles.items()):
            if _backoff_expired(info, now) and eligible(info):
                del self._singles[key]
                del self._where[key]
                self._insert(info, self._group(info.shape))
                moved += 1
        return moved

    def unpark(self, key: str, now: float) -> bool:
        """One workload's backoff ended (Kueue: Requeued flips and the workload is updated)."""
        info = self._singles.get(key)
        if info is None or not _backoff_expired(info, now):
            return False
        self._detach(key)
        self._insert(info, self._group(info.shape))
        return True

    def clear(self) -> list[PendingInfo]:
        out = list(self.infos())
        self._reset()
        return out
