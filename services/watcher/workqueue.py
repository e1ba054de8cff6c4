"""The keyed work queue the watcher's integrations (Job, frameworks) reconcile from.

Watch events `mark` keys dirty; `workers` tasks take one key at a time and call `reconcile(key)`.
- a key is never worked on by two workers at once: one marked while busy is worked again after;
- `reconcile` returns a delay to look at the key again later (0: at once), None when done;
- a KubeError out of `reconcile` (it could not even read) retries after the server's hint,
  any other exception is a bug: logged loudly, retried after `retry_max_s`.
Delayed looks are timers on the clock, cancelled when the queue stops.
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
        self._timers: set[asyncio.Task[None]] = set()

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
            for timer in list(self._timers):  # looks again that will not happen now
                timer.cancel()

    async def _mark_after(self, delay_s: float, key: K) -> None:
        await self.clock.sleep(delay_s)
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
                    timer = asyncio.create_task(self._mark_after(retry_in, key))
                    self._timers.add(timer)
                    timer.add_done_callback(self._timers.discard)
                else:
                    self.mark(key)
