"""consume_batches(pipeline=N): batches overlap, each message is still settled exactly once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import pytest
from support.tasks import running
from support.wait import eventually

from kq import subjects
from kq.runtime import Bus, Delivery, OutMsg

pytestmark = pytest.mark.timeout(30)

CMD = subjects.command_subject("c1", "workload")


@pytest.mark.parametrize("pipeline,overlap", [(1, False), (3, True)], ids=["one-at-a-time", "pipelined"])
async def test_batches_overlap_only_when_pipelined(bus: Bus, pipeline: int, overlap: bool) -> None:
    release = asyncio.Event()
    seen: list[bytes] = []
    active = 0
    most = 0

    async def handler_batch(ds: list[Delivery]) -> list[BaseException | None]:
        nonlocal active, most
        active += 1
        most = max(most, active)
        seen.extend(d.data for d in ds)
        if len(seen) < 6:
            # hold the batch until the others could have started (bounded: never hangs)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(release.wait(), timeout=1.0)
        release.set()
        active -= 1
        return [None] * len(ds)

    async with running(bus.consume_batches("piped", subjects.COMMANDS_STREAM, CMD, handler_batch,
                                           batch=2, pipeline=pipeline)):
        for i in range(6):  # one at a time, so they arrive as several batches
            await bus.publish_many([OutMsg(CMD, f"m{i}".encode(), f"p{i}")])

        async def all_acked() -> bool:
            ci = await bus.js.consumer_info(subjects.COMMANDS_STREAM, "piped")
            return ci.ack_floor.stream_seq >= 6 and ci.num_ack_pending == 0

        await eventually(all_acked, timeout=10)
    assert sorted(seen) == [f"m{i}".encode() for i in range(6)]  # each handled once
    assert (most > 1) is overlap


@pytest.mark.parametrize("window,ahead", [(None, False), (40, True)], ids=["one-batch", "window-40"])
async def test_window_asks_the_server_ahead_of_the_handler(bus: Bus, window: int | None, ahead: bool) -> None:
    """With every pipeline slot held, the consumer has taken from the server up to `window`
    messages (not one batch beyond what is handled): small batches no longer cost a server round
    trip per half batch."""
    release = asyncio.Event()
    handled = 0
    batches = 0

    async def handler_batch(ds: list[Delivery]) -> list[BaseException | None]:
        nonlocal handled, batches
        handled += len(ds)
        batches += 1
        with contextlib.suppress(TimeoutError):  # bounded: never hangs
            await asyncio.wait_for(release.wait(), timeout=20.0)
        return [None] * len(ds)

    await bus.publish_many([OutMsg(CMD, f"m{i}".encode(), f"w{i}") for i in range(60)])

    async def taken() -> int:
        return (await bus.js.consumer_info(subjects.COMMANDS_STREAM, "windowed")).num_ack_pending

    async with running(bus.consume_batches("windowed", subjects.COMMANDS_STREAM, CMD, handler_batch,
                                           batch=4, pipeline=2, window=window)):
        # both slots held (a batch is what has arrived, up to 4: under load the first may be smaller)
        await eventually(lambda: batches == 2, timeout=10)
        if ahead:
            await eventually(lambda: _at_least(taken, 40), timeout=10)
        else:
            # what is asked is asked as the slots fill: a few round trips let it all arrive
            for _ in range(5):
                await bus.nc.flush()
            assert await taken() <= handled + 2 * 4  # handled, plus a batch buffered and a batch asked
        release.set()
        await eventually(lambda: _at_least(lambda: _acked(bus), 60), timeout=15)
    assert handled == 60


async def _at_least(count: Callable[[], Awaitable[int]], n: int) -> bool:
    return await count() >= n


async def _acked(bus: Bus) -> int:
    return (await bus.js.consumer_info(subjects.COMMANDS_STREAM, "windowed")).ack_floor.stream_seq


async def test_a_message_held_past_its_ack_wait_is_not_redelivered(bus: Bus) -> None:
    """A pipelined batch held longer than the ack wait (behind a deep pipeline, on a starved
    machine) is kept in progress: handled once, not redelivered behind what came after it."""
    release = asyncio.Event()
    seen: list[tuple[bytes, int]] = []

    async def handler_batch(ds: list[Delivery]) -> list[BaseException | None]:
        seen.extend((d.data, d.deliveries) for d in ds)
        if any(d.data == b"held" for d in ds):
            with contextlib.suppress(TimeoutError):  # bounded: never hangs
                await asyncio.wait_for(release.wait(), timeout=20.0)
        return [None] * len(ds)

    async def acked() -> bool:
        ci = await bus.js.consumer_info(subjects.COMMANDS_STREAM, "kept")
        return ci.ack_floor.stream_seq >= 2 and ci.num_ack_pending == 0

    async with running(bus.consume_batches("kept", subjects.COMMANDS_STREAM, CMD, handler_batch,
                                           batch=1, pipeline=2, ack_wait=1.0)):
        await bus.publish_many([OutMsg(CMD, b"held", "k0")])
        await eventually(lambda: len(seen) == 1, timeout=10)
        # three ack waits go by while it is held; the next message is handled meanwhile
        await bus.publish_many([OutMsg(CMD, b"next", "k1")])
        await eventually(lambda: len(seen) == 2, timeout=10)
        t0 = asyncio.get_running_loop().time()
        await eventually(lambda: asyncio.get_running_loop().time() - t0 > 3.0 or len(seen) > 2, timeout=10)
        release.set()
        await eventually(acked, timeout=15)
    assert seen == [(b"held", 1), (b"next", 1)]
