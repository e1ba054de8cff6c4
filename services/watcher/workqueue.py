"""The keyed work queue the watcher's integrations (Job, frameworks) reconcile from.

Watch events `mark` keys dirty; `workers` tasks take one key at a time and call `reconcile(key)`.
- a key is never worked on by two workers at once: one marked while busy is worked again after;
- `reconcile` returns a delay to look at the key again later (0: at once), None when done;
- a KubeError out of `reconcile` (it could not even read) retries after the server's hint,
  any other exception is a bug: logged loudly, retried after `retry_max_s`.
Two lanes: `mark(key, urgent=True)` (a decision on an existing object: a Workload admitted or
evicted) goes before the plain lane (new Jobs). A burst of 100,000 new Jobs otherwise held every
admitted Job's start behind the whole backlog while its quota sat reserved. A key has at most one
entry per lane; one taken from the urgent lane leaves its plain entry behind, skipped or reused.
Delayed looks are timers on the clock, at most one per key (the earliest wins: a key that fails
again and again while marked by events does not pile up timers), cancelled when the queue stops.
"""

from __future__ import annotations

import asyncio
from collections import deque
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
        self._urgent: deque[K] = deque()
        self._plain: deque[K] = deque()
        self._in_urgent: set[K] = set()  # keys with an entry in each lane (live or left behind)
        self._in_plain: set[K] = set()
        self._entries = asyncio.Semaphore(0)  # one per lane entry
        self._queued: set[K] = set()  # keys waiting to be worked on
        self._busy: set[K] = set()
        self._again: dict[K, bool] = {}  # marked while busy -> urgently
        self._timers: dict[K, tuple[float, asyncio.Task[None]]] = {}  # key -> (due, its one delayed look)

    def mark(self, key: K, *, urgent: bool = False) -> None:
        if key in self._busy:
            self._again[key] = self._again.get(key, False) or urgent
            return
        if urgent and key not in self._in_urgent:
            self._in_urgent.add(key)
            self._urgent.append(key)
            self._entries.release()
        elif not urgent and key not in self._queued and key not in self._in_plain:
            self._in_plain.add(key)
            self._plain.append(key)
            self._entries.release()
        self._queued.add(key)  # an entry left behind in the plain lane serves again

    def waiting(self) -> int:
        """Lane entries (at most two per key)."""
        return len(self._urgent) + len(self._plain)

    def lanes(self) -> tuple[int, int]:
        """Entries in the urgent lane and in the plain one."""
        return len(self._urgent), len(self._plain)

    async def _take(self) -> K:
        while True:
            await self._entries.acquire()
            if self._urgent:
                key = self._urgent.popleft()
                self._in_urgent.discard(key)
            else:
                key = self._plain.popleft()
                self._in_plain.discard(key)
            if key in self._queued:
                self._queued.discard(key)
                return key

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
            key = await self._take()
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
                urgent = self._again.pop(key, False)
                if retry_in:
                    self._look_later(retry_in, key)
                else:
                    self.mark(key, urgent=urgent)
