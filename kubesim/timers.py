"""Timers of one simulated cluster, on the event loop, in a registry the harness can ask about.

`pending()` tells whether anything is still scheduled to happen on its own (a pod becoming
ready, a runtime running out), which is how a scenario knows the cluster has settled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable


class TimerRegistry:
    def __init__(self) -> None:
        self._handles: dict[Hashable, asyncio.TimerHandle] = {}

    def call_later(self, delay_s: float, key: Hashable, fn: Callable[[], None]) -> None:
        """Run `fn` after `delay_s`; a timer with the same key is replaced."""
        self.cancel(key)
        loop = asyncio.get_running_loop()
        self._handles[key] = loop.call_later(max(0.0, delay_s), self._fire, key, fn)

    def _fire(self, key: Hashable, fn: Callable[[], None]) -> None:
        self._handles.pop(key, None)
        fn()

    def cancel(self, key: Hashable) -> None:
        h = self._handles.pop(key, None)
        if h is not None:
            h.cancel()

    def has(self, key: Hashable) -> bool:
        return key in self._handles

    def pending(self) -> int:
        return len(self._handles)

    def close(self) -> None:
        for h in self._handles.values():
            h.cancel()
        self._handles.clear()
