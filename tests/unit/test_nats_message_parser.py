"""kq.runtime.nats_client's message parser reads the wire exactly as nats-py's Parser does: the
same messages and protocol lines, in order, however the reads split it; a message for a direct
subscription reaches its handler with no coroutine in between."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from nats.protocol.parser import Parser

from kq.runtime.nats_client import LingeringClient, _MessageParser

HB = b"NATS/1.0\r\nKq-Op: put\r\nKq-Rv: 7\r\n\r\n"
WIRE = b"".join([
    b"INFO {\"server_id\":\"s\",\"max_payload\":1048576}\r\n",
    b"HMSG kq.v1.obj.c.workload.ns.a 7 $JS.ACK.KQ_OBJECTS.x.1.5.5.17.9 %d %d\r\n%sbody-a\r\n" % (len(HB), len(HB) + 6, HB),
    b"MSG _INBOX.x.1.0 3 {\"stream\":\"KQ_CMD\",\"seq\":1}\r\n".replace(b"3 {", b"3 27\r\n{"),
    b"PING\r\n",
    b"HMSG kq.v1.out.admission.c 9 %d %d\r\n%s{}\r\n" % (len(HB), len(HB) + 2, HB),  # no reply
    b"MSG a.b 4 reply.to 0\r\n\r\n",  # empty payload
    b"+OK\r\n",
    b"HMSG s 5 r 16 16\r\nNATS/1.0 503\r\n\r\n\r\n",  # an inline status, no body
    b"MSG x\t 6   3\r\nabc\r\n",  # odd spacing
    b"PONG\r\n",
])


class Recorder:
    """What a client hears from its parser."""

    def __init__(self) -> None:
        self.heard: list[Any] = []

    def _deliver_direct(self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> bool:
        return False

    async def _process_msg(self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        self.heard.append(("msg", sid, subject, reply, data, headers))

    async def _process_ping(self) -> None:
        self.heard.append("ping")

    async def _process_pong(self) -> None:
        self.heard.append("pong")

    async def _process_info(self, info: dict[str, Any]) -> None:
        self.heard.append(("info", info))

    async def _process_err(self, err: str) -> None:
        self.heard.append(("err", err))


def _heard(parser_cls: type[Parser], chunks: list[bytes]) -> list[Any]:
    nc = Recorder()
    parser = parser_cls(nc)

    async def feed() -> None:
        for c in chunks:
            await parser.parse(c)

    asyncio.run(feed())
    assert not parser.buf
    return nc.heard


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 16, 64, len(WIRE)])
def test_the_wire_reads_as_nats_py_reads_it_however_it_is_split(size: int) -> None:
    chunks = [WIRE[i:i + size] for i in range(0, len(WIRE), size)]
    want = _heard(Parser, chunks)
    assert len([h for h in want if isinstance(h, tuple) and h[0] == "msg"]) == 6
    assert _heard(_MessageParser, chunks) == want


def test_a_direct_subscriptions_message_reaches_its_handler_in_the_parse_call() -> None:
    nc = LingeringClient()
    got: list[tuple[str, bytes]] = []
    nc._direct = {3: lambda subject, data: got.append((subject, data))}
    asyncio.run(nc._ps.parse(b"MSG _INBOX.x.1.0 3 2\r\nok\r\nMSG _INBOX.x.1.1 3 3\r\nyes\r\n"))
    assert got == [("_INBOX.x.1.0", b"ok"), ("_INBOX.x.1.1", b"yes")] and nc.stats["in_msgs"] == 2
