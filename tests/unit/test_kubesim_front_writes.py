"""kubesim's connection front (kubesim/fast_http.py) on a recording transport: pipelined requests read
together are answered in order with one write, and a request handed to aiohttp after them gets
the connection only once their answers are written."""

from __future__ import annotations

import json
import random
import re
import uuid
from typing import Any

import pytest

from kubesim.api_http import ApiServer
from kubesim.cluster import Cluster
from kubesim.fast_http import FastPath, FrontProtocol
from kubesim.store import Store

_NS = "/clusters/c1/api/v1/namespaces/default/configmaps"


def _post(name: str) -> bytes:
    body = json.dumps({"metadata": {"name": name}, "data": {"k": "v"}}).encode()
    return (f"POST {_NS} HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\nUser-Agent: t\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _get(name: str) -> bytes:
    return f"GET {_NS}/{name} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


class _Transport:
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def write(self, data: bytes) -> None:
        self.log.append(("write", data))


class _Handler:
    """Stands in for aiohttp's RequestHandler: records what it is given."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def connection_made(self, transport: Any) -> None:
        self.log.append(("handed off", None))

    def data_received(self, data: bytes) -> None:
        self.log.append(("aiohttp reads", data))


def _statuses(data: bytes) -> list[int]:
    return [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", data)]


@pytest.fixture
async def front() -> tuple[FrontProtocol, list[Any]]:
    cluster = Cluster("c1", rng=random.Random(1))
    clusters = {"c1": cluster}
    log: list[Any] = []
    proto = FrontProtocol(FastPath(ApiServer(clusters, bookmark_interval_s=1.0), clusters),
                          lambda: _Handler(log), set())
    proto.connection_made(_Transport(log))  # type: ignore[arg-type]
    return proto, log


async def test_pipelined_answers_go_out_in_one_write(front: tuple[FrontProtocol, list[Any]]) -> None:
    proto, log = front
    proto.data_received(_post("a") + _post("b") + _get("a") + _post("a"))
    assert [kind for kind, _ in log] == ["write"]
    assert _statuses(log[0][1]) == [201, 201, 200, 409]


async def test_a_split_request_waits_for_its_rest(front: tuple[FrontProtocol, list[Any]]) -> None:
    proto, log = front
    data = _post("a") + _get("a")
    proto.data_received(data[:-10])
    proto.data_received(data[-10:])
    assert [_statuses(d) for _, d in log] == [[201], [200]]


async def test_hand_off_comes_after_the_answers_before_it(front: tuple[FrontProtocol, list[Any]]) -> None:
    proto, log = front
    http10 = f"GET {_NS}/a HTTP/1.0\r\nHost: x\r\n\r\n".encode()
    proto.data_received(_post("a") + _get("a") + http10)
    assert [kind for kind, _ in log] == ["write", "handed off", "aiohttp reads"]
    assert _statuses(log[0][1]) == [201, 200]
    assert log[2][1] == http10


def test_generated_uids_are_the_uuid4_of_the_seeded_stream() -> None:
    store = Store.__new__(Store)
    for seed in range(50):
        store._rng = random.Random(seed)
        assert store.new_uid() == str(uuid.UUID(int=random.Random(seed).getrandbits(128), version=4))
