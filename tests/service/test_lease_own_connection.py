"""Lease renewals on a thread and connection of their own (kq.runtime.lease, `own_connection`),
on a real nats-server: a holder whose loop runs a long synchronous stretch (as admission's first
round after a 100,000-workload rebuild), or whose shared connection is stalled, keeps its lease;
renewing on its loop it loses it; a wedged loop or a holder that stops renewing loses it to a
standby."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from support.wait import eventually

from kq.config import NatsConfig
from kq.runtime import Bus, Lease

pytestmark = pytest.mark.timeout(40)


def lease(bus: Bus, holder: str, *, own: bool, ttl: int = 1, stall_limit_s: float | None = None) -> Lease:
    return Lease(bus, "admission", "own", holder, ttl=ttl, poll_interval=0.05, own_connection=own,
                 stall_limit_s=stall_limit_s)


def synchronous_stretch(seconds: float) -> None:
    """The holder's loop runs nothing meanwhile (the work it stands for: a decision round's CPU)."""
    time.sleep(seconds)


@pytest.fixture
async def observer(nats_config: NatsConfig, bus: Bus) -> AsyncIterator[Bus]:
    """A second process's view of the bucket (the holder's shared connection may be stalled)."""
    b = await Bus.connect(nats_config, "observer", connect_timeout_s=10.0)
    try:
        yield b
    finally:
        await b.close()


@contextlib.contextmanager
def stalled(bus: Bus) -> Iterator[None]:
    """Nothing is read off the bus's connection meanwhile: a read loop far behind, at its limit.
    (nats-py has no public way to hold a connection's reads: its transport's reader is paused.)"""
    reader = bus.nc._transport._io_reader._transport  # type: ignore[union-attr]  # see above
    reader.pause_reading()
    try:
        yield
    finally:
        reader.resume_reading()


async def _renewed(holder: Lease, observer: Bus, past: int) -> bool:
    current = await Lease(observer, "admission", "own", "observer").current()
    return current is not None and current[1].holder == holder.holder and current[0] >= past


async def test_renewals_on_their_own_connection_hold_while_the_shared_one_is_stalled(bus: Bus, observer: Bus) -> None:
    a = lease(bus, "a", own=True)
    epoch = await a.acquire(timeout=5)
    keeper = asyncio.create_task(a.keep_alive())
    try:
        with stalled(bus):
            # Eight renewals (ttl 1 s, one every 1/3 s): well past the TTL with nothing read on the shared one.
            await eventually(lambda: _renewed(a, observer, epoch + 8), timeout=20, what="renewals past the TTL")
            assert not a.lost.is_set() and not keeper.done()
            assert not await lease(observer, "b", own=False).try_acquire()
        assert a.epoch == epoch
    finally:
        keeper.cancel()
        await asyncio.gather(keeper, return_exceptions=True)
    assert a._renewing_js is None  # its connection closed with keep_alive


async def test_renewals_on_the_shared_stalled_connection_lose_the_lease(bus: Bus, observer: Bus) -> None:
    """The counterpart: the stall above is real (the lease lapses on the shared connection)."""
    a = lease(bus, "a", own=False)
    epoch = await a.acquire(timeout=5)
    keeper = asyncio.create_task(a.keep_alive())
    b = lease(observer, "b", own=False)
    try:
        with stalled(bus):
            assert await b.acquire(timeout=20) > epoch  # the key lapsed: a standby takes over
            await asyncio.wait_for(keeper, timeout=20)  # the renewal times out: keep_alive ends, lost
        assert a.lost.is_set() and not a.is_held()
    finally:
        keeper.cancel()
        await asyncio.gather(keeper, return_exceptions=True)
        await b.release()


async def test_a_holder_that_stops_renewing_loses_the_lease_to_a_standby(bus: Bus, observer: Bus) -> None:
    a = lease(bus, "a", own=True)
    epoch = await a.acquire(timeout=5)
    keeper = asyncio.create_task(a.keep_alive())
    await eventually(lambda: _renewed(a, observer, epoch + 2), timeout=10, what="a renewal")
    keeper.cancel()  # the holder stops (no release: a crash or a frozen process)
    await asyncio.gather(keeper, return_exceptions=True)
    b = lease(observer, "b", own=True)
    assert await b.acquire(timeout=10) > epoch
    assert not await a.renew()  # another holder wrote it: refused
    assert a.lost.is_set()
    await b.release()


async def test_a_long_synchronous_stretch_keeps_the_lease_renewed_on_its_thread(bus: Bus, observer: Bus) -> None:
    a = lease(bus, "a", own=True, ttl=2)
    epoch = await a.acquire(timeout=5)
    keeper = asyncio.create_task(a.keep_alive())
    try:
        await eventually(lambda: _renewed(a, observer, epoch + 1), timeout=10, what="a first renewal")
        before = a.revision
        synchronous_stretch(4.5)  # more than two TTLs: on the holder's loop no re-take could save it
        assert a.revision >= before + 3  # renewed meanwhile, by its thread
        assert a.is_held() and not a.lost.is_set() and not keeper.done() and a.epoch == epoch
        assert not await lease(observer, "b", own=False).try_acquire()
        current = await a.current()  # the holder's own reads, on its loop, use the bus's connection
        assert current is not None and current[1].holder == "a"
    finally:
        keeper.cancel()
        await asyncio.gather(keeper, return_exceptions=True)
    await a.release()
    assert await lease(observer, "b", own=False).try_acquire()  # released at once, as before


async def test_the_same_stretch_loses_the_lease_renewed_on_the_holders_loop(bus: Bus, observer: Bus) -> None:
    """The counterpart: the stretch above is long enough to lose a lease renewed on the loop."""
    a = lease(bus, "a", own=False, ttl=2)
    epoch = await a.acquire(timeout=5)
    keeper = asyncio.create_task(a.keep_alive())
    try:
        await eventually(lambda: _renewed(a, observer, epoch + 1), timeout=10, what="a first renewal")
        synchronous_stretch(4.5)
        await asyncio.wait_for(keeper, timeout=20)
        assert a.lost.is_set() and not a.is_held()
    finally:
        keeper.cancel()
        await asyncio.gather(keeper, return_exceptions=True)


async def test_a_wedged_holder_loop_stops_the_renewals_and_loses_the_lease(bus: Bus, observer: Bus) -> None:
    a = lease(bus, "a", own=True, stall_limit_s=1.5)
    epoch = await a.acquire(timeout=5)
    keeper = asyncio.create_task(a.keep_alive())
    try:
        await eventually(lambda: _renewed(a, observer, epoch + 1), timeout=10, what="a first renewal")
        synchronous_stretch(3.5)  # past the stall limit and the TTL: the thread let the lease lapse
        await asyncio.wait_for(keeper, timeout=20)
        assert a.lost.is_set() and not a.is_held()
    finally:
        keeper.cancel()
        await asyncio.gather(keeper, return_exceptions=True)
    b = lease(observer, "b", own=False)
    assert await b.acquire(timeout=10) > epoch
    await b.release()
