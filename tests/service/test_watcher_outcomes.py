"""The watcher's outcome publisher: groups finishing while a publish is under way share the next
one, in the order they handed their outcomes over; a failed publish fails each of its waiters."""

from __future__ import annotations

import asyncio

from kq import subjects
from kq.runtime import Bus, OutMsg
from services.watcher.outcomes import OutcomePublisher


class _Counting:
    """The real bus, counting publish_batch calls (what the publisher coalesces)."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.calls: list[int] = []

    async def publish_batch(self, msgs: list[OutMsg]) -> None:
        self.calls.append(len(msgs))
        await self.bus.publish_batch(msgs)


async def _stored(bus: Bus, subject: str) -> list[bytes]:
    out: list[bytes] = []
    seq = 0
    while True:
        try:
            m = await bus.js.get_msg(subjects.EVENTS_STREAM, seq=seq + 1, subject=subject, next=True)
        except Exception:
            return out
        out.append(m.data or b"")
        seq = m.seq or 0


async def test_groups_finishing_meanwhile_share_one_publish_in_order(bus: Bus) -> None:
    counting = _Counting(bus)
    pub = OutcomePublisher(counting, max_batch=512)  # type: ignore[arg-type]  # the real bus, counted
    subject = subjects.outcome_subject("admission", "c1")

    def group(g: int) -> list[OutMsg]:
        return [OutMsg(subject, f"g{g}-{i}".encode(), f"out:g{g}-{i}") for i in range(2)]

    await pub.publish(group(0))  # alone: its own publish
    await asyncio.gather(*(pub.publish(group(g)) for g in range(1, 6)))  # handed over in one turn
    assert counting.calls == [2, 10]
    assert await _stored(bus, subject) == [f"g{g}-{i}".encode() for g in range(6) for i in range(2)]


async def test_a_failed_publish_fails_every_waiter_of_its_round(bus: Bus) -> None:
    bus.publish_retry_s = 0.5
    bus.publish_timeout_s = 0.5
    pub = OutcomePublisher(bus)
    nowhere = [OutMsg("kq.v1.nowhere.x", b"x", f"nowhere-{i}") for i in range(2)]
    results = await asyncio.gather(pub.publish(nowhere[:1]), pub.publish(nowhere[1:]), return_exceptions=True)
    assert all(isinstance(r, Exception) for r in results)
    ok = subjects.outcome_subject("admission", "c2")
    await pub.publish([OutMsg(ok, b"after", "out:after")])  # the publisher goes on
    assert await _stored(bus, ok) == [b"after"]


async def test_rounds_take_whole_groups_up_to_max_batch(bus: Bus) -> None:
    counting = _Counting(bus)
    pub = OutcomePublisher(counting, max_batch=3)  # type: ignore[arg-type]  # the real bus, counted
    subject = subjects.outcome_subject("admission", "c3")
    groups = [[OutMsg(subject, f"g{g}-{i}".encode(), f"out:c3-g{g}-{i}") for i in range(2)] for g in range(3)]
    await asyncio.gather(*(pub.publish(g) for g in groups))
    assert counting.calls == [2, 2, 2]  # two groups would be 4 > 3: one group a round
    assert await _stored(bus, subject) == [m.payload for g in groups for m in g]
