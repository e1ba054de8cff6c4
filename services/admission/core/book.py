"""The workload book: the latest record of every Workload and where each one stands.

A workload is in exactly one of: reserving quota (`reserved`, assumed by us or seen with an
admission), admissible and pending (`pending`, queued in its ClusterQueue or blocked by a
missing/stopped queue), or neither (finished, inactive). Reserving workloads of a ClusterQueue
not known yet are orphans until it appears. Backoff timers say when a parked workload may be
tried again. The book only keeps these indexes consistent; workload_sync decides what goes where.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from .model import Workload
from .workloads import PendingInfo, ReservedInfo


class WorkloadBook:
    __slots__ = ("workloads", "pending", "reserved", "_pending_by_lq", "_orphans_by_cq", "_timers", "_deadlines")

    def __init__(self) -> None:
        self.workloads: dict[str, Workload] = {}  # latest record per namespace/name
        self.pending: dict[str, PendingInfo] = {}
        self.reserved: dict[str, ReservedInfo] = {}
        self._pending_by_lq: dict[str, dict[str, None]] = {}
        self._orphans_by_cq: dict[str, dict[str, None]] = {}
        self._timers: list[tuple[float, str, str]] = []  # heap of (requeue_at, key, uid)
        self._deadlines: list[tuple[float, str, str]] = []  # heap of (execution deadline, key, uid)

    # --- records ---------------------------------------------------------------------------------

    def record(self, w: Workload) -> None:
        self.workloads[w.key] = w

    def drop_record(self, key: str) -> Workload | None:
        return self.workloads.pop(key, None)

    # --- pending ---------------------------------------------------------------------------------

    def put_pending(self, info: PendingInfo) -> None:
        self.pending[info.key] = info
        self._pending_by_lq.setdefault(info.lq_key, {})[info.key] = None

    def pop_pending(self, key: str) -> PendingInfo:
        info = self.pending.pop(key)
        by = self._pending_by_lq.get(info.lq_key)
        if by is not None:
            by.pop(key, None)
            if not by:
                del self._pending_by_lq[info.lq_key]
        return info

    def pending_of_lq(self, lq_key: str) -> list[PendingInfo]:
        return [self.pending[k] for k in self._pending_by_lq.get(lq_key, ())]

    def pending_count_of_lq(self, lq_key: str) -> int:
        return len(self._pending_by_lq.get(lq_key, ()))

    # --- reserving -------------------------------------------------------------------------------

    def put_reserved(self, info: ReservedInfo) -> None:
        self.reserved[info.key] = info

    def pop_reserved(self, key: str) -> ReservedInfo:
        return self.reserved.pop(key)

    def assumed(self, key: str) -> bool:
        info = self.reserved.get(key)
        return info is not None and info.assumed

    def add_orphan(self, cq_name: str, key: str) -> None:
        self._orphans_by_cq.setdefault(cq_name, {})[key] = None

    def drop_orphan(self, cq_name: str, key: str) -> None:
        orphans = self._orphans_by_cq.get(cq_name)
        if orphans is not None:
            orphans.pop(key, None)
            if not orphans:
                del self._orphans_by_cq[cq_name]

    def take_orphans(self, cq_name: str) -> list[ReservedInfo]:
        return [self.reserved[k] for k in self._orphans_by_cq.pop(cq_name, {})]

    def orphan_all(self, cq_name: str, keys: Iterable[str]) -> None:
        for key in keys:
            self.add_orphan(cq_name, key)

    # --- backoff timers --------------------------------------------------------------------------

    def push_timer(self, at: float, info: PendingInfo) -> None:
        heapq.heappush(self._timers, (at, info.key, info.uid))

    def _live(self, key: str, uid: str) -> PendingInfo | None:
        info = self.pending.get(key)
        return info if info is not None and info.uid == uid else None

    def next_wakeup(self) -> float | None:
        """The earliest backoff end of a workload still pending with that backoff, or None."""
        timers = self._timers
        while timers:
            at, key, uid = timers[0]
            info = self._live(key, uid)
            if info is not None and info.wl.requeue_at == at:
                return at
            heapq.heappop(timers)
        return None

    # --- maximum execution time --------------------------------------------------------------------
    # Derived from the record alone (Admitted's time, the limit, earlier admissions), so a restarted
    # scheduler finds the same deadlines in the replayed records.

    def push_deadline(self, w: Workload) -> None:
        at = w.execution_deadline()
        if at is not None:
            heapq.heappush(self._deadlines, (at, w.key, w.uid))

    def _running_out(self, at: float, key: str, uid: str) -> ReservedInfo | None:
        info = self.reserved.get(key)
        if info is None or info.uid != uid or info.assumed or info.wl.execution_deadline() != at:
            return None
        return info

    def next_deadline(self) -> float | None:
        heap = self._deadlines
        while heap:
            at, key, uid = heap[0]
            if self._running_out(at, key, uid) is not None:
                return at
            heapq.heappop(heap)
        return None

    def pop_expired(self, now: float) -> list[ReservedInfo]:
        """Reserving workloads whose maximum execution time ended by `now`."""
        out: list[ReservedInfo] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            at, key, uid = heapq.heappop(self._deadlines)
            info = self._running_out(at, key, uid)
            if info is not None:
                out.append(info)
        return out

    def pop_due(self, now: float) -> list[PendingInfo]:
        """Pending workloads whose backoff ended by `now`."""
        out: list[PendingInfo] = []
        while self._timers and self._timers[0][0] <= now:
            _, key, uid = heapq.heappop(self._timers)
            info = self._live(key, uid)
            if info is not None:
                out.append(info)
        return out
