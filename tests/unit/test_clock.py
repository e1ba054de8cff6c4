"""kq.clock: the fake clock wakes sleepers in deadline order at their own deadline, and deadline
waits end on the event or on fake time, never on real time."""

from __future__ import annotations

import asyncio

import pytest

from kq.clock import SYSTEM_CLOCK, FakeClock, rfc3339_millis, rfc3339_seconds

pytestmark = pytest.mark.timeout(10)


async def test_advance_wakes_sleepers_in_deadline_order_each_at_its_deadline() -> None:
    clock = FakeClock()
    t0 = clock.monotonic()
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, s: float) -> None:
        await clock.sleep(s)
        woke.append((name, clock.monotonic() - t0))

    tasks = [asyncio.create_task(sleeper(n, s)) for n, s in (("c", 3.0), ("a", 1.0), ("b", 2.0), ("a2", 1.0))]
    await clock.advance(1.5)
    assert woke == [("a", 1.0), ("a2", 1.0)]
    assert clock.sleepers == 2
    await clock.advance(10)
    assert woke == [("a", 1.0), ("a2", 1.0), ("b", 2.0), ("c", 3.0)]
    assert clock.monotonic() - t0 == 11.5
    await asyncio.gather(*tasks)


async def test_a_sleeper_that_sleeps_again_within_the_advance_wakes_again() -> None:
    clock = FakeClock()
    ticks: list[float] = []
    t0 = clock.monotonic()

    async def ticker() -> None:
        while True:
            await clock.sleep(2.0)
            ticks.append(clock.monotonic() - t0)

    task = asyncio.create_task(ticker())
    await clock.advance(7)
    assert ticks == [2.0, 4.0, 6.0]
    task.cancel()


async def test_wall_and_monotonic_time_move_together() -> None:
    clock = FakeClock(wall=1000.0, mono=5.0)
    await clock.advance(2.5)
    assert (clock.now(), clock.monotonic()) == (1002.5, 7.5)
    with pytest.raises(ValueError, match="does not go back"):
        await clock.advance(-1)


async def test_wait_ends_on_the_event_or_at_the_fake_deadline() -> None:
    clock = FakeClock()
    ev = asyncio.Event()
    waiting = asyncio.create_task(clock.wait(ev, 5.0))
    await clock.advance(4.9)
    assert not waiting.done()
    await clock.advance(0.1)
    assert waiting.done() and waiting.result() is False

    waiting = asyncio.create_task(clock.wait(ev, 5.0))
    await clock.settle()
    ev.set()
    await clock.settle()
    assert waiting.done() and waiting.result() is True
    assert clock.sleepers == 0  # the deadline's sleeper went with it


async def test_wait_without_deadline_waits_for_the_event_only() -> None:
    clock = FakeClock()
    ev = asyncio.Event()
    waiting = asyncio.create_task(clock.wait(ev, None))
    await clock.advance(3600)
    assert not waiting.done()
    ev.set()
    assert await waiting is True


async def test_system_clock_wait_and_sleep() -> None:
    ev = asyncio.Event()
    assert await SYSTEM_CLOCK.wait(ev, 0.01) is False
    ev.set()
    assert await SYSTEM_CLOCK.wait(ev, None) is True
    await SYSTEM_CLOCK.sleep(-1)  # a negative sleep is a yield


def test_rfc3339_texts() -> None:
    assert rfc3339_seconds(0.9) == "1970-01-01T00:00:00Z"
    assert rfc3339_seconds(61.2) == "1970-01-01T00:01:01Z"
    assert rfc3339_millis(1.2345) == "1970-01-01T00:00:01.234Z"
