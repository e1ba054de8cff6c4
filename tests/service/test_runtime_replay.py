"""Replay on a real nats-server: order, last value per subject, caught_up, following, resets."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal

import pytest
from support.wait import eventually

from kq import subjects
from kq.mirror import record_headers
from kq.runtime import Bus, Delivery, OutMsg, PermanentError
from kq.runtime.errors import dead_letter_decoder

pytestmark = pytest.mark.timeout(30)


def obj(name: str, ns: str = "ns") -> str:
    return subjects.object_subject("c1", "workload", ns, name)


async def put(bus: Bus, name: str, rv: str, body: bytes | None = None, op: Literal["put", "delete"] = "put") -> None:
    await bus.publish(obj(name), body or f"{name}@{rv}".encode(), msg_id=f"{name}@{rv}:{op}",
                      headers=record_headers(op, rv, f"uid-{name}"))


async def test_last_per_subject_replay_sees_latest_values_then_follows(bus: Bus) -> None:
    await put(bus, "a", "1")
    await put(bus, "b", "2")
    await put(bus, "a", "3")
    await put(bus, "b", "4", op="delete")
    gate, entered = asyncio.Event(), asyncio.Event()
    seen: list[tuple[str, str]] = []

    async def handler(d: Delivery) -> None:
        entered.set()
        await gate.wait()
        seen.append((d.data.decode(), d.headers["Kq-Op"]))

    async with bus.replay(subjects.OBJECTS_STREAM, subjects.object_filter("c1"), handler,
                          deliver="last_per_subject") as r:
        await asyncio.wait_for(entered.wait(), 5)  # the first record is being handled, and blocked
        assert not r.caught_up.is_set() and seen == []  # handler blocked: not caught up
        gate.set()
        await r.wait_caught_up(5)
        assert seen == [("a@3", "put"), ("b@4", "delete")]  # the tombstone is a last value
        await put(bus, "c", "5")
        await eventually(lambda: seen[-1] == ("c@5", "put"))
    assert len(seen) == 3


async def test_empty_stream_is_caught_up_at_once(bus: Bus) -> None:
    async def handler(d: Delivery) -> None:
        raise AssertionError("nothing to deliver")

    async with bus.replay(subjects.OBJECTS_STREAM, subjects.object_filter("c1"), handler) as r:
        await r.wait_caught_up(5)
        assert r.handled == 0


async def test_caught_up_when_later_messages_belong_to_other_subjects(bus: Bus) -> None:
    await put(bus, "a", "1")
    for i in range(3):  # after ours, only messages our filter does not select
        await bus.publish(subjects.object_subject("other", "workload", "ns", f"x{i}"), b"x", msg_id=f"x{i}",
                          headers=record_headers("put", "1", "u"))
    seen: list[str] = []

    async def handler(d: Delivery) -> None:
        seen.append(d.subject)

    async with bus.replay(subjects.OBJECTS_STREAM, subjects.object_filter("c1"), handler) as r:
        await r.wait_caught_up(5)
    assert seen == [obj("a")]


async def test_deliver_all_replays_history_in_order(bus: Bus) -> None:
    msgs = [OutMsg(subjects.event_subject("c1", "workload", "ns", f"w{i % 3}"), str(i).encode(), f"e{i}") for i in range(50)]
    await bus.publish_many(msgs)
    seen: list[int] = []

    async def handler(d: Delivery) -> None:
        seen.append(int(d.data))

    async with bus.replay(subjects.EVENTS_STREAM, subjects.event_filter("c1"), handler, deliver="all", batch=8) as r:
        await r.wait_caught_up(5)
    assert seen == list(range(50))


async def test_replay_resumes_after_its_consumer_is_deleted(bus: Bus) -> None:
    await bus.publish_many([OutMsg(subjects.event_subject("c1", "workload", "ns", "w"), str(i).encode(), f"e{i}") for i in range(5)])
    seen: list[int] = []

    async def handler(d: Delivery) -> None:
        seen.append(int(d.data))

    async with bus.replay(subjects.EVENTS_STREAM, subjects.event_filter("c1"), handler) as r:
        await r.wait_caught_up(5)
        (consumer,) = await bus.js.consumers_info(subjects.EVENTS_STREAM)
        await bus.js.delete_consumer(subjects.EVENTS_STREAM, consumer.name)
        await bus.publish_many([OutMsg(subjects.event_subject("c1", "workload", "ns", "w"), str(i).encode(), f"e{i}") for i in range(5, 10)])
        await eventually(lambda: len(seen) >= 10, timeout=10)
    assert seen == list(range(10))  # nothing lost, nothing twice


async def test_replay_dead_letters_a_bad_message_and_goes_on(bus: Bus) -> None:
    await put(bus, "a", "1", body=b"poison")
    await put(bus, "b", "2")
    seen: list[bytes] = []

    async def handler(d: Delivery) -> None:
        if d.data == b"poison":
            raise PermanentError("cannot decode a")
        seen.append(d.data)

    async with bus.replay(subjects.OBJECTS_STREAM, subjects.object_filter("c1"), handler) as r:
        await r.wait_caught_up(5)
    assert seen == [b"b@2"]
    m = await bus.js.get_last_msg(subjects.EVENTS_STREAM, subjects.dead_letter_subject("test"))
    letter = dead_letter_decoder.decode(m.data or b"")
    assert (letter.subject, letter.error, letter.data) == (obj("a"), "cannot decode a", b"poison")


async def test_wait_caught_up_reports_a_failed_replay(bus: Bus) -> None:
    async def handler(d: Delivery) -> None:
        pass

    async with bus.replay("NO_SUCH_STREAM", "x.>", handler) as r:
        with pytest.raises(Exception, match=r"not found|NotFound"):
            await r.wait_caught_up(5)


async def test_behind_counts_the_messages_still_to_handle(bus: Bus) -> None:
    n = 150
    await bus.publish_many([OutMsg(obj(f"w{i:03}"), b"x", f"w{i}", headers=record_headers("put", "1", f"u{i}"))
                            for i in range(n)])
    behind: list[int] = []
    replay: list[object] = []

    async def handler(d: Delivery) -> None:
        behind.append(replay[0].behind)  # type: ignore[attr-defined]  # the Replay, set below

    async with bus.replay(subjects.OBJECTS_STREAM, subjects.object_filter("c1"), handler, batch=40) as r:
        replay.append(r)
        await r.wait_caught_up(5)
        await eventually(lambda: len(behind) >= n, timeout=20)
        assert r.behind == 0 and r.progress.is_set()
    # While message k is handled, k..n-1 are still to handle (0 before the first is handled).
    assert behind[:3] == [0, n - 1, n - 2] and behind[-1] == 1



# --- look-ahead: far behind, picked records are handled at once, older ones of their subject skipped ---


async def _put_all(bus: Bus, names: list[str]) -> None:
    await bus.publish_many([OutMsg(obj(n), f"{n}@1".encode(), f"{n}@1", headers=record_headers("put", "1", f"u-{n}"))
                            for n in names])


def _held_handler(seen: list[str]) -> tuple[asyncio.Event, asyncio.Event, Callable[[Delivery], Awaitable[None]]]:
    """A handler held on its first message until `gate` is set (`entered` says it is there)."""
    gate, entered = asyncio.Event(), asyncio.Event()

    async def handler(d: Delivery) -> None:
        entered.set()
        await gate.wait()
        seen.append(d.data.decode())

    return gate, entered, handler


async def test_far_behind_a_picked_record_is_handled_at_once_and_its_older_one_skipped(bus: Bus) -> None:
    names = [f"a{i:04}" for i in range(1000)]
    names.insert(700, "x")  # x@1, deep in the backlog
    await _put_all(bus, names)
    seen: list[str] = []
    gate, entered, handler = _held_handler(seen)
    async with bus.replay(subjects.OBJECTS_STREAM, subjects.object_filter("c1"), handler, deliver="last_per_subject",
                          batch=2000, ahead=lambda d: d.data == b"x@2", ahead_depth=5000) as r:
        await asyncio.wait_for(entered.wait(), 5)  # a0000 in hand, the rest held behind it

        def sent(seq: int) -> Callable[[], Awaitable[bool]]:
            async def check() -> bool:
                (consumer,) = await bus.js.consumers_info(subjects.OBJECTS_STREAM)
                return consumer.delivered is not None and consumer.delivered.stream_seq >= seq
            return check

        # x@1 is on its way to us before x@2 replaces it in the stream
        await eventually(sent(len(names)), timeout=10, what="the backlog sent to the replay")
        ack = await bus.publish(obj("x"), b"x@2", msg_id="x@2", headers=record_headers("put", "2", "u-x"))
        # x@2 in hand too before the backlog moves: the server sent it ahead of this answer on the
        # same connection (else, on a loaded machine, the backlog can reach x@1 before x@2 arrives)
        await eventually(sent(ack.seq), timeout=10, what="x@2 sent to the replay")
        gate.set()
        await eventually(lambda: r.last_seq >= ack.seq, timeout=10, what="the replay past x@2")
    assert seen.count("x@2") == 1 and "x@1" not in seen  # handled once; its older record, still held, skipped
    assert seen.index("x@2") < seen.index("a0999@1")  # ahead of the backlog
    assert [s for s in seen if s != "x@2"] == [f"{n}@1" for n in names if n != "x"]  # the rest in order
    assert r.handled_ahead == 1 and r.handled == 1002


async def test_a_short_backlog_is_handled_in_order(bus: Bus) -> None:
    names = [f"a{i:03}" for i in range(200)]
    await _put_all(bus, names)
    seen: list[str] = []
    gate, entered, handler = _held_handler(seen)
    async with bus.replay(subjects.OBJECTS_STREAM, subjects.object_filter("c1"), handler, deliver="last_per_subject",
                          ahead=lambda d: True, ahead_depth=5000) as r:
        await asyncio.wait_for(entered.wait(), 5)
        gate.set()
        await r.wait_caught_up(10)
        await eventually(lambda: len(seen) == len(names), timeout=10)
    assert seen == [f"{n}@1" for n in names] and r.handled_ahead == 0
