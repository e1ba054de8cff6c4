"""The core's state: every Workload it knows and the one timer each needs, and the decisions
due. The only mutable state of the service, owned here.

    changes = tracker.observe(view, now)   # a Workload as last seen (mirror record)
    changes = tracker.forget(key)          # deleted
    changes = tracker.due(key, now)        # one workload's timer fired (local)
    changes = tracker.due_until(now)       # every timer up to now (a bus timer fired, a rebuild)

Each returns Changes: timers to (re)set, timers to cancel, decisions. A decision is
issued once per (decision, resourceVersion it was decided on): the same state deciding
again yields nothing; a newer resourceVersion that is still due yields the same
deterministic id again (the bus drops the duplicate, the watcher finds it applied).
"""

from __future__ import annotations

import heapq

from .model import Changes, Key, PodsReadyConfig, Timer, WorkloadView
from .timing import next_timer, on_due

EARLY_S = 0.002  # a timer firing within this of its time counts as due (event loops fire a tick early)


class Tracker:
    def __init__(self, config: PodsReadyConfig) -> None:
        self.config = config
        self.views: dict[Key, WorkloadView] = {}
        self.timers: dict[Key, Timer] = {}
        self._heap: list[tuple[float, Key]] = []  # (at, key) of timers set; stale entries skipped
        self._issued: dict[Key, tuple[str, str]] = {}  # key -> (decision id, resourceVersion)

    def __len__(self) -> int:
        return len(self.views)

    def observe(self, view: WorkloadView, now: float) -> Changes:
        old = self.views.get(view.key)
        if old is not None and old.uid != view.uid:
            self._issued.pop(view.key, None)  # a new incarnation under the same name
        self.views[view.key] = view
        return self._evaluate(view.key, now)

    def forget(self, key: Key) -> Changes:
        """The Workload is gone (or its job with it): stop its timer."""
        self.views.pop(key, None)
        self._issued.pop(key, None)
        out = Changes()
        if self.timers.pop(key, None) is not None:
            out.cancelled.append(key)
        return out

    def due(self, key: Key, now: float) -> Changes:
        """A timer fired for `key`: decide on the state as it is now (the timer may be stale)."""
        if key not in self.views:
            return Changes()
        out = self._evaluate(key, now)
        pending = self.timers.get(key)
        if pending is not None and not out.timers:
            out.timers.append(pending)  # fired early (or stale): the shell must wait again
        return out

    def due_until(self, now: float) -> Changes:
        """Every timer whose time has come, in time order (a coarse bus timer fired)."""
        out = Changes()
        while self._heap and self._heap[0][0] <= now + EARLY_S:
            at, key = heapq.heappop(self._heap)
            timer = self.timers.get(key)
            if timer is not None and timer.at == at:
                out.extend(self._evaluate(key, now))
        return out

    def next_at(self) -> float | None:
        """The earliest timer set (None when there is none)."""
        while self._heap:
            at, key = self._heap[0]
            timer = self.timers.get(key)
            if timer is not None and timer.at == at:
                return at
            heapq.heappop(self._heap)
        return None

    def _evaluate(self, key: Key, now: float) -> Changes:
        view = self.views[key]
        out = Changes()
        timer = next_timer(view, self.config)
        current = self.timers.get(key)
        if timer is None:
            if current is not None:
                del self.timers[key]
                out.cancelled.append(key)
            self._issued.pop(key, None)
            return out
        if timer.at > now + EARLY_S:
            if current != timer:
                self.timers[key] = timer
                heapq.heappush(self._heap, (timer.at, key))
                out.timers.append(timer)
            return out
        if current is not None:  # due now: nothing left to wait for (its bus schedule fires as set: harmless)
            del self.timers[key]
        decision = on_due(view, timer, self.config, now)
        if self._issued.get(key) != (decision.id, view.resource_version):
            self._issued[key] = (decision.id, view.resource_version)
            out.decisions.append(decision)
        return out
