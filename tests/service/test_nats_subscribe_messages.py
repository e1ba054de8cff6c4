"""LingeringClient.subscribe_messages on a real nats-server: each message reaches its handler in the
call that reads it (no task turn in between), headers parsed; a drained subscription's handler is
forgotten; a pull stream takes its messages that way."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.msg import Msg
from support.wait import eventually

from kq import subjects
from kq.runtime import Bus, Delivery
from kq.runtime.consume import durable_config
from kq.runtime.nats_client import LingeringClient
from kq.runtime.pull import PullStream, create_consumer

pytestmark = pytest.mark.timeout(30)


async def test_a_message_reaches_its_handler_as_it_is_read(bus: Bus) -> None:
    nc = bus.nc
    assert isinstance(nc, LingeringClient)
    got: list[Msg] = []
    sub = await nc.subscribe_messages("kq.test.direct", got.append)
    # What the parser does with a message read off the socket: the handler has it on return.
    await nc._process_msg(sub._id, b"kq.test.direct", b"r.1", b"body", b"NATS/1.0\r\nK: v\r\n\r\n")
    assert [(m.subject, m.reply, m.data, m.headers) for m in got] == [("kq.test.direct", "r.1", b"body", {"K": "v"})]
    # And through the server, in order.
    for i in range(3):
        await nc.publish("kq.test.direct", str(i).encode(), headers={"N": str(i)})
    await nc.flush()
    await eventually(lambda: len(got) >= 4, timeout=10, what="the three messages through the server")
    assert [(m.data, m.headers) for m in got[1:]] == [(b"0", {"N": "0"}), (b"1", {"N": "1"}), (b"2", {"N": "2"})]
    await sub.drain()
    assert not (nc._direct_msgs or {}).get(sub._id)  # forgotten with the subscription
    await nc.publish("kq.test.direct", b"late")
    await nc.flush()
    assert len(got) == 4


async def test_a_pull_stream_takes_messages_without_a_subscription_task(bus: Bus) -> None:
    stream = subjects.COMMANDS_STREAM
    subject = subjects.command_subject("direct", "workload")
    await create_consumer(bus.js, stream, durable_config("direct-test", [subject], max_ack_pending=16,
                                                         ack_wait=30.0, deliver="all"))
    for i in range(3):
        await bus.js.publish(subject, str(i).encode(), headers={"N": str(i)})
    pull = PullStream(bus.nc, stream, "direct-test", batch=8)
    await pull.start()
    try:
        assert pull._sub is not None and pull._sub._wait_for_msgs_task is None
        taken: list[Delivery] = []
        async with asyncio.timeout(10):
            while len(taken) < 3:
                taken += await pull.get(8)
        assert [(d.data, d.headers.get("N"), d.stream_seq > 0) for d in taken] == [
            (b"0", "0", True), (b"1", "1", True), (b"2", "2", True)]
    finally:
        await pull.stop(nak_buffered=True)
