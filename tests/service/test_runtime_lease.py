"""Leases on a real nats-server: one holder, keep-alive, expiry, takeover with a higher epoch."""

from __future__ import annotations

import asyncio
import time

import pytest
from support.wait import eventually

from kq.runtime import Bus, Lease, lead

pytestmark = pytest.mark.timeout(30)


def lease(bus: Bus, holder: str, ttl: int = 1) -> Lease:
    return Lease(bus, "admission", "manager.root", holder, ttl=ttl, poll_interval=0.05)


async def test_first_acquirer_holds_and_others_cannot(bus: Bus) -> None:
    a, b = lease(bus, "a", ttl=5), lease(bus, "b", ttl=5)
    assert await a.try_acquire()
    assert a.is_held() and a.epoch is not None and a.epoch > 0
    assert not await b.try_acquire()
    assert b.epoch is None and not b.is_held()
    current = await b.current()
    assert current is not None
    rev, value = current
    assert (rev, value.holder, value.partition) == (a.epoch, "a", "manager.root")


async def test_keep_alive_holds_past_the_ttl(bus: Bus) -> None:
    a, b = lease(bus, "a"), lease(bus, "b")
    await a.acquire(timeout=2)
    keeper = asyncio.create_task(a.keep_alive())
    try:
        with pytest.raises(TimeoutError, match="held by"):
            await b.acquire(timeout=3)  # three TTLs
        assert a.is_held() and not a.lost.is_set()
        assert a.revision > a.epoch  # type: ignore[operator]  # renewed, epoch unchanged
    finally:
        keeper.cancel()


async def test_expired_lease_goes_to_the_standby_with_a_higher_epoch(bus: Bus) -> None:
    a, b = lease(bus, "a"), lease(bus, "b")
    epoch_a = await a.acquire(timeout=2)
    t0 = time.monotonic()
    epoch_b = await b.acquire(timeout=5)  # a never renews
    assert time.monotonic() - t0 >= 0.5  # it had to expire first
    assert epoch_b > epoch_a
    assert not a.is_held()
    assert not await a.renew()  # the old holder learns it lost
    assert a.lost.is_set()
    assert b.is_held()


async def test_holder_that_stalls_sees_the_loss_when_it_wakes(bus: Bus) -> None:
    a, b = lease(bus, "a"), lease(bus, "b")
    await a.acquire(timeout=2)
    await b.acquire(timeout=5)
    keeper = asyncio.create_task(a.keep_alive())
    await asyncio.wait_for(keeper, 5)  # returns once it knows
    assert a.lost.is_set() and b.is_held()


async def test_release_hands_over_without_waiting_for_the_ttl(bus: Bus) -> None:
    a, b = lease(bus, "a", ttl=30), lease(bus, "b", ttl=30)
    epoch_a = await a.acquire(timeout=2)
    await a.release()
    t0 = time.monotonic()
    epoch_b = await b.acquire(timeout=2)
    assert time.monotonic() - t0 < 1.0
    assert epoch_b > epoch_a and not a.is_held()


async def test_epochs_increase_across_holders(bus: Bus) -> None:
    epochs = []
    for holder in ("a", "b", "c", "a"):
        lz = lease(bus, holder, ttl=30)
        epochs.append(await lz.acquire(timeout=2))
        await lz.release()
    assert epochs == sorted(set(epochs))


async def test_lead_runs_work_only_while_holding_and_fails_over(bus: Bus) -> None:
    running: dict[str, int] = {}

    def work(name: str):
        async def run(epoch: int) -> None:
            running[name] = epoch
            try:
                await asyncio.Event().wait()
            finally:
                running.pop(name, None)

        return run

    a, b = lease(bus, "a", ttl=2), lease(bus, "b", ttl=2)
    task_a = asyncio.create_task(lead(a, work("a")))
    epoch_a = await eventually(lambda: running.get("a"))
    task_b = asyncio.create_task(lead(b, work("b")))
    try:
        with pytest.raises(AssertionError, match="not met"):
            await eventually(lambda: "b" in running, timeout=2.5)  # standby waits while a renews
        task_a.cancel()  # a shuts down: releases
        await asyncio.gather(task_a, return_exceptions=True)
        await eventually(lambda: "b" in running, timeout=3)
        assert "a" not in running
        assert running["b"] > epoch_a
    finally:
        task_b.cancel()
        await asyncio.gather(task_b, return_exceptions=True)


async def test_lease_ttl_must_be_whole_seconds(bus: Bus) -> None:
    for bad in (0, 0.5, 1000):
        with pytest.raises(ValueError, match="ttl"):
            Lease(bus, "s", "p", "h", ttl=bad)  # type: ignore[arg-type]  # bad input on purpose
