"""A holder whose lease key merely expired (a late renewal) keeps its term with the same epoch,
on a real nats-server; it loses when another holder can have held the key since."""

from __future__ import annotations

import asyncio

import pytest
from support.wait import eventually

from kq.clock import FakeClock
from kq.runtime import Bus, Lease

pytestmark = pytest.mark.timeout(30)


def lease(bus: Bus, holder: str, clock: FakeClock | None = None, partition: str = "p") -> Lease:
    if clock is None:
        return Lease(bus, "admission", partition, holder, ttl=1, poll_interval=0.05)
    return Lease(bus, "admission", partition, holder, ttl=1, poll_interval=0.05, clock=clock)


async def expired(holder: Lease) -> None:
    """Wait (bounded) until the server has removed the holder's key by its TTL."""
    await eventually(lambda: _free(holder), timeout=10, what="the lease key to expire")


async def _free(holder: Lease) -> bool:
    return await holder.current() is None


async def test_late_renewal_retakes_the_expired_key_with_the_same_epoch(bus: Bus) -> None:
    clock = FakeClock()
    a = lease(bus, "a", clock)
    epoch = await a.acquire(timeout=2)
    await expired(a)
    await clock.advance(1.2)  # past our window, less than two TTLs since our last write
    assert not a.is_held()
    assert await a.renew()
    assert a.epoch == epoch and not a.lost.is_set() and a.is_held()
    current = await a.current()
    assert current is not None
    assert (current[0], current[1].holder, current[1].epoch) == (a.revision, "a", epoch)
    assert not await lease(bus, "b").try_acquire()  # it is held again


async def test_too_late_to_vouch_for_the_gap_loses(bus: Bus) -> None:
    clock = FakeClock()
    a = lease(bus, "a", clock)
    await a.acquire(timeout=2)
    await expired(a)
    await clock.advance(2.5)  # another holder's whole term could have fitted since our last write
    assert not await a.renew()
    assert a.lost.is_set() and not a.is_held()
    assert await a.current() is None  # left free for a standby


@pytest.mark.parametrize("released", [True, False])
async def test_another_holder_in_between_makes_the_first_lose(bus: Bus, released: bool) -> None:
    clock = FakeClock()
    a, b = lease(bus, "a", clock), lease(bus, "b")
    epoch_a = await a.acquire(timeout=2)
    await expired(a)
    epoch_b = await b.acquire(timeout=2)
    assert epoch_b > epoch_a
    if released:
        await b.release()  # only its delete marker remains
    await clock.advance(1.2)
    assert not await a.renew()
    assert a.lost.is_set() and not a.is_held()
    current = await a.current()
    if released:
        assert current is None
    else:
        assert current is not None and current[1].holder == "b"


async def test_a_standby_racing_the_retake_exactly_one_holds(bus: Bus) -> None:
    for round_ in range(3):
        clock = FakeClock()
        a, b = lease(bus, "a", clock, partition=f"race{round_}"), lease(bus, "b", partition=f"race{round_}")
        epoch_a = await a.acquire(timeout=2)
        await expired(a)
        await clock.advance(1.2)
        renewed, acquired = await asyncio.gather(a.renew(), b.try_acquire())
        assert renewed != acquired, (renewed, acquired)
        current = await a.current()
        assert current is not None
        if renewed:
            assert (current[1].holder, a.epoch, b.epoch) == ("a", epoch_a, None)
        else:
            assert current[1].holder == "b" and a.lost.is_set() and b.epoch is not None and b.epoch > epoch_a
