"""The watcher's API write slots: at most `limit` command groups write at once, and when the slots
are all taken an urgent group waiting for one gets the next before any background group, except
that background groups always keep `background_share` slots if they wait for them.

Urgent: what holds or frees quota and what a job waits for (admit, evict, finish, job status...).
Background: what only reports (queue statuses, a pending workload's reason, events). Under load the
backlog of reports used to sit in front of admissions and finishes (issue 12: seconds of quota held
unused per workload on the baseline benchmark); now it waits instead, and waiting lets the newer
report of an object supersede the older one unwritten (handlers.py). The share keeps reports moving:
a starved report would hold its whole command batch, and with it the consumer's pipeline, open.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class WriteSlots:
    def __init__(self, limit: int, *, background_share: int | None = None) -> None:
        self._free = max(1, limit)
        self._share = limit // 8 if background_share is None else background_share
        self._background_running = 0
        # Waiters in arrival order. Invariant: a free slot means nobody waits (a released slot is
        # handed straight to the next waiter).
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._background: deque[asyncio.Future[None]] = deque()

    @asynccontextmanager
    async def slot(self, *, urgent: bool) -> AsyncIterator[None]:
        if self._free > 0:
            self._free -= 1
            self._background_running += not urgent
        else:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            line = self._urgent if urgent else self._background
            line.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._release(urgent)  # handed a slot just as we were cancelled: pass it on
                elif fut in line:
                    line.remove(fut)
                raise
        try:
            yield
        finally:
            self._release(urgent)

    def waiting(self) -> tuple[int, int]:
        """(urgent, background) groups waiting for a slot (tests, logs)."""
        return len(self._urgent), len(self._background)

    def _release(self, urgent: bool) -> None:
        if not urgent:
            self._background_running -= 1
        first = self._background if self._background_running < self._share else self._urgent
        for line in (first, self._urgent, self._background):
            while line:
                fut = line.popleft()
                if not fut.done():
                    fut.set_result(None)
                    # a background waiter counts as running from the hand-over (it resumes later)
                    self._background_running += line is self._background
                    return
        self._free += 1
