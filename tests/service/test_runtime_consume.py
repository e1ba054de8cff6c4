"""The one ack policy, on a real nats-server: ack after the handler, nak with delay, dead letters."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable

import pytest
from support.tasks import running
from support.wait import eventually

from kq import subjects
from kq.runtime import Bus, DeadLetter, Delivery, OutMsg, PermanentError, TemporaryError, dead_letter_decoder

pytestmark = pytest.mark.timeout(30)

CMD = subjects.command_subject("c1", "workload")


async def consumer_state(bus: Bus, durable: str) -> tuple[int, int, int]:
    """(ack floor stream seq, messages awaiting ack, messages not yet delivered)."""
    ci = await bus.js.consumer_info(subjects.COMMANDS_STREAM, durable)
    return ci.ack_floor.stream_seq, ci.num_ack_pending, ci.num_pending


async def dead_letters(bus: Bus, service: str = "test") -> list[DeadLetter]:
    out: list[DeadLetter] = []
    seq = 0
    while True:
        try:
            m = await bus.js.get_msg(subjects.EVENTS_STREAM, seq=seq + 1, subject=subjects.dead_letter_subject(service), next=True)
        except Exception:
            return out
        out.append(dead_letter_decoder.decode(m.data or b""))
        seq = m.seq or seq + 1


async def test_message_is_acked_only_after_the_handler_returns(bus: Bus) -> None:
    release = asyncio.Event()
    seen: list[str] = []

    async def handler(d: Delivery) -> None:
        seen.append(d.data.decode())
        await release.wait()
        await bus.publish(subjects.event_subject("c1", "workload", "ns", "w"), b"effect", msg_id="effect-1")

    await bus.publish(CMD, b"one", msg_id="1")
    async with running(bus.consume("worker", subjects.COMMANDS_STREAM, subjects.command_filter("c1"), handler)):
        await eventually(lambda: seen == ["one"])
        assert await consumer_state(bus, "worker") == (0, 1, 0)  # delivered, not acked
        release.set()
        state = await eventually(_acked(bus, "worker", 1))
    assert state == (1, 0, 0)
    # work-queue retention: the acked command is gone from the stream
    assert (await bus.js.stream_info(subjects.COMMANDS_STREAM)).state.messages == 0


def _acked(bus: Bus, durable: str, floor: int) -> Callable[[], Awaitable[tuple[int, int, int] | None]]:
    async def probe() -> tuple[int, int, int] | None:
        st = await consumer_state(bus, durable)
        return st if st[0] >= floor and st[1] == 0 else None

    return probe


async def test_temporary_error_redelivers_after_its_delay(bus: Bus) -> None:
    attempts: list[tuple[int, float]] = []

    async def handler(d: Delivery) -> None:
        attempts.append((d.deliveries, time.monotonic()))
        if d.deliveries < 3:
            raise TemporaryError("not yet", delay_s=0.5)

    await bus.publish(CMD, b"x", msg_id="t1")
    async with running(bus.consume("worker", subjects.COMMANDS_STREAM, CMD, handler, ack_wait=30)):
        await eventually(_acked(bus, "worker", 1), timeout=10)
    assert [n for n, _ in attempts] == [1, 2, 3]
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(attempts)]
    assert all(0.45 <= g < 5 for g in gaps), gaps  # the delay, far below the 30 s ack wait
    assert await dead_letters(bus) == []


@pytest.mark.parametrize(
    "error,error_type,text",
    [
        pytest.param(PermanentError("unknown command kind Foo"), "PermanentError", "unknown command kind Foo", id="permanent"),
        pytest.param(KeyError("boom"), "KeyError", "'boom'", id="bug"),
    ],
)
async def test_failures_are_dead_lettered_and_terminated(bus: Bus, error: Exception, error_type: str, text: str) -> None:
    calls: list[int] = []

    async def handler(d: Delivery) -> None:
        calls.append(d.deliveries)
        raise error

    await bus.publish(CMD, b"payload", msg_id="p1", headers={"X-Why": "test"})
    async with running(bus.consume("worker", subjects.COMMANDS_STREAM, CMD, handler)):
        letters = await eventually(lambda: dead_letters(bus))
        await eventually(_acked(bus, "worker", 1))
    assert calls == [1]  # never redelivered
    (letter,) = letters
    assert (letter.subject, letter.stream, letter.stream_seq, letter.consumer) == (CMD, subjects.COMMANDS_STREAM, 1, "worker")
    assert (letter.error_type, letter.error, letter.data) == (error_type, text, b"payload")
    assert letter.headers["X-Why"] == "test" and letter.headers["Nats-Msg-Id"] == "p1"
    assert letter.service == "test" and letter.deliveries == 1


async def test_max_deliver_turns_endless_retries_into_a_dead_letter(bus: Bus) -> None:
    async def handler(d: Delivery) -> None:
        raise TemporaryError("still down", delay_s=0.05)

    await bus.publish(CMD, b"x", msg_id="m1")
    async with running(bus.consume("worker", subjects.COMMANDS_STREAM, CMD, handler, max_deliver=3)):
        (letter,) = await eventually(lambda: dead_letters(bus), timeout=10)
    assert letter.deliveries == 3
    assert letter.error == "gave up after 3 deliveries: still down"


async def test_messages_flow_without_waiting_for_a_full_batch(bus: Bus) -> None:
    got: list[float] = []

    async def handler(d: Delivery) -> None:
        got.append(time.monotonic())

    async with running(bus.consume("worker", subjects.COMMANDS_STREAM, CMD, handler, batch=256)):
        await asyncio.sleep(0)  # let it subscribe; the message below still finds it either way
        t0 = time.monotonic()
        await bus.publish(CMD, b"x", msg_id="lat")
        await eventually(lambda: got, timeout=5)
    assert got[0] - t0 < 1.0  # not the 30 s pull expiry


async def test_batch_handler_outcomes_apply_per_message(bus: Bus) -> None:
    batches: list[list[bytes]] = []

    async def handler_batch(ds: list[Delivery]) -> list[BaseException | None]:
        batches.append([d.data for d in ds])
        out: list[BaseException | None] = []
        for d in ds:
            if d.data == b"bad":
                out.append(PermanentError("bad one"))
            elif d.data == b"later" and d.deliveries == 1:
                out.append(TemporaryError("later", 0.1))
            else:
                out.append(None)
        return out

    await bus.publish_many([OutMsg(CMD, body, f"b{i}") for i, body in enumerate([b"ok1", b"bad", b"later", b"ok2"])])
    async with running(bus.consume_batches("batcher", subjects.COMMANDS_STREAM, CMD, handler_batch, batch=64)):
        await eventually(_acked(bus, "batcher", 4), timeout=10)
    firsts = [body for batch in batches for body in batch]
    assert firsts.count(b"later") == 2 and sorted(set(firsts)) == [b"bad", b"later", b"ok1", b"ok2"]
    assert len(firsts) == 5  # only the temporary failure came back
    assert [(dl.error_type, dl.data) for dl in await dead_letters(bus)] == [("PermanentError", b"bad")]


async def test_batch_handler_that_raises_fails_the_whole_batch(bus: Bus) -> None:
    async def handler_batch(ds: list[Delivery]) -> list[BaseException | None]:
        raise PermanentError("whole batch rejected")

    await bus.publish_many([OutMsg(CMD, b"a", "a"), OutMsg(CMD, b"b", "b")])
    async with running(bus.consume_batches("batcher", subjects.COMMANDS_STREAM, CMD, handler_batch)):
        letters = await eventually(_n_dead_letters(bus, 2))
    assert sorted(dl.data for dl in letters or []) == [b"a", b"b"]


def _n_dead_letters(bus: Bus, n: int) -> Callable[[], Awaitable[list[DeadLetter] | None]]:
    async def probe() -> list[DeadLetter] | None:
        letters = await dead_letters(bus)
        return letters if len(letters) >= n else None

    return probe


async def test_stopping_a_consumer_releases_buffered_messages_at_once(bus: Bus) -> None:
    """Messages pulled but not settled (the one being handled too) are nak'ed on stop, so the
    next instance needn't wait out the 30 s ack wait."""
    first = asyncio.Event()

    async def slow(d: Delivery) -> None:
        first.set()
        await asyncio.Event().wait()  # never finishes

    await bus.publish_many([OutMsg(CMD, b"x", f"s{i}") for i in range(5)])
    async with running(bus.consume("worker", subjects.COMMANDS_STREAM, CMD, slow, ack_wait=30)):
        await asyncio.wait_for(first.wait(), 5)
    handled: list[bytes] = []

    async def fast(d: Delivery) -> None:
        handled.append(d.data)

    # Any bound well under the 30 s ack wait shows the release; 15 s leaves room for a loaded machine.
    async with running(bus.consume("worker", subjects.COMMANDS_STREAM, CMD, fast, ack_wait=30)):
        await eventually(lambda: sorted(handled) == [b"x"] * 5, timeout=15)
        await eventually(_acked(bus, "worker", 5), timeout=15)


async def test_concurrency_handles_several_messages_at_once(bus: Bus) -> None:
    active, peak = 0, 0
    all_in = asyncio.Event()

    async def handler(d: Delivery) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        if active == 3:
            all_in.set()
        await asyncio.wait_for(all_in.wait(), 5)  # only returns once three run together
        active -= 1

    await bus.publish_many([OutMsg(CMD, b"x", f"c{i}") for i in range(3)])
    async with running(bus.consume("worker", subjects.COMMANDS_STREAM, CMD, handler, concurrency=3)):
        await eventually(_acked(bus, "worker", 3))
    assert peak == 3


@pytest.mark.parametrize(("max_ack_pending", "bound"), [
    pytest.param(4096, 4 * 32, id="pull-requests-bound-it"),  # pipeline 2 x batch 32 in hand, up to 2 batches asked
    pytest.param(40, 40, id="ack-pending-limit-bounds-it"),
])
async def test_a_stalled_consumer_holds_a_bounded_number_of_messages(bus: Bus, max_ack_pending: int,
                                                                     bound: int) -> None:
    """Backpressure (issue 12): 2,000 commands outrun a consumer whose handler stalls. What the
    process holds (delivered, not acked) stays within its pull requests and max_ack_pending; the
    backlog waits in the stream. Released, every message is handled."""
    release, started = asyncio.Event(), asyncio.Event()
    handled = 0

    async def stalled(ds: list[Delivery]) -> list[BaseException | None]:
        nonlocal handled
        started.set()
        await release.wait()
        handled += len(ds)
        return [None] * len(ds)

    await bus.publish_many([OutMsg(CMD, b"x", f"b{i}") for i in range(2000)])
    async with running(bus.consume_batches("worker", subjects.COMMANDS_STREAM, CMD, stalled, batch=32, pipeline=2,
                                           max_ack_pending=max_ack_pending)):
        await asyncio.wait_for(started.wait(), 10)
        most = 0
        for _ in range(20):  # the server has had every chance to push more by the end
            _, in_hand, backlog = await consumer_state(bus, "worker")
            most = max(most, in_hand)
            await asyncio.sleep(0.05)
        assert 0 < most <= bound and backlog >= 2000 - bound
        release.set()
        await eventually(_acked(bus, "worker", 2000), timeout=20)
    assert handled == 2000
