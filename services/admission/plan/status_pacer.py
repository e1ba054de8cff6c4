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

Synchronous and clock-free, like the partition that owns it.
"""

from __future__ import annotations

from services.admission.plan.outputs import Outgoing, Outputs, Sent

STATUS_ACTIONS = frozenset({"cqstatus", "lqstatus"})

_Key = tuple[str, str]  # (action, queue)
LOST_AFTER_S = 30.0


class StatusPacer:
    def __init__(self, max_in_flight: int | None = None) -> None:
        self.max_in_flight = max_in_flight
        self.in_flight: dict[_Key, float] = {}  # status writes sent whose outcome has not come back -> when sent
        self.held: dict[_Key, tuple[Outgoing, Sent]] = {}  # oldest first; a newer one keeps the place

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

    def pace(self, outputs: Outputs, now: float) -> Outputs:
        """The commands to send now: every workload command; status writes for queues with none in
        flight, within the bound, held ones first (oldest first); the others are held. No bound
        (None): everything goes out as it comes."""
        if self.max_in_flight is None:
            return outputs
        commands: list[Outgoing] = []
        sent: dict[str, Sent] = {}
        for o in outputs.commands:
            what = outputs.sent[o.msg_id]
            if what.action in STATUS_ACTIONS:
                self.held[(what.action, what.target)] = (o, what)  # replaces a held one in its place
            else:
                commands.append(o)
                sent[o.msg_id] = what
        if self.held and self.in_flight and min(self.in_flight.values()) + LOST_AFTER_S <= now:
            self.in_flight = {k: t for k, t in self.in_flight.items() if t + LOST_AFTER_S > now}
        room = self.max_in_flight - len(self.in_flight)
        picked: list[_Key] = []
        for key in self.held:  # stops at the room left: never a pass over every held status
            if len(picked) >= room:
                break
            if key not in self.in_flight:
                picked.append(key)
        for key in picked:
            o, what = self.held.pop(key)
            commands.append(o)
            sent[o.msg_id] = what
            self.in_flight[key] = now
        return Outputs(commands, outputs.events, sent)
