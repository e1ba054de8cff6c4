"""The watcher's API write slots: at most `limit` command groups write at once, and when the slots
are all taken an urgent group waiting for one gets the next before any background group, except
that background groups always keep `background_share` slots if they wait for them.

Urgent: what holds or frees quota and what a job waits for (admit, evict, finish, job status...).
Background: what only reports (queue statuses, a pending workload's reason, events). Under load the
backlog of reports used to sit in front of admissions and finishes (issue 12: seconds of quota held
unused per workload on the baseline benchmark); now it waits instead, and waiting lets the newer
report of an object supersede the older one unwritten (handlers.py). The share keeps reports moving:
a starved report would hold its whole command batch, and with it the consumer's pipeline, open.
A background group waiting for a slot is promoted (`promote(key)`) when an urgent group of the same
object lines up behind it: per object, groups run in stream order, so the admission waited for its
workload's pending reason to get a background slot first. When that urgent group is the workload's
admission, which makes the reason moot, the waiting group is excused instead (`excuse(key)`): it
goes on at once without a slot (it has nothing to write), not through the urgent line ahead of the
admission, which then lined up for a slot a second time (issue 12: ~5 % of the admissions waited
so, 0.2-3 s each on the loaded machine).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager


class _Waiter:
    __slots__ = ("fut", "urgent")

    def __init__(self, fut: asyncio.Future[bool], urgent: bool) -> None:
        self.fut = fut
        self.urgent = urgent


class WriteSlots:
    def __init__(self, limit: int, *, background_share: int | None = None) -> None:
        self._free = max(1, limit)
        self._share = limit // 8 if background_share is None else background_share
        self._background_running = 0
        # Waiters in arrival order. Invariant: a free slot means nobody waits (a released slot is
        # handed straight to the next waiter).
        self._urgent: deque[_Waiter] = deque()
        self._background: deque[_Waiter] = deque()
        self._background_of: dict[Hashable, _Waiter] = {}  # key -> its background waiter (promote)

    @asynccontextmanager
    async def slot(self, *, urgent: bool, key: Hashable = None) -> AsyncIterator[bool]:
        """Holds a slot for the section (True), unless the waiter was excused (False: no slot held)."""
        held = await self.acquire(urgent=urgent, key=key)
        if held is None:
            yield False
            return
        try:
            yield True
        finally:
            self.release(held)

    async def acquire(self, *, urgent: bool, key: Hashable = None) -> bool | None:
        """Takes a slot: returns the line it was handed over in (urgent or not; promote() may have
        changed it while waiting), which `release` wants back, or None when the waiter was excused
        (no slot held). The command path's form of `slot`, without a generator and an exit stack
        per command group."""
        if self._free > 0:
            self._free -= 1
            self._background_running += not urgent
            return urgent
        waiter = _Waiter(asyncio.get_running_loop().create_future(), urgent)
        (self._urgent if urgent else self._background).append(waiter)
        if not urgent and key is not None:
            self._background_of[key] = waiter
        try:
            granted = await waiter.fut
        except asyncio.CancelledError:
            fut = waiter.fut
            if fut.done() and not fut.cancelled() and fut.result():
                self.release(waiter.urgent)  # handed a slot just as we were cancelled: pass it on
            else:
                line = self._urgent if waiter.urgent else self._background
                if waiter in line:
                    line.remove(waiter)
            raise
        finally:
            if key is not None and self._background_of.get(key) is waiter:
                del self._background_of[key]
        return waiter.urgent if granted else None

    def promote(self, key: Hashable) -> bool:
        """The background group of `key` waiting for a slot waits as an urgent one from now on
        (at the end of the urgent line). False if none waits."""
        waiter = self._background_of.pop(key, None)
        if waiter is None or waiter.fut.done():
            return False
        self._background.remove(waiter)
        waiter.urgent = True
        self._urgent.append(waiter)
        return True

    def excuse(self, key: Hashable) -> bool:
        """The background group of `key` waiting for a slot goes on without one (its `slot` section
        gets False). False if none waits."""
        waiter = self._background_of.pop(key, None)
        if waiter is None or waiter.fut.done():
            return False
        self._background.remove(waiter)
        waiter.fut.set_result(False)
        return True

    def waiting(self) -> tuple[int, int]:
        """(urgent, background) groups waiting for a slot (tests, logs)."""
        return len(self._urgent), len(self._background)

    def release(self, urgent: bool) -> None:
        """Gives back a slot `acquire` returned `urgent` for: to the next waiter, or free."""
        if not urgent:
            self._background_running -= 1
        first = self._background if self._background_running < self._share else self._urgent
        for line in (first, self._urgent, self._background):
            while line:
                fut = line.popleft().fut
                if not fut.done():
                    fut.set_result(True)
                    # a background waiter counts as running from the hand-over (it resumes later)
                    self._background_running += line is self._background
                    return
        self._free += 1
