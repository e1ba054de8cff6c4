"""The dispatcher's lease (services/dispatcher/service.py) on a real nats-server: a term whose loop
runs a long synchronous stretch (on a loaded machine: relisting 20 workers, a burst of reconciles)
keeps its lease and its epoch; no second term, no relisting of every worker again."""

from __future__ import annotations

import asyncio
import time

import pytest
from support.wait import eventually

from kq.runtime import Bus, Lease
from services.dispatcher.service import dispatcher_lease

pytestmark = pytest.mark.timeout(40)


async def test_a_stalled_term_keeps_the_dispatcher_lease(bus: Bus) -> None:
    lease = dispatcher_lease(bus, "manager", "a", ttl=1)
    epoch = await lease.acquire(timeout=5)
    keeper = asyncio.create_task(lease.keep_alive())
    try:
        await eventually(lambda: lease.revision > 1, timeout=10, what="a first renewal")
        before = lease.revision
        time.sleep(3.5)  # the term's loop runs nothing for more than three TTLs
        assert lease.revision >= before + 2  # renewed meanwhile, off the term's loop
        assert lease.is_held() and not lease.lost.is_set() and lease.epoch == epoch
        assert not await Lease(bus, "dispatcher", "manager", "b", ttl=1).try_acquire()
    finally:
        keeper.cancel()
        await asyncio.gather(keeper, return_exceptions=True)
    await lease.release()
