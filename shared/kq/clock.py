"""The one clock every shell reads: wall time, monotonic time, sleeping and waiting with a deadline.

Cores never read a clock (they get `now` passed in); shells take a `Clock` and default to
`SYSTEM_CLOCK`. Tests pass a `FakeClock`, whose time moves only when the test calls
`advance()`, so timing logic (lease expiry and renewal, pacing, backoff) is tested on fake time:
no sleeps, no flakiness under load.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime
from typing import Protocol

from kq.api.meta import format_time


class Clock(Protocol):
    def now(self) -> float:
        """Wall time, seconds since the epoch (what goes into timestamps)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (what deadlines and intervals are measured on)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait this long (0 or less: yield once)."""
        ...

    async def wait(self, event: asyncio.Event, timeout: float | None) -> bool:
        """Wait until `event` is set (True) or `timeout` seconds passed (False); None: no deadline."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    async def wait(self, event: asyncio.Event, timeout: float | None) -> bool:
        if event.is_set():
            return True
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that lands as the
            # event is set, and a loop around it then never ends (a task that cannot be stopped).
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            return event.is_set()
        return True


SYSTEM_CLOCK: Clock = SystemClock()


class FakeClock:
    """Time that moves only by `advance()`. Sleepers wake in deadline order (ties in the order
    they went to sleep), each seeing the clock at its own deadline; the loop runs the woken
    task before the next one wakes, so what it does next (sleep again, set an event) counts."""

    # Loop turns given to a woken task to run until it blocks again (it may await a few
    # already-finished things on the way).
    SETTLE_TURNS = 20

    def __init__(self, wall: float = 1_800_000_000.0, mono: float = 1000.0) -> None:
        self._wall0 = wall
        self._mono0 = mono
        self._elapsed = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._wall0 + self._elapsed

    def monotonic(self) -> float:
        return self._mono0 + self._elapsed

    @property
    def sleepers(self) -> int:
        """Tasks waiting on this clock right now."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def next_deadline(self) -> float | None:
        """Monotonic time of the earliest sleeper's deadline, if any."""
        live = [d for d, _, f in self._sleepers if not f.done()]
        return min(live) if live else None

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.monotonic() + seconds, next(self._seq), fut))
        await fut

    async def wait(self, event: asyncio.Event, timeout: float | None) -> bool:
        if event.is_set():
            return True
        tasks: set[asyncio.Future[object]] = {asyncio.ensure_future(event.wait())}
        if timeout is not None:
            tasks.add(asyncio.ensure_future(self.sleep(timeout)))
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
        return event.is_set()

    async def settle(self) -> None:
        """Let the tasks that are ready run until they block."""
        for _ in range(self.SETTLE_TURNS):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Move time forward by `seconds`, waking every sleeper whose deadline falls within, in order."""
        if seconds < 0:
            raise ValueError(f"time does not go back (advance by {seconds})")
        target = self._elapsed + seconds
        await self.settle()  # sleeps that are about to start count from the time before advancing
        while self._sleepers and self._sleepers[0][0] - self._mono0 <= target:
            deadline, _, fut = heapq.heappop(self._sleepers)
            if fut.done():
                continue  # cancelled sleeper
            self._elapsed = max(self._elapsed, deadline - self._mono0)
            fut.set_result(None)
            await self.settle()
        self._elapsed = target
        await self.settle()


def rfc3339_millis(t: float) -> str:
    """RFC 3339 UTC with milliseconds (event and dead-letter times) of wall time `t`."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def rfc3339_seconds(t: float) -> str:
    """metav1.Time text (whole seconds, UTC) of wall time `t`; formatted once per second."""
    global _last_second
    second = int(t)
    if second != _last_second[0]:
        _last_second = (second, format_time(datetime.fromtimestamp(second, UTC)))
    return _last_second[1]


_last_second: tuple[int, str] = (-1, "")
