"""The Events of applied commands, waiting for their write: queued without making the command wait,
written in the lowest line of the write slots (write_slots.py), oldest first.

Issue 12: a command group used to wait for room among 256 commands' Events before publishing its
outcome. Events are half of the watcher's writes (an admission has two) and get what the reports'
share of the slots leaves, so under load that room stayed full: ~3,900 of the 4,096 commands in
hand waited there, their batches unacknowledged, and no command (admissions among them) was
delivered until Events drained. Now a command's Events wait here (~400 bytes each), at most
`limit` of them; beyond that new ones are dropped and said so (a log line a thousand), as
Kubernetes' own recorder drops what it cannot queue (client-go keeps 1,000). Best effort as
before: a command is acknowledged once its outcome is stored, whether its Events are written yet.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from kq.messages import RecordEvent
from kq.obs import get_logger
from services.watcher.write_slots import WriteSlots

WriteEvents = Callable[[Sequence[RecordEvent]], Awaitable[None]]


class EventBacklog:
    def __init__(self, write: WriteEvents, slots: WriteSlots, *, limit: int, writers: int, cluster: str) -> None:
        self._write = write
        self._slots = slots
        self._limit = limit
        self._writers = max(1, writers)
        self._queued: deque[Sequence[RecordEvent]] = deque()  # one command's Events each
        self._count = 0  # Events queued
        self._tasks: set[asyncio.Task[None]] = set()
        self.dropped = 0
        self.log = get_logger("kq.watcher.events", cluster=cluster)

    def __len__(self) -> int:
        return self._count

    def put(self, events: Sequence[RecordEvent]) -> None:
        """Queue one command's Events (written side by side, in one slot). Never waits."""
        if not events:
            return
        if self._count + len(events) > self._limit:
            before, self.dropped = self.dropped, self.dropped + len(events)
            if before // 1000 != self.dropped // 1000 or not before:  # the first, then one line a thousand
                self.log.warning("event backlog full; dropping new events", limit=self._limit,
                                 dropped_so_far=self.dropped, command=events[0].id)
            return
        self._queued.append(events)
        self._count += len(events)
        if len(self._tasks) < self._writers:
            task = asyncio.get_running_loop().create_task(self._drain(), name="watcher:events")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _drain(self) -> None:
        while self._queued:
            events = self._queued.popleft()
            self._count -= len(events)
            async with self._slots.slot(urgent=False, event=True):
                await self._write(events)
