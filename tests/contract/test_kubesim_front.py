"""The connection front (kubesim/fast_http.py) over a raw socket: pipelined plain requests are
answered in order, and requests it does not answer itself (chunked bodies, HTTP/1.0, a watch,
the control API) hand the connection to aiohttp with nothing lost or reordered."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit

import pytest
from support.wait import eventually

from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(30)

_NS = "/clusters/manager/api/v1/namespaces/default/configmaps"


def _post(name: str) -> bytes:
    body = json.dumps({"metadata": {"name": name}, "data": {"k": "v"}}).encode()
    return (f"POST {_NS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _get(path: str, version: str = "1.1") -> bytes:
    return f"GET {path} HTTP/{version}\r\nHost: x\r\n\r\n".encode()


async def _connect(sim: KubeSim) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    u = urlsplit(sim.url)
    assert u.hostname is not None and u.port is not None
    return await asyncio.open_connection(u.hostname, u.port)


async def _response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One Content-Length or chunked response."""
    status = int((await reader.readline()).split()[1])
    headers: dict[str, str] = {}
    while (line := await reader.readline()) != b"\r\n":
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while (size := int((await reader.readline()).strip(), 16)) > 0:
            body += await reader.readexactly(size)
            await reader.readline()
        await reader.readline()
        return status, headers, body
    return status, headers, await reader.readexactly(int(headers.get("content-length", "0")))


async def test_pipelined_requests_are_answered_in_order(sim: KubeSim) -> None:
    reader, writer = await _connect(sim)
    try:
        writer.write(_post("a") + _post("b") + _get(f"{_NS}/a") + _post("a") + _get(f"{_NS}/missing"))
        answers = [await _response(reader) for _ in range(5)]
        assert [a[0] for a in answers] == [201, 201, 200, 409, 404]
        assert json.loads(answers[1][2])["metadata"]["name"] == "b"
        assert json.loads(answers[2][2])["metadata"]["name"] == "a"
        assert json.loads(answers[3][2])["reason"] == "AlreadyExists"
    finally:
        writer.close()


async def test_chunked_body_and_http10_go_to_aiohttp(sim: KubeSim) -> None:
    body = json.dumps({"metadata": {"name": "chunked"}}).encode()
    chunked = (f"POST {_NS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Transfer-Encoding: chunked\r\n\r\n{len(body):x}\r\n").encode() + body + b"\r\n0\r\n\r\n"
    reader, writer = await _connect(sim)
    try:
        # A plain request first (answered by the front), then one it hands off, on one connection.
        writer.write(_get(f"{_NS}") + chunked + _get(f"{_NS}/chunked"))
        statuses = [(await _response(reader))[0] for _ in range(3)]
        assert statuses == [200, 201, 200]
    finally:
        writer.close()
    reader, writer = await _connect(sim)
    try:
        writer.write(_get(f"{_NS}/chunked", "1.0"))
        status, _, data = await _response(reader)
        assert status == 200 and json.loads(data)["metadata"]["name"] == "chunked"
    finally:
        writer.close()


async def test_watch_and_control_after_plain_requests(sim: KubeSim) -> None:
    reader, writer = await _connect(sim)
    try:
        writer.write(_post("w1") + _get("/kubesim/state"))
        assert (await _response(reader))[0] == 201
        status, _, data = await _response(reader)
        assert status == 200 and "manager" in json.loads(data)["clusters"]
        writer.write(_get(f"{_NS}?watch=1&resourceVersion=0&timeoutSeconds=1"))
        status, headers, data = await _response(reader)
        assert status == 200 and headers.get("transfer-encoding") == "chunked"
        events = [json.loads(line) for line in data.splitlines() if line]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "w1")]
    finally:
        writer.close()


async def test_a_watch_streams_on_the_front_and_the_connection_serves_on(sim: KubeSim) -> None:
    reader, writer = await _connect(sim)
    try:
        writer.write(_post("before") + _get(f"{_NS}?watch=1&resourceVersion=0&timeoutSeconds=1"))
        assert (await _response(reader))[0] == 201
        # Sent while the watch runs: answered on the same connection once the watch has ended.
        writer.write(_get(f"{_NS}/before"))
        status, headers, data = await _response(reader)
        assert status == 200 and headers.get("transfer-encoding") == "chunked"
        events = [json.loads(line) for line in data.splitlines() if line]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "before")]
        status, _, data = await _response(reader)
        assert status == 200 and json.loads(data)["metadata"]["name"] == "before"
    finally:
        writer.close()


async def test_a_live_watch_on_the_front_gets_events_and_ends_when_its_client_goes(sim: KubeSim) -> None:
    cluster = sim.cluster("manager")
    reader, writer = await _connect(sim)
    try:
        writer.write(_get(f"{_NS}?watch=1&resourceVersion=0"))
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 OK\r\n")
        await eventually(lambda: cluster.state()["openWatches"] == 1, what="the watch is open")
        r2, w2 = await _connect(sim)
        w2.write(_post("live"))
        assert (await _response(r2))[0] == 201
        w2.close()
        size = int((await reader.readline()).strip(), 16)
        event = json.loads(await reader.readexactly(size))
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "live")
    finally:
        writer.close()
    # Without bookmarks an idle watch looks for its client only every 5 s; a lost connection ends it at once.
    await eventually(lambda: cluster.state()["openWatches"] == 0, timeout=4, what="the watch closed")
