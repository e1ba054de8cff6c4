"""Command outcomes to KQ_EVENTS, the outcomes of many command groups in one publish.

Each group of a command batch (one object's commands) publishes its outcomes when its writes are
done, and must see them stored before the batch is acked. Groups finish one API answer at a time,
so publishing each group's outcomes on its own cost a bus publish call, a socket write and a flush
per object; here the outcomes of every group that finishes while a publish is under way go out
together in the next one (Nagle-like: no timer, the batch grows with the load). Order is kept:
outcomes are published in the order the groups handed them over, one publish after the other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kq.runtime import Bus, OutMsg


class OutcomePublisher:
    def __init__(self, bus: Bus, *, max_batch: int = 512) -> None:
        self._bus = bus
        self._max_batch = max_batch
        self._msgs: list[OutMsg] = []
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []  # (messages up to and including its own, waiter)
        self._running: asyncio.Task[None] | None = None

    async def publish(self, msgs: Sequence[OutMsg]) -> None:
        """Until every one of `msgs` is stored (raises what the publish raised)."""
        if not msgs:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._msgs.extend(msgs)
        self._waiters.append((len(self._msgs), done))
        if self._running is None:
            self._running = asyncio.create_task(self._run(), name="watcher:outcomes")
        await done

    async def _run(self) -> None:
        try:
            while self._waiters:
                # Whole groups only, at most max_batch messages unless a single group has more.
                take = 0
                for end, _ in self._waiters:
                    if take and end > self._max_batch:
                        break
                    take += 1
                end = self._waiters[take - 1][0]
                msgs, waiters = self._msgs[:end], self._waiters[:take]
                del self._msgs[:end]
                self._waiters = [(n - end, w) for n, w in self._waiters[take:]]
                try:
                    await self._bus.publish_batch(msgs)
                except Exception as e:
                    for _, w in waiters:
                        if not w.done():
                            w.set_exception(e)
                    continue
                for _, w in waiters:
                    if not w.done():
                        w.set_result(None)
        finally:
            self._running = None
            for _, w in self._waiters:  # cancelled (shutting down): nobody publishes these now
                if not w.done():
                    w.cancel()
            if self._waiters:
                self._msgs, self._waiters = [], []
