"""kq.runtime.nats_client.parse_header_block reads a header block exactly as nats-py's client does."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.client import Client

from kq.runtime.nats_client import LingeringClient, parse_header_block

BLOCKS = {
    "mirror record": b"NATS/1.0\r\nKq-Op: put\r\nKq-Rv: 123\r\nKq-Uid: u-1\r\nNats-Msg-Id: m:1\r\n\r\n",
    "no space after the colon": b"NATS/1.0\r\nA:1\r\nB:\tv \r\n\r\n",
    "padded name, empty value": b"NATS/1.0\r\n  Padded  : x\r\nEmpty:\r\n\r\n",
    "a name with a space is skipped": b"NATS/1.0\r\nbad name: x\r\nok: y\r\n\r\n",
    "a name with unit separator is skipped": b"NATS/1.0\r\nbad\x1fname: x\r\nok: y\r\n\r\n",
    "a non-ASCII name is skipped": b"NATS/1.0\r\nn\xc3\xa4me: x\r\nok: y\r\n\r\n",
    "a non-UTF-8 value is replaced": b"NATS/1.0\r\nv: \xff\xfe\r\n\r\n",
    "the last of a repeated name": b"NATS/1.0\r\nk: 1\r\nk: 2\r\n\r\n",
    "a line without a colon": b"NATS/1.0\r\njunk\r\nk: v\r\n\r\n",
    "an empty name": b"NATS/1.0\r\n: v\r\n\r\n",
    "nothing": b"NATS/1.0\r\n\r\n",
    "just the line": b"NATS/1.0\r\n",
}


def _nats_py(block: bytes) -> dict[str, str] | None:
    return asyncio.run(Client()._process_headers(block))


@pytest.mark.parametrize("block", BLOCKS.values(), ids=BLOCKS.keys())
def test_a_header_block_reads_as_nats_py_reads_it(block: bytes) -> None:
    assert parse_header_block(block) == _nats_py(block)
    assert parse_header_block(block) == _nats_py(block)  # the second time from the names read once


@pytest.mark.parametrize("block", [b"NATS/1.0 503\r\n\r\n", b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Stream: 5\r\n\r\n",
                                   b""], ids=["status", "heartbeat with headers", "empty"])
def test_a_status_line_is_left_to_nats_py(block: bytes) -> None:
    assert asyncio.run(LingeringClient()._process_headers(block)) == _nats_py(block)
