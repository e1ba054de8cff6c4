"""Pacing of queue status writes: held a moment, one in flight per queue, a bounded number in all,
none that repeats what was last written.

Queue statuses are reported whole every status interval for each queue that changed. With
thousands of queues and a watcher slower than the rounds, every round would add a write per busy
queue to the command stream, each soon superseded by the next: the stream grows, and the last
statuses (those that say a queue is idle) wait behind thousands of stale ones. So a status for a
queue whose previous write has not come back yet is held, a newer one replacing it (it is written
whole), and at most `max_in_flight` status writes await their outcome at a time; held ones go out,
oldest first, as outcomes come back. The cost of statuses then follows what the watcher can write,
not the number of queues times the rounds. Workload commands never wait for statuses. A write whose
outcome never comes (dead-lettered) stops holding its queue after LOST_AFTER_S.

A status equal to the status last sent for its queue is not written. And while the writes are
busy (`max_in_flight` or more statuses in flight or held), a queue's new status is held `hold_s`
from when it was first held (Kueue's queue controllers batch a queue's updates for a second the
same way; when not busy a status goes at once, as a user watching one queue expects). A queue that
goes busy and back to idle within the hold (a short workload on a queue of its own) then costs no
write at all, where it cost four (ClusterQueue and LocalQueue, busy and idle): with thousands of
queues and a workload or two each, those writes were most of what a queue cost (the watcher's
PATCH, the API's watch events, the mirror record, the echo).

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
_Status = ClusterQueueStatus | LocalQueueStatus


class StatusPacer:
    def __init__(self, max_in_flight: int | None = None, hold_s: float = 0.0) -> None:
        self.max_in_flight = max_in_flight
        self.hold_s = hold_s
        self.in_flight: dict[_Key, float] = {}  # status writes sent whose outcome has not come back -> when sent
        self.held: dict[_Key, _Status] = {}  # oldest first; a newer one keeps the place
        self.held_since: dict[_Key, float] = {}  # when each held queue was first held (same order as held)
        # The status last sent per queue, while its write is in flight or was applied: what the API
        # holds (or will). Forgotten when a write is refused or lost (then what it holds is unknown).
        self.sent: dict[_Key, _Status] = {}

    def _room(self) -> bool:
        return self.max_in_flight is not None and len(self.in_flight) < self.max_in_flight

    def settled(self, what: Sent, applied: bool = True) -> None:
        """The outcome of a status write came back."""
        key = (what.action, what.target)
        self.in_flight.pop(key, None)
        if not applied:
            self.sent.pop(key, None)

    def _first_waiting(self) -> float | None:
        """When the first held status whose queue has no write in flight was first held (held ones
        come about in order of their due time; those waiting for their queue's outcome are woken by
        it, so they never count here: counting them made a term wake up at once, over and over)."""
        for key, since in self.held_since.items():  # past at most the writes in flight
            if key not in self.in_flight:
                return since
        return None

    def has_ready(self, now: float | None = None) -> bool:
        """A held status could go out now (None: disregarding the hold)."""
        if not self.held or not self._room():
            return False
        since = self._first_waiting()
        return since is not None and (now is None or since + self.hold_s <= now)

    def next_due(self) -> float | None:
        """While statuses are held: when the first hold ends (if there is room to send it) or the
        oldest write in flight counts as lost."""
        if not self.held:
            return None
        at = min(self.in_flight.values()) + LOST_AFTER_S if self.in_flight else None
        if self.hold_s > 0 and self._room() and (since := self._first_waiting()) is not None:
            at = since + self.hold_s if at is None else min(at, since + self.hold_s)
        return at

    def _hold(self, key: _Key, status: _Status, now: float) -> None:
        if key not in self.in_flight and self.sent.get(key) == status:
            self.held.pop(key, None)  # back to what the API holds: nothing to write
            self.held_since.pop(key, None)
            return
        self.held[key] = status  # replaces a held one in its place
        if key not in self.held_since:
            busy = self.max_in_flight is not None and len(self.in_flight) + len(self.held) > self.max_in_flight
            self.held_since[key] = now if busy else now - self.hold_s  # not busy: due at once

    def pace(self, results: Sequence[CycleResult], now: float) -> list[CycleResult]:
        """The results with the statuses to write now: those of queues with no write in flight whose
        hold is over, within the bound, held ones first (oldest first); the others are held. No
        bound (None): the results as they are."""
        if self.max_in_flight is None:
            return list(results)
        out: list[CycleResult] = []
        for r in results:
            if not (r.cluster_queues or r.local_queues):
                out.append(r)
                continue
            for s in r.cluster_queues:
                self._hold(("cqstatus", s.name), s, now)
            for ls in r.local_queues:
                self._hold(("lqstatus", f"{ls.namespace}/{ls.name}"), ls, now)
            out.append(msgspec.structs.replace(r, cluster_queues=(), local_queues=()))
        if self.held and self.in_flight and min(self.in_flight.values()) + LOST_AFTER_S <= now:
            lost = [k for k, t in self.in_flight.items() if t + LOST_AFTER_S <= now]
            for k in lost:
                del self.in_flight[k]
                self.sent.pop(k, None)
        room = self.max_in_flight - len(self.in_flight)
        picked: list[_Key] = []
        for key, since in self.held_since.items():  # stops at the room left: never a pass over every held status
            if len(picked) >= room:
                break
            if key in self.in_flight:
                continue  # its outcome wakes it
            if since + self.hold_s > now:
                break  # held about in order of their due time: the later ones wait for this one
            picked.append(key)
        if not picked:
            return out
        cqs: list[ClusterQueueStatus] = []
        lqs: list[LocalQueueStatus] = []
        for key in picked:
            status = self.held.pop(key)
            del self.held_since[key]
            if self.sent.get(key) == status:
                continue  # what the API already holds (its write applied): not written again
            if isinstance(status, ClusterQueueStatus):
                cqs.append(status)
            else:
                lqs.append(status)
            self.sent[key] = status
            self.in_flight[key] = now
        if not (cqs or lqs):
            return out
        cycle = out[-1].cycle if out else 0
        out.append(CycleResult(cycle=cycle, cluster_queues=tuple(cqs), local_queues=tuple(lqs)))
        return out
