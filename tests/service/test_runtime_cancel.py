"""A loop that waits with a timeout stops when cancelled, however the cancel lands.

Found diagnosing two hangs of the parallel suite (the podsready service tests, the teardown of the
admission events test): on Python 3.11 `asyncio.wait_for` swallows a cancel that arrives as the
awaited thing completes, so a loop around it goes on and whoever awaits the cancelled task waits
forever. PullStream's pump waited on its wake-up event that way (get() sets the event after each
batch: a stop right after a batch hung), and so did Clock.wait (lease renewal, timers). Both now
use asyncio.timeout, which tells its own cancel from the caller's.
"""

from __future__ import annotations

import asyncio

import pytest

from kq import subjects
from kq.clock import SYSTEM_CLOCK
from kq.runtime import Bus
from kq.runtime.pull import PullStream

pytestmark = pytest.mark.timeout(60)
ROUNDS = 40


async def test_a_pull_stream_stops_right_after_a_wake_up(bus: Bus) -> None:
    for i in range(ROUNDS):
        pull = PullStream(bus.nc, subjects.COMMANDS_STREAM, "nobody", heartbeat_s=5.0)
        await pull.start()
        for _ in range(2):
            await asyncio.sleep(0)  # the pump is waiting for a wake-up
        pull._wake.set()  # as get() does after a batch
        for _ in range(i % 4):
            await asyncio.sleep(0)
        async with asyncio.timeout(5):  # stop() must not outlive its pump
            await pull.stop(nak_buffered=False)


async def test_a_clock_wait_loop_stops_when_cancelled_as_the_event_is_set() -> None:
    for i in range(ROUNDS):
        event = asyncio.Event()

        async def loop(event: asyncio.Event = event) -> None:
            while True:
                event.clear()
                await SYSTEM_CLOCK.wait(event, 1.0)

        task = asyncio.create_task(loop())
        for _ in range(2):
            await asyncio.sleep(0)
        event.set()
        for _ in range(i % 4):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=3)
        if not done:
            while not task.done():  # leave nothing running behind the failure
                task.cancel()
                await asyncio.wait({task}, timeout=0.1)
        assert done, f"round {i}: the cancel was swallowed and the loop went on"
