"""Backpressure on queue status writes: one write in flight per queue, a bounded number in all.

Queue statuses are reported whole every status interval for each queue that changed. With
thousands of queues and a watcher slower than the rounds, every round would add a write per busy
queue to the command stream, each soon superseded by the next: the stream grows, and the last
statuses (those that say a queue is idle) wait behind thousands of stale ones. So a status for a
queue whose previous write has not come back yet is held, a newer one replacing it (it is written
whole), and at most `max_in_flight` status writes await their outcome at a time; held ones go out,
oldest first, as outcomes come back. The cost of statuses then follows what the watcher can write,
not the number of queues times the rounds. Workload commands never wait for statuses. A write whose
outcome never comes (dead-lettered) stops holding its queue after LOST_AFTER_S.

The core's statuses are held, not commands: one superseded while held is never converted.
Synchronous and clock-free, like the partition that owns it.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from services.admission.core.decisions import ClusterQueueStatus, CycleResult, LocalQueueStatus
from services.admission.plan.outputs import Sent

STATUS_ACTIONS = frozenset({"cqstatus", "lqstatus"})
LOST_AFTER_S = 30.0

_Key = tuple[str, str]  # (action, queue): ("cqstatus", name) or ("lqstatus", "ns/name"), as Sent says


class StatusPacer:
    def __init__(self, max_in_flight: int | None = None) -> None:
        self.max_in_flight = max_in_flight
        self.in_flight: dict[_Key, float] = {}  # status writes sent whose outcome has not come back -> when sent
        self.held: dict[_Key, ClusterQueueStatus | LocalQueueStatus] = {}  # oldest first; a newer one keeps the place

    def _room(self) -> bool:
        return self.max_in_flight is not None and len(self.in_flight) < self.max_in_flight

    def settled(self, what: Sent) -> None:
        """The outcome of a status write came back (applied or not)."""
        self.in_flight.pop((what.action, what.target), None)

    def has_ready(self) -> bool:
        """A held status could go out now."""
        if not self.held or not self._room():
            return False
        return len(self.held) > len(self.in_flight.keys() & self.held.keys())

    def next_due(self) -> float | None:
        """While statuses are held: when the oldest write in flight counts as lost."""
        if not self.held or not self.in_flight:
            return None
        return min(self.in_flight.values()) + LOST_AFTER_S

    def pace(self, results: Sequence[CycleResult], now: float) -> list[CycleResult]:
        """The results with the statuses to write now: those of queues with no write in flight,
        within the bound, held ones first (oldest first); the others are held. No bound (None):
        the results as they are."""
        if self.max_in_flight is None:
            return list(results)
        out: list[CycleResult] = []
        for r in results:
            if not (r.cluster_queues or r.local_queues):
                out.append(r)
                continue
            for s in r.cluster_queues:
                self.held[("cqstatus", s.name)] = s  # replaces a held one in its place
            for ls in r.local_queues:
                self.held[("lqstatus", f"{ls.namespace}/{ls.name}")] = ls
            out.append(msgspec.structs.replace(r, cluster_queues=(), local_queues=()))
        if self.held and self.in_flight and min(self.in_flight.values()) + LOST_AFTER_S <= now:
            self.in_flight = {k: t for k, t in self.in_flight.items() if t + LOST_AFTER_S > now}
        room = self.max_in_flight - len(self.in_flight)
        picked: list[_Key] = []
        for key in self.held:  # stops at the room left: never a pass over every held status
            if len(picked) >= room:
                break
            if key not in self.in_flight:
                picked.append(key)
        if not picked:
            return out
        cqs: list[ClusterQueueStatus] = []
        lqs: list[LocalQueueStatus] = []
        for key in picked:
            status = self.held.pop(key)
            if isinstance(status, ClusterQueueStatus):
                cqs.append(status)
            else:
                lqs.append(status)
            self.in_flight[key] = now
        cycle = out[-1].cycle if out else 0
        out.append(CycleResult(cycle=cycle, cluster_queues=tuple(cqs), local_queues=tuple(lqs)))
        return out
