"""The lease's timing on fake time: renewal cadence, how long a lease stays ours when renewals
fail, when it is lost, how a standby polls. The lease's two storage calls (`_last`, `_write`)
are replaced by an in-memory key with revisions; the real KV bucket (TTL, conditional writes)
is tested in tests/service/test_runtime_lease.py."""

from __future__ import annotations

import asyncio

import pytest
from support.memory_lease import InMemoryLease, Key

from kq.clock import FakeClock
from kq.runtime.lease import LeaseValue, LeaseWindow

pytestmark = pytest.mark.timeout(10)


def test_window_holds_ttl_minus_margin_and_renews_sooner_near_its_end() -> None:
    w = LeaseWindow(ttl=9, renew_interval=3)
    w.written(100.0)
    assert w.valid(108.49) and not w.valid(108.5)  # margin min(0.5, ttl/10)
    assert w.next_renewal_in(100.0) == 3
    assert w.next_renewal_in(107.0) == pytest.approx(0.75)  # half of the 1.5 s left
    assert w.next_renewal_in(108.49) == 0.05  # never a busy loop


async def test_keep_alive_renews_every_third_of_the_ttl_and_stays_held() -> None:
    clock, key = FakeClock(), Key()
    lease = InMemoryLease(key, clock, "a")
    assert await lease.try_acquire()
    keeper = asyncio.create_task(lease.keep_alive())
    await clock.advance(2.9)
    assert key.writes == 1  # the acquiring write only
    await clock.advance(0.1)
    assert key.writes == 2
    await clock.advance(60)
    assert key.writes == 22 and lease.is_held() and not lease.lost.is_set()
    keeper.cancel()


async def test_unknown_renewals_keep_the_lease_until_its_window_closes_then_it_is_lost() -> None:
    clock, key = FakeClock(), Key()
    lease = InMemoryLease(key, clock, "a")
    assert await lease.try_acquire()  # valid until t+8.5
    key.fail = True
    keeper = asyncio.create_task(lease.keep_alive())
    await clock.advance(8.4)
    assert lease.is_held() and not lease.lost.is_set()
    await clock.advance(0.2)
    assert lease.lost.is_set() and not lease.is_held()
    assert keeper.done()


async def test_a_renewal_refused_because_another_holder_wrote_loses_at_once() -> None:
    clock, key = FakeClock(), Key()
    lease = InMemoryLease(key, clock, "a")
    assert await lease.try_acquire()
    keeper = asyncio.create_task(lease.keep_alive())
    key.rev += 5  # someone else's writes
    key.value = LeaseValue(holder="b", service="admission", partition="p", epoch=6, renewed_at="")
    await clock.advance(3)
    assert lease.lost.is_set() and keeper.done()


async def test_standby_polls_until_the_key_is_free_or_its_timeout() -> None:
    clock, key = FakeClock(), Key()
    a = InMemoryLease(key, clock, "a")
    b = InMemoryLease(key, clock, "b", poll_interval=0.5)
    assert await a.try_acquire()
    waiting = asyncio.create_task(b.acquire(timeout=2.0))
    await clock.advance(2.6)
    assert waiting.done()
    with pytest.raises(TimeoutError, match="held by"):
        waiting.result()

    waiting = asyncio.create_task(b.acquire())
    await clock.advance(1.0)
    assert not waiting.done()
    key.value = None  # a released (delete marker)
    await clock.advance(0.5)
    assert waiting.done() and waiting.result() == key.rev and b.is_held()
