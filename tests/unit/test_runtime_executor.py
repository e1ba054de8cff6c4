"""kq.runtime.KeyedExecutor: never more than `limit` at once, one key's work in line order, failures
surfaced at the next room(), and what a place leaves handed to the next of its key."""

from __future__ import annotations

import asyncio

import pytest

from kq.runtime import KeyedExecutor

pytestmark = pytest.mark.timeout(10)


async def test_room_bounds_the_running_tasks_and_frees_a_slot_when_one_ends() -> None:
    ex: KeyedExecutor[None] = KeyedExecutor(2)
    running = 0
    most = 0
    gates = [asyncio.Event() for _ in range(5)]

    async def work(gate: asyncio.Event) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await gate.wait()
        running -= 1

    for gate in gates[:2]:
        await ex.room()
        ex.start(work(gate))
    third = asyncio.create_task(ex.room())
    await asyncio.sleep(0)  # let it try: both slots are taken
    assert not third.done()
    gates[0].set()
    await asyncio.wait_for(third, 5)  # a slot came free
    ex.start(work(gates[2]))
    for gate in gates:
        gate.set()
    await ex.close()
    assert most == 2


async def test_a_failed_task_is_raised_by_the_next_room() -> None:
    ex: KeyedExecutor[None] = KeyedExecutor(2)

    async def boom() -> None:
        raise ValueError("boom")

    await ex.room()
    task = ex.start(boom())
    await asyncio.gather(task, return_exceptions=True)
    with pytest.raises(ValueError, match="boom"):
        await ex.room()
    await ex.close()


async def test_without_raise_failures_a_failed_task_is_let_go() -> None:
    ex: KeyedExecutor[None] = KeyedExecutor(1, raise_failures=False)

    async def boom() -> None:
        raise ValueError("boom")

    await ex.room()
    task = ex.start(boom())
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.wait_for(ex.room(), 5)  # the slot is free and nothing is raised
    await ex.close()


async def test_close_cancels_what_still_runs() -> None:
    ex: KeyedExecutor[None] = KeyedExecutor(3)
    await ex.room()
    task = ex.start(asyncio.Event().wait())
    await ex.close()
    assert task.cancelled()


async def test_one_key_runs_in_line_order_and_hands_on_what_it_left() -> None:
    ex: KeyedExecutor[str] = KeyedExecutor(4)
    order: list[str] = []
    seen: dict[str, str | None] = {}
    release_first = asyncio.Event()

    async def run(name: str, key: str, leave: str | None, gate: asyncio.Event | None = None) -> None:
        place = ex.line_up(key)  # taken now, before any await
        try:
            seen[name] = await place.turn()
            async with ex.slot():
                if gate is not None:
                    await gate.wait()
                order.append(name)
        finally:
            place.leave(leave)

    # a1 is held; a2 (same key) must wait for it, b1 (another key) need not.
    a1 = asyncio.create_task(run("a1", "a", "a1 blocked", release_first))
    await asyncio.sleep(0)
    a2 = asyncio.create_task(run("a2", "a", None))
    b1 = asyncio.create_task(run("b1", "b", None))
    await asyncio.wait_for(b1, 5)
    assert order == ["b1"] and not a2.done()
    release_first.set()
    await asyncio.wait_for(asyncio.gather(a1, a2), 5)
    assert order == ["b1", "a1", "a2"]
    assert seen == {"a1": None, "a2": "a1 blocked", "b1": None}
    assert ex._tails == {}  # empty lines are forgotten


async def test_work_waiting_its_turn_holds_no_slot() -> None:
    ex: KeyedExecutor[None] = KeyedExecutor(1)
    gate = asyncio.Event()
    done: list[str] = []

    async def run(name: str, key: str, gate: asyncio.Event | None = None) -> None:
        place = ex.line_up(key)
        try:
            await place.turn()
            if gate is not None:
                await gate.wait()
            async with ex.slot():
                done.append(name)
        finally:
            place.leave()

    k1 = asyncio.create_task(run("k1", "k", gate))  # its turn, but held before the slot
    k2 = asyncio.create_task(run("k2", "k"))  # waits its turn behind k1
    j1 = asyncio.create_task(run("j1", "j"))  # the one slot is free for it all the same
    await asyncio.wait_for(j1, 5)
    assert done == ["j1"]
    gate.set()
    await asyncio.wait_for(asyncio.gather(k1, k2), 5)
    assert done == ["j1", "k1", "k2"]


async def test_leaving_lets_the_next_place_go() -> None:
    ex: KeyedExecutor[str] = KeyedExecutor(2)
    first = ex.line_up("k")
    second = ex.line_up("k")
    waiter = asyncio.create_task(second.turn())
    await asyncio.sleep(0)
    assert not waiter.done()
    first.leave("first's news")
    assert await asyncio.wait_for(waiter, 5) == "first's news"
    second.leave()
