"""The dispatcher's timers: "decide on this workload again in N seconds" (Plan.wake_in).

One timer per workload, due at the earliest moment asked for. Every reconcile of a workload in an
Incremental round, a finish hold or a running copy asks again for the same moment (or, for a lease
renewal, a moment a little later each time): with a timer per request, their firings were a third
of the dispatcher's reconciles, each deciding again what had not changed. A later request while an
earlier timer waits is dropped: the reconcile that timer brings asks again for what it still needs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
MIN_DELAY_S = 0.05


class Wakeups(Generic[K]):
    def __init__(self, fire: Callable[[K], None]) -> None:
        self._fire = fire
        self._due: dict[K, tuple[float, asyncio.TimerHandle]] = {}

    def __len__(self) -> int:
        return len(self._due)

    def wake_in(self, key: K, delay: float) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + max(delay, MIN_DELAY_S)
        held = self._due.get(key)
        if held is not None:
            if held[0] <= due:
                return
            held[1].cancel()
        self._due[key] = (due, loop.call_at(due, self._run, key))

    def cancel(self, key: K) -> None:
        """Nothing to decide on `key` at a later time any more (it left dispatch)."""
        held = self._due.pop(key, None)
        if held is not None:
            held[1].cancel()

    def _run(self, key: K) -> None:
        self._due.pop(key, None)
        self._fire(key)
