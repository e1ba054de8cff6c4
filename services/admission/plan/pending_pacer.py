"""Pacing of SetWorkloadPending writes: each workload's pending condition at most once per interval.

A head that keeps failing gets a new pending message from the core in many cycles ("... 3 more
needed", then "... 5 more needed"), and each would be a write to the API server. The first
one for a workload goes out at once; later ones within `interval_s` of the last write are held,
a newer one replacing the held one (the condition is written whole), and go out when due.
A held write also goes out just before any other command for the same workload, so every
workload's commands keep their decision order. The decision events are not held.

Synchronous and clock-free (`now` is passed in), like the partition that owns it.
"""

from __future__ import annotations

import heapq

from services.admission.plan.outputs import WORKLOAD_ACTIONS, Outgoing, Outputs, Sent

_PRUNE_EVERY_S = 5.0


class PendingPacer:
    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.last_sent: dict[str, float] = {}  # workload key -> when its pending condition was last sent
        self.held: dict[str, tuple[float, Outgoing, Sent]] = {}  # workload key -> (due, command, what for)
        self._dues: list[tuple[float, str]] = []  # heap of (due, key); entries no longer held are skipped
        self._pruned_at = 0.0

    def next_due(self) -> float | None:
        heap = self._dues
        while heap:
            due, key = heap[0]
            held = self.held.get(key)
            if held is not None and held[0] == due:
                return due
            heapq.heappop(heap)  # sent meanwhile: forget it
        return None

    def has_due(self, now: float) -> bool:
        due = self.next_due()
        return due is not None and due <= now

    def pace(self, outputs: Outputs, now: float) -> Outputs:
        """The commands to send now, in order: held ones that came due or that another command for the
        same workload overtakes go out too; pending ones sent too soon after the last are held."""
        if self.interval_s <= 0:
            return outputs
        commands: list[Outgoing] = []
        sent: dict[str, Sent] = {}
        for o in outputs.commands:
            what = outputs.sent[o.msg_id]
            if what.action == "pending":
                last = self.last_sent.get(what.target)
                if last is not None and now < last + self.interval_s:
                    due = last + self.interval_s
                    if what.target not in self.held:
                        heapq.heappush(self._dues, (due, what.target))
                    self.held[what.target] = (due, o, what)  # a newer one replaces it, due as it was
                    continue
                self.held.pop(what.target, None)
                self.last_sent[what.target] = now
            else:
                held = self.held.pop(what.target, None) if what.action in WORKLOAD_ACTIONS else None
                if held is not None:  # keep the workload's order: its held condition first
                    commands.append(held[1])
                    sent[held[1].msg_id] = held[2]
                    self.last_sent[what.target] = now
            commands.append(o)
            sent[o.msg_id] = what
        while self.has_due(now):
            _, key = heapq.heappop(self._dues)
            _, o, what = self.held.pop(key)
            commands.append(o)
            sent[o.msg_id] = what
            self.last_sent[key] = now
        self._prune(now)
        return Outputs(commands, outputs.events, sent)

    def _prune(self, now: float) -> None:
        if now < self._pruned_at + _PRUNE_EVERY_S:
            return
        self._pruned_at = now
        horizon = now - self.interval_s
        self.last_sent = {k: t for k, t in self.last_sent.items() if t > horizon or k in self.held}
