"""Publishing through the runtime on a real nats-server: PubAcks, dedupe, streams, schedules."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest
from nats.js import api
from nats.js.errors import APIError, NoStreamResponseError
from support.wait import eventually

from kq import subjects
from kq.clock import FakeClock
from kq.runtime import Bus, OutMsg
from kq.runtime.bus import schedule_time
from kq.runtime.streams import LEASE_STREAM, MK_ALL, stream_configs

pytestmark = pytest.mark.timeout(30)


class Note(msgspec.Struct, frozen=True):
    text: str


async def _stream_msgs(bus: Bus, stream: str, subject: str) -> list[tuple[int, bytes]]:
    """Every message stored on `subject`, oldest first."""
    out: list[tuple[int, bytes]] = []
    seq = 0
    while True:
        try:
            m = await bus.js.get_msg(stream, seq=seq + 1, subject=subject, next=True)
        except Exception:
            return out
        out.append((m.seq or 0, m.data or b""))
        seq = m.seq or 0


async def test_ensure_streams_is_idempotent_and_complete(bus: Bus) -> None:
    await bus.ensure_streams()  # second time: no error, no change
    infos = {si.config.name: si.config for si in await bus.js.streams_info()}
    assert set(infos) == {subjects.OBJECTS_STREAM, subjects.COMMANDS_STREAM, subjects.EVENTS_STREAM,
                          subjects.MK_STREAM, subjects.TIMERS_STREAM, LEASE_STREAM}
    timers = infos[subjects.TIMERS_STREAM]
    assert timers.allow_msg_schedules and timers.max_msgs_per_subject == 1
    objects = infos[subjects.OBJECTS_STREAM]
    assert objects.max_msgs_per_subject == 1
    assert set(objects.subjects or []) == {subjects.OBJECTS_ALL, subjects.SYNC_ALL}
    assert infos[subjects.COMMANDS_STREAM].retention == api.RetentionPolicy.WORK_QUEUE
    events = infos[subjects.EVENTS_STREAM]
    assert set(events.subjects or []) == {subjects.EVENTS_ALL, subjects.OUTCOMES_ALL, subjects.DEAD_LETTERS_ALL}
    assert events.max_age == pytest.approx(7 * 24 * 3600)
    assert events.allow_msg_schedules is True
    assert infos[subjects.MK_STREAM].subjects == [MK_ALL]
    assert all(c.duplicate_window == pytest.approx(bus.config.duplicate_window_s)
               for n, c in infos.items() if n != LEASE_STREAM)


async def test_publish_waits_for_the_ack_and_dedupes_by_msg_id(bus: Bus) -> None:
    subject = subjects.event_subject("m", "workload", "ns", "wl.1")
    first = await bus.publish(subject, Note("hello"), msg_id="decision-1")
    again = await bus.publish(subject, Note("hello again"), msg_id="decision-1")
    other = await bus.publish(subject, b"raw", msg_id="decision-2")
    assert first.stream == subjects.EVENTS_STREAM and not first.duplicate
    assert again.duplicate and again.seq == first.seq
    assert other.seq == first.seq + 1
    stored = await _stream_msgs(bus, subjects.EVENTS_STREAM, subject)
    assert [data for _, data in stored] == [b'{"text":"hello"}', b"raw"]


async def test_publish_without_msg_id_stores_every_copy(bus: Bus) -> None:
    subject = subjects.event_subject("m", "workload", "ns", "x")
    await bus.publish(subject, b"a", msg_id=None)
    await bus.publish(subject, b"a", msg_id=None)
    assert len(await _stream_msgs(bus, subjects.EVENTS_STREAM, subject)) == 2


async def test_publish_many_keeps_order_and_dedupes(bus: Bus) -> None:
    msgs = [OutMsg(subjects.event_subject("m", "workload", "ns", f"w{i}"), Note(str(i)), f"id-{i}") for i in range(500)]
    acks = await bus.publish_many(msgs)
    assert [a.seq for a in acks] == list(range(1, 501))
    again = await bus.publish_many([*msgs[:10], OutMsg(subjects.event_subject("m", "workload", "ns", "new"), b"n", "id-new")])
    assert [a.duplicate for a in again] == [True] * 10 + [None]
    assert again[-1].seq == 501


async def test_publish_many_reports_a_subject_no_stream_takes(bus: Bus) -> None:
    with pytest.raises(Exception) as err:
        await bus.publish_many([OutMsg("nowhere.at.all", b"x", "id")])
    assert "NoStreamResponse" in type(err.value).__name__ or "no response" in str(err.value).lower()


async def test_schedule_fires_at_its_time(bus: Bus) -> None:
    target = subjects.event_subject("m", "timer", "ns", "fired")
    at = datetime.now(UTC) + timedelta(seconds=1)
    await bus.schedule(subjects.event_subject("m", "timer", "ns", "sched"), target, at, b"tick", msg_id="sched-1")
    assert await _stream_msgs(bus, subjects.EVENTS_STREAM, target) == []
    fired = await eventually(lambda: _stream_msgs(bus, subjects.EVENTS_STREAM, target), timeout=5)
    assert [d for _, d in fired] == [b"tick"]
    assert datetime.now(UTC) >= at


def test_schedule_time_is_rfc3339_utc_millis() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2)))
    assert schedule_time(at) == "2026-01-02T01:04:05.678Z"
    with pytest.raises(ValueError):
        schedule_time(datetime(2026, 1, 1))


async def test_connect_gives_up_after_its_timeout() -> None:
    import socket
    import time

    from kq.config import NatsConfig

    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(ConnectionError, match=f"127.0.0.1:{port}"):
        await Bus.connect(NatsConfig(url=f"nats://127.0.0.1:{port}"), "nobody", connect_timeout_s=1.0)
    assert time.monotonic() - t0 < 5


async def test_publish_batch_stores_every_message_once(bus: Bus) -> None:
    subject = subjects.event_subject("c1", "workload", "ns", "batch")
    msgs = [OutMsg(subject, f"m{i}".encode(), f"batch-{i}") for i in range(300)]
    await bus.publish_batch(msgs)
    await bus.publish_batch(msgs[:10])  # a retry of the same decisions: dropped as duplicates
    stored = await _stream_msgs(bus, subjects.EVENTS_STREAM, subject)
    assert [data for _, data in stored] == [f"m{i}".encode() for i in range(300)]


async def test_concurrent_batches_share_the_ack_subscription(bus: Bus) -> None:
    subject = subjects.event_subject("c1", "workload", "ns", "both")
    a = [OutMsg(subject, f"a{i}".encode(), f"both-a{i}") for i in range(50)]
    b = [OutMsg(subject, f"b{i}".encode(), f"both-b{i}") for i in range(50)]
    await asyncio.wait_for(asyncio.gather(bus.publish_batch(a), bus.publish_batch(b)), timeout=10)
    stored = sorted(data for _, data in await _stream_msgs(bus, subjects.EVENTS_STREAM, subject))
    assert stored == sorted(m.payload for m in a + b)  # type: ignore[type-var]  # all bytes here
    assert not bus._batches  # each batch's entry left with it


async def test_publish_batch_retries_what_the_stream_refused(bus: Bus) -> None:
    # Not in any stream: no ack comes (no responders), so each is published again the careful way,
    # which then fails loudly instead of being dropped.
    bus.publish_retry_s = 0.5
    with pytest.raises(NoStreamResponseError):
        await bus.publish_batch([OutMsg("kq.v1.nowhere.x", b"x", "nowhere-1")], timeout_s=0.5)


async def test_publish_outlasts_a_stream_without_a_leader_and_then_gives_up(bus: Bus) -> None:
    # No stream answers for a while, as while an R3 stream elects a new leader after its node died:
    # the publish keeps retrying within its budget and lands once a stream answers; past the budget
    # it fails loudly. Time is fake, so the retries' sleeps are what the test steps through.
    clock = FakeClock()
    slow = Bus(bus.nc, bus.config, "test-slow", clock=clock, publish_retry_s=5.0)
    subject = "kq.v1.later.x"
    task = asyncio.create_task(slow.publish(subject, b"x", msg_id="later-1"))
    await eventually(lambda: clock.sleepers == 1, timeout=5.0, what="the first retry's back-off")
    await clock.advance(3.0)
    assert not task.done()  # still inside its budget
    await bus.js.add_stream(api.StreamConfig(name="LATER", subjects=["kq.v1.later.>"]))
    await clock.advance(2.0)
    ack = await asyncio.wait_for(task, timeout=5.0)
    assert ack.stream == "LATER" and ack.seq == 1

    lost = asyncio.create_task(slow.publish("kq.v1.nowhere.y", b"y", msg_id="nowhere-2"))
    await eventually(lambda: clock.sleepers == 1, timeout=5.0, what="the first retry's back-off")
    for _ in range(10):
        await clock.advance(1.0)
    with pytest.raises(NoStreamResponseError):
        await asyncio.wait_for(lost, timeout=5.0)


async def test_a_full_command_stream_refuses_new_commands_and_keeps_the_old(bus: Bus) -> None:
    """Backpressure (issue 12): KQ_CMD's own configuration, shrunk to 4 KiB. A publisher that outruns
    the watcher gets a refusal to back off on; the commands already queued are never dropped for it
    (the default, discard old, dropped the oldest unapplied commands without a word)."""
    ours = next(c for c in stream_configs(bus.config) if c.name == subjects.COMMANDS_STREAM)
    small = api.StreamConfig.from_response({**ours.as_dict(), "name": "KQ_CMD_SMALL", "subjects": ["small.cmd.>"],
                                            "max_bytes": 4096})
    await bus.js.add_stream(small)
    body = b"x" * 500
    stored, refused = 0, 0
    for i in range(20):  # 10 KB into 4 KiB: the producer outruns a consumer that takes nothing
        try:
            await bus.js.publish(f"small.cmd.{i}", body)
            stored += 1
        except APIError:
            refused += 1
    info = await bus.js.stream_info("KQ_CMD_SMALL")
    assert refused > 0 and info.state.messages == stored
    assert info.state.first_seq == 1 and (info.state.bytes or 0) <= 4096  # the first command is still there
