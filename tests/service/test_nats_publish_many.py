"""LingeringClient.publish_many on a real nats-server: the same messages as nats-py's publish, the same refusals."""

from __future__ import annotations

import asyncio

import pytest
from nats import errors

from kq.runtime import Bus
from kq.runtime.nats_client import LingeringClient

pytestmark = pytest.mark.timeout(30)

HEADERS = [
    {"Nats-Msg-Id": "a-1", "kq-schema": "1"},
    {" Padded ": "  spaced value  ", "Cr-Lf": "one\r\ntwo"},  # trimmed; CR/LF become spaces
    {"": "an empty key is skipped", "k": ""},
    {},
]


async def _received(bus: Bus, subject: str, n: int, send) -> list[tuple[str, bytes, dict[str, str] | None]]:
    got: list[tuple[str, bytes, dict[str, str] | None]] = []
    done = asyncio.get_running_loop().create_future()

    async def on_msg(m) -> None:
        got.append((m.reply, m.data, m.headers))
        if len(got) == n and not done.done():
            done.set_result(None)

    sub = await bus.nc.subscribe(subject, cb=on_msg)
    try:
        await send()
        await asyncio.wait_for(done, timeout=10)
    finally:
        await sub.unsubscribe()
    return got


async def test_publish_many_sends_what_publish_sends(bus: Bus) -> None:
    nc = bus.nc
    assert isinstance(nc, LingeringClient)
    payloads = [b"x", b"", b"{\"big\": \"" + b"y" * 70_000 + b"\"}", b"last"]

    async def one_by_one() -> None:
        for i, (p, h) in enumerate(zip(payloads, HEADERS, strict=True)):
            await nc.publish("kq.test.one", p, reply=f"r.{i}", headers=h)

    async def together() -> None:
        await nc.publish_many([("kq.test.many", p, f"r.{i}", h)
                               for i, (p, h) in enumerate(zip(payloads, HEADERS, strict=True))])

    one = await _received(bus, "kq.test.one", len(payloads), one_by_one)
    many = await _received(bus, "kq.test.many", len(payloads), together)
    assert many == one
    assert many[1][2] == {"Padded": "spaced value", "Cr-Lf": "one  two"}


@pytest.mark.parametrize(("msg", "error"), [
    (("kq.test bad", b"x", "r.0", {}), errors.BadSubjectError),
    (("", b"x", "r.0", {}), errors.BadSubjectError),
    (("kq.test.x", b"x", "r.\r\n0", {}), errors.BadSubjectError),
    (("kq.test.x", b"x", "r.0", {"bad key": "v"}), errors.BadHeaderError),
    (("kq.test.x", b"x", "r.0", {"Bad\r\nKey": "v"}), errors.BadHeaderError),
])
async def test_publish_many_refuses_what_publish_refuses(bus: Bus, msg, error) -> None:
    nc = bus.nc
    assert isinstance(nc, LingeringClient)
    subject, payload, reply, headers = msg
    with pytest.raises(error):
        await nc.publish(subject, payload, reply=reply, headers=headers)
    with pytest.raises(error):
        await nc.publish_many([("kq.test.fine", b"ok", "r.1", {}), msg])


async def test_subscribe_direct_hands_each_message_over_as_it_is_read(bus: Bus) -> None:
    nc = bus.nc
    assert isinstance(nc, LingeringClient)
    got: list[tuple[str, bytes]] = []
    done = asyncio.get_running_loop().create_future()

    def handler(subject: str, data: bytes) -> None:
        got.append((subject, data))
        if len(got) == 3 and not done.done():
            done.set_result(None)

    await nc.subscribe_direct("kq.test.direct.*", handler)
    await nc.publish_many([(f"kq.test.direct.{i}", f"m{i}".encode(), "r.x", {"k": "v"}) for i in range(3)])
    await asyncio.wait_for(done, timeout=10)
    assert got == [(f"kq.test.direct.{i}", f"m{i}".encode()) for i in range(3)]
