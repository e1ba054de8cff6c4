"""The dispatcher's timers (services/dispatcher/wakeups.py): one per workload, at the earliest
moment asked for; a workload that left dispatch has none."""

from __future__ import annotations

import asyncio

from services.dispatcher.wakeups import Wakeups


async def test_many_requests_for_one_workload_fire_once_at_the_earliest() -> None:
    fired: list[str] = []
    done = asyncio.Event()

    def fire(key: str) -> None:
        fired.append(key)
        if key == "last":
            done.set()

    w: Wakeups[str] = Wakeups(fire)
    w.wake_in("wl", 30.0)  # a lease renewal ...
    for _ in range(5):
        w.wake_in("wl", 0.05)  # ... then a finish hold asked for again by each reconcile
    w.wake_in("wl", 0.2)  # later than the one held: dropped
    w.wake_in("last", 0.3)
    await asyncio.wait_for(done.wait(), timeout=10.0)
    assert fired == ["wl", "last"]
    assert len(w) == 0  # the 30 s timer went with the earlier one


async def test_a_cancelled_workload_is_not_decided_again() -> None:
    fired: list[str] = []
    done = asyncio.Event()

    def fire(key: str) -> None:
        fired.append(key)
        done.set()

    w: Wakeups[str] = Wakeups(fire)
    w.wake_in("finished", 0.05)
    w.wake_in("running", 0.2)
    w.cancel("finished")
    await asyncio.wait_for(done.wait(), timeout=10.0)
    assert fired == ["running"]
