"""The watcher's write slots: bounded, and when all are taken an urgent waiter goes before every
background waiter (each kind in arrival order); a cancelled waiter neither takes nor loses a slot."""

from __future__ import annotations

import asyncio

import pytest

from services.watcher.write_slots import WriteSlots

pytestmark = pytest.mark.timeout(10)


async def _hold(slots: WriteSlots, name: str, urgent: bool, order: list[str], release: asyncio.Event) -> None:
    async with slots.slot(urgent=urgent):
        order.append(name)
        await release.wait()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_urgent_waiters_get_freed_slots_before_background_ones() -> None:
    slots = WriteSlots(2, background_share=0)
    order: list[str] = []
    gates = {n: asyncio.Event() for n in ("h1", "h2", "b1", "b2", "u1", "u2")}
    tasks = [asyncio.create_task(_hold(slots, "h1", False, order, gates["h1"])),
             asyncio.create_task(_hold(slots, "h2", False, order, gates["h2"]))]
    await _settle()
    for name, urgent in (("b1", False), ("u1", True), ("b2", False), ("u2", True)):
        tasks.append(asyncio.create_task(_hold(slots, name, urgent, order, gates[name])))
        await _settle()
    assert order == ["h1", "h2"] and slots.waiting() == (2, 2)  # bounded: two at a time
    for name in ("h1", "h2", "u1", "u2", "b1", "b2"):
        gates[name].set()
        await _settle()
    await asyncio.gather(*tasks)
    assert order == ["h1", "h2", "u1", "u2", "b1", "b2"]
    assert slots.waiting() == (0, 0)


async def test_a_cancelled_waiter_leaves_its_place_and_the_slot_count_intact() -> None:
    slots = WriteSlots(1, background_share=0)
    order: list[str] = []
    gates = {n: asyncio.Event() for n in ("h", "u", "b")}
    holder = asyncio.create_task(_hold(slots, "h", False, order, gates["h"]))
    await _settle()
    cancelled = asyncio.create_task(_hold(slots, "u", True, order, gates["u"]))
    waiter = asyncio.create_task(_hold(slots, "b", False, order, gates["b"]))
    await _settle()
    cancelled.cancel()
    await _settle()
    assert slots.waiting() == (0, 1)
    gates["h"].set()
    gates["b"].set()
    await asyncio.gather(holder, waiter)
    assert cancelled.cancelled() and order == ["h", "b"]
    # Both slots' worth of work done: the one slot is free again.
    async with slots.slot(urgent=False):
        assert slots.waiting() == (0, 0)


async def test_background_keeps_its_share_of_the_slots_while_urgent_work_waits() -> None:
    slots = WriteSlots(3, background_share=1)
    order: list[str] = []
    names = ("h1", "h2", "h3", "u1", "u2", "b1", "b2")
    gates = {n: asyncio.Event() for n in names}
    tasks = [asyncio.create_task(_hold(slots, n, False, order, gates[n])) for n in ("h1", "h2", "h3")]
    await _settle()
    for name, urgent in (("b1", False), ("b2", False), ("u1", True), ("u2", True)):
        tasks.append(asyncio.create_task(_hold(slots, name, urgent, order, gates[name])))
        await _settle()
    gates["h1"].set()  # three background running: the freed slot goes to the urgent waiter
    await _settle()
    gates["h2"].set()
    await _settle()
    gates["h3"].set()  # no background left running: one background waiter gets its share
    await _settle()
    assert order == ["h1", "h2", "h3", "u1", "u2", "b1"] and slots.waiting() == (0, 1)
    for name in ("u1", "u2", "b1", "b2"):
        gates[name].set()
    await asyncio.gather(*tasks)
    assert order[-1] == "b2"


async def test_an_excused_background_waiter_goes_on_without_a_slot() -> None:
    """excuse(key): the background waiter of `key` leaves the line at once with no slot (False), the
    holder keeps its slot, and the next waiter still gets it when it is freed."""
    slots = WriteSlots(1, background_share=0)
    order: list[str] = []
    gates = {n: asyncio.Event() for n in ("h", "b")}
    holder = asyncio.create_task(_hold(slots, "h", False, order, gates["h"]))
    await _settle()
    got: list[bool] = []

    async def excused() -> None:
        async with slots.slot(urgent=False, key="w1") as held:
            got.append(held)

    waiter = asyncio.create_task(excused())
    other = asyncio.create_task(_hold(slots, "b", False, order, gates["b"]))
    await _settle()
    assert slots.waiting() == (0, 2)
    assert slots.excuse("w1") and not slots.excuse("w1")
    await asyncio.wait_for(waiter, 5)
    assert got == [False] and slots.waiting() == (0, 1) and order == ["h"]
    gates["h"].set()
    gates["b"].set()
    await asyncio.gather(holder, other)
    assert order == ["h", "b"]
    async with slots.slot(urgent=True) as held:  # the one slot is free again, not lost nor doubled
        assert held and slots.waiting() == (0, 0)


async def test_acquire_returns_the_line_a_slot_was_handed_over_in() -> None:
    """acquire: a free slot comes back in the line asked for; a background waiter promoted while it
    waits gets its slot as an urgent one (released as such: the background share is not miscounted);
    an excused waiter gets None and holds nothing."""
    slots = WriteSlots(1, background_share=1)
    first = await slots.acquire(urgent=False)
    assert first is False
    promoted = asyncio.create_task(slots.acquire(urgent=False, key="w1"))
    excused = asyncio.create_task(slots.acquire(urgent=False, key="w2"))
    await _settle()
    assert slots.promote("w1") and slots.excuse("w2")
    assert await asyncio.wait_for(excused, 5) is None
    slots.release(first)
    assert await asyncio.wait_for(promoted, 5) is True
    slots.release(True)
    assert slots.waiting() == (0, 0)
    # One slot, free again: a background acquire takes it at once, a second one waits for it.
    assert await asyncio.wait_for(slots.acquire(urgent=False), 5) is False
    late = asyncio.create_task(slots.acquire(urgent=True))
    await _settle()
    assert not late.done() and slots.waiting() == (1, 0)
    slots.release(False)
    assert await asyncio.wait_for(late, 5) is True
