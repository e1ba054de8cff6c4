"""Pacing of SetWorkloadPending writes: each workload's pending condition at most once per interval.

A head that keeps failing gets a new pending message from the core in many cycles ("... 3 more
needed", then "... 5 more needed"), and each would be a write to the API server. The first
one for a workload goes out at once; later ones within `interval_s` of the last write are held,
a newer one replacing the held one (the condition is written whole), and go out when due.
A held write also goes out just before any other command for the same workload, so every
workload's commands keep their decision order. The decision events are not held.

Backpressure: at most `max_in_flight` pending writes wait for their outcome at a time (None: no
bound). Past that, new ones are held too (coalescing per workload) and go out as outcomes come
back. Under a burst of new workloads (the baseline creates 430 a second) the pending conditions
would otherwise fill the watcher's command stream, and every admission behind them would hold
its quota while it waits its turn.

Synchronous and clock-free (`now` is passed in), like the partition that owns it.
"""

from __future__ import annotations

import heapq
import math

from services.admission.plan.outputs import WORKLOAD_ACTIONS, Outgoing, Outputs, Sent

_PRUNE_EVERY_S = 5.0
_RETRY_FULL_S = 0.05  # a held write past the in-flight bound is looked at again this soon


class PendingPacer:
    def __init__(self, interval_s: float, max_in_flight: int | None = None) -> None:
        self.interval_s = interval_s
        self.max_in_flight = max_in_flight
        self.in_flight = 0  # pending writes sent whose outcome has not come back (see settled)
        self.last_sent: dict[str, float] = {}  # workload key -> when its pending condition was last sent
        self.held: dict[str, tuple[float, Outgoing, Sent]] = {}  # workload key -> (due, command, what for)
        self._dues: list[tuple[float, str]] = []  # heap of (due, key); entries no longer held are skipped
        self._pruned_at = 0.0
        self._retry_at = -math.inf  # past the bound: when to look at the held ones again

    def next_due(self) -> float | None:
        heap = self._dues
        while heap:
            due, key = heap[0]
            held = self.held.get(key)
            if held is not None and held[0] == due:
                # Past the in-flight bound nothing goes out before the retry (see pace).
                return max(due, self._retry_at) if self._full() else due
            heapq.heappop(heap)  # sent meanwhile: forget it
        return None

    def has_due(self, now: float) -> bool:
        due = self.next_due()
        return due is not None and due <= now

    def settled(self, n: int = 1) -> None:
        """Outcomes of `n` pending writes came back."""
        self.in_flight = max(0, self.in_flight - n)

    def _full(self) -> bool:
        return self.max_in_flight is not None and self.in_flight >= self.max_in_flight

    def _hold(self, due: float, o: Outgoing, what: Sent) -> None:
        if what.target not in self.held:
            heapq.heappush(self._dues, (due, what.target))
            self.held[what.target] = (due, o, what)
        else:
            self.held[what.target] = (self.held[what.target][0], o, what)  # a newer one replaces it, due as it was

    def pace(self, outputs: Outputs, now: float) -> Outputs:
        """The commands to send now, in order: held ones that came due or that another command for the
        same workload overtakes go out too; pending ones sent too soon after the last, or past the
        in-flight bound, are held."""
        if self.interval_s <= 0 and self.max_in_flight is None:
            return outputs
        commands: list[Outgoing] = []
        sent: dict[str, Sent] = {}
        for o in outputs.commands:
            what = outputs.sent[o.msg_id]
            if what.action == "pending":
                last = self.last_sent.get(what.target)
                if last is not None and now < last + self.interval_s:
                    self._hold(last + self.interval_s, o, what)
                    continue
                if self._full():
                    self._hold(now + max(self.interval_s, _RETRY_FULL_S), o, what)
                    continue
                self.held.pop(what.target, None)
                self.last_sent[what.target] = now
                self.in_flight += 1
            else:
                held = self.held.pop(what.target, None) if what.action in WORKLOAD_ACTIONS else None
                if held is not None:  # keep the workload's order: its held condition first
                    commands.append(held[1])
                    sent[held[1].msg_id] = held[2]
                    self.last_sent[what.target] = now
                    self.in_flight += 1
            commands.append(o)
            sent[o.msg_id] = what
        while self.has_due(now):
            if self._full():
                # Due, but the bound is reached: look again a little later. The held ones stay as
                # they are (a pass re-dating each would cost O(held) per round under a backlog).
                self._retry_at = now + max(self.interval_s, _RETRY_FULL_S)
                break
            _, key = heapq.heappop(self._dues)
            _, o, what = self.held.pop(key)
            commands.append(o)
            sent[o.msg_id] = what
            self.last_sent[key] = now
            self.in_flight += 1
        self._prune(now)
        return Outputs(commands, outputs.events, sent)

    def _prune(self, now: float) -> None:
        if now < self._pruned_at + _PRUNE_EVERY_S:
            return
        self._pruned_at = now
        horizon = now - self.interval_s
        self.last_sent = {k: t for k, t in self.last_sent.items() if t > horizon or k in self.held}
