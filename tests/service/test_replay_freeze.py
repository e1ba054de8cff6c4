"""A rebuild's state kept out of the cyclic collector's walks (kq.runtime.replay `freeze_every`),
on a real nats-server: until caught up, what the handler kept is frozen every N messages and at
catch-up, nothing after; an ended term's frozen objects are collectable again (free_ended_term)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from support.wait import eventually

from kq import subjects
from kq.mirror import record_headers
from kq.runtime import Bus, Delivery
from kq.runtime.leadership import free_ended_term

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # this worker's later tests get an ordinary collector
    gc.collect()


async def put(bus: Bus, name: str) -> None:
    await bus.publish(subjects.object_subject("c1", "workload", "ns", name), name.encode(), msg_id=f"{name}:put",
                      headers=record_headers("put", "1", f"uid-{name}"))


def walked(kept: list[list[str]]) -> list[bool]:
    """For each kept object, whether the collector still walks it (frozen ones it does not)."""
    ids = {id(o) for o in gc.get_objects()}
    return [id(o) in ids for o in kept]


async def test_rebuilt_state_is_frozen_until_caught_up_and_not_after(bus: Bus) -> None:
    for i in range(25):
        await put(bus, f"w{i}")
    kept: list[list[str]] = []
    seen_at_11: list[bool] = []

    async def handler(d: Delivery) -> None:
        if len(kept) == 10:
            seen_at_11.extend(walked(kept))  # the first 10 were frozen after the 10th
        kept.append([d.data.decode()])  # a list: always tracked by the collector (a dict of strings is not)

    async with bus.replay(subjects.OBJECTS_STREAM, subjects.object_filter("c1"), handler,
                          deliver="last_per_subject", freeze_every=10) as r:
        await r.wait_caught_up(10)
        assert seen_at_11 == [False] * 10
        assert walked(kept) == [False] * 25  # the last 5 frozen at catch-up
        await put(bus, "live")
        await eventually(lambda: len(kept) == 26, timeout=10, what="the live message")
        assert walked(kept[25:]) == [True]  # following live: the collector's as usual


async def test_an_ended_terms_frozen_cycles_are_collected(bus: Bus) -> None:
    class Node:
        pass

    node = Node()
    node.self = node  # type: ignore[attr-defined]  # a reference cycle: only the collector frees it
    gone = weakref.ref(node)
    gc.freeze()
    del node
    gc.collect()
    assert gone() is not None  # frozen: a collection does not see it
    await free_ended_term()
    assert gone() is None
