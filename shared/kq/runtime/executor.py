"""Bounded, keyed work: at most `limit` pieces of work at a time, and work for one key in the order it
was lined up. One helper for what consumers and the watcher's command pipeline each need:

- bounded tasks: `await room()` waits for a free slot (before fetching more work, so nothing is
  taken that cannot be started), `start(work)` runs it as a task in that slot, and `close()`
  cancels what is left;
- keyed order: `line_up(key)` takes a place in the key's line at once (call it in arrival order,
  before any await); `await place.turn()` waits for the key's previous place to leave and returns
  what it left behind; `place.leave(value)` hands `value` to the next. Only the section under
  `async with slot():` counts against the limit, so work waiting its turn holds no slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Hashable
from contextlib import asynccontextmanager
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class Place(Generic[V]):
    """One place in a key's line."""

    def __init__(self, owner: KeyedExecutor[V], key: Hashable, before: asyncio.Future[V | None] | None) -> None:
        self._owner = owner
        self._key = key
        self._before = before
        self._done: asyncio.Future[V | None] = asyncio.get_running_loop().create_future()

    async def turn(self) -> V | None:
        """Wait until the previous place of this key has left; what it left (None if it was first)."""
        if self._before is None:
            return None
        return await asyncio.shield(self._before)  # our cancellation must not cancel the one before

    def leave(self, value: V | None = None) -> None:
        """Let the next place of this key go, handing it `value`. Call once, also on failure."""
        if not self._done.done():
            self._done.set_result(value)
        self._owner._left(self._key, self._done)


class KeyedExecutor(Generic[V]):
    """At most `limit` pieces of work at a time; work under one key one after another, in line order.

    V is what a place hands to the next one of its key (e.g. why it stopped, so the next can stop too)."""

    def __init__(self, limit: int, *, raise_failures: bool = True) -> None:
        self._slots = asyncio.Semaphore(max(1, limit))
        self._raise_failures = raise_failures
        self._tails: dict[Hashable, asyncio.Future[V | None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- bounded tasks ---

    async def room(self) -> None:
        """Wait for a free slot and keep it for the next `start`. Unless made with raise_failures=False,
        raises the error of earlier work that failed (or was cancelled), as awaiting it directly would."""
        await self._slots.acquire()
        for task in [t for t in self._tasks if t.done()]:
            self._tasks.discard(task)
            task.result()

    def start(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run `work` as a task in the slot `room()` kept; the slot is free again when it ends."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._slots.release()
        if not self._raise_failures or (not task.cancelled() and task.exception() is None):
            self._tasks.discard(task)  # failures stay, for room() to raise

    async def close(self) -> None:
        """Cancel the work still running and wait for it to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

    # --- keyed order ---

    def line_up(self, key: Hashable) -> Place[V]:
        """A place at the end of `key`'s line, taken now (no await: call in arrival order)."""
        place = Place(self, key, self._tails.get(key))
        self._tails[key] = place._done
        return place

    def _left(self, key: Hashable, done: asyncio.Future[V | None]) -> None:
        if self._tails.get(key) is done:
            del self._tails[key]  # the line is empty: forget the key

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """A section that counts against the limit."""
        async with self._slots:
            yield
