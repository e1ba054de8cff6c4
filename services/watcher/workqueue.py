"""The keyed work queue the watcher's integrations (Job, frameworks) reconcile from.

Watch events `mark` keys dirty; `workers` tasks take one key at a time and call `reconcile(key)`.
- a key is never worked on by two workers at once: one marked while busy is worked again after;
- `reconcile` returns a delay to look at the key again later (0: at once), None when done;
- a KubeError out of `reconcile` (it could not even read) retries after the server's hint,
  any other exception is a bug: logged loudly, retried after `retry_max_s`.
Delayed looks are timers on the clock, at most one per key (the earliest wins: a key that fails
again and again while marked by events does not pile up timers), cancelled when the queue stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

from kq.clock import Clock
from kq.kube import KubeError, retry_delay

K = TypeVar("K", bound=Hashable)


class KeyedWorkQueue(Generic[K]):
    def __init__(self, name: str, reconcile: Callable[[K], Awaitable[float | None]], *, workers: int,
                 retry_base_s: float, retry_max_s: float, clock: Clock, log: Any) -> None:
        self.name = name
        self.reconcile = reconcile
        self.workers = workers
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self.clock = clock
        self.log = log
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._busy: set[K] = set()
        self._again: set[K] = set()
        self._timers: dict[K, tuple[float, asyncio.Task[None]]] = {}  # key -> (due, its one delayed look)

    def mark(self, key: K) -> None:
        if key in self._busy:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def idle(self) -> bool:
        return not self._queued and not self._busy

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                for i in range(self.workers):
                    tg.create_task(self._worker(), name=f"{self.name}-worker-{i}")
        finally:
            for _, timer in list(self._timers.values()):  # looks again that will not happen now
                timer.cancel()
            self._timers.clear()

    def delayed(self) -> int:
        """Delayed looks waiting (at most one per key)."""
        return len(self._timers)

    def _look_later(self, delay_s: float, key: K) -> None:
        due = self.clock.now() + delay_s
        held = self._timers.get(key)
        if held is not None:
            if held[0] <= due:
                return  # an earlier look is set already: it will see whatever this one would
            held[1].cancel()
        self._timers[key] = (due, asyncio.create_task(self._mark_after(delay_s, key)))

    async def _mark_after(self, delay_s: float, key: K) -> None:
        await self.clock.sleep(delay_s)
        self._timers.pop(key, None)
        self.mark(key)

    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._busy.add(key)
            retry_in: float | None = None
            try:
                retry_in = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except KubeError as e:  # could not even read: the API server is struggling
                self.log.warning("reconcile interrupted; will retry", key=key, error=str(e))
                retry_in = retry_delay(e, self.retry_base_s)
            except Exception as e:  # a bug: say so loudly, look again later
                self.log.error("reconcile failed", key=key, error=repr(e), exc_info=e)
                retry_in = self.retry_max_s
            finally:
                self._busy.discard(key)
            if key in self._again or retry_in is not None:
                self._again.discard(key)
                if retry_in:
                    self._look_later(retry_in, key)
                else:
                    self.mark(key)
