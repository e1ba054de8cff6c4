"""kq.http1's pipelined batches against kubesim over HTTP: each answer goes to its request, an
error answer in the middle of a batch leaves the rest answered, an answer that closes the
connection mid-batch gets the rest sent again on a new one, a batch past its timeout fails each
of its requests, and `pipeline=` sends the requests of one loop turn together."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit

import pytest
from support.kubesim_fixtures import SimControl

from kq.http1 import Http1Pool, HttpError, Response
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(30)

_BASE = "/clusters/manager/api/v1/namespaces/default/configmaps"
_HEAD = b"Host: x\r\nAccept: application/json\r\nContent-Type: application/json\r\n"


def _pool(sim: KubeSim, *, pipeline: int = 1, limit: int = 4) -> Http1Pool:
    u = urlsplit(sim.url)
    assert u.hostname is not None and u.port is not None
    return Http1Pool(u.hostname, u.port, tls=None, server_hostname=None, limit=limit, pipeline=pipeline)


def _post(name: str, head: bytes = _HEAD) -> bytes:
    return Http1Pool.encode("POST", _BASE, head, json.dumps({"metadata": {"name": name}, "data": {"k": name}}).encode())


def _get(name: str) -> bytes:
    return Http1Pool.encode("GET", f"{_BASE}/{name}", _HEAD, None)


def _name(out: Response | Exception) -> str:
    assert isinstance(out, Response), out
    return str(json.loads(out.body)["metadata"]["name"])


async def test_answers_match_requests_and_an_error_in_the_middle_leaves_the_rest(sim: KubeSim) -> None:
    pool = _pool(sim)
    try:
        outs = await pool.request_batch([_post("a"), _post("b"), _post("a"), _get("missing"), _get("b"), _post("c")],
                                        5.0)
        assert [o.status for o in outs if isinstance(o, Response)] == [201, 201, 409, 404, 200, 201]
        assert [_name(outs[i]) for i in (0, 1, 4, 5)] == ["a", "b", "b", "c"]
        # batches of two on connections of their own: still in order
        outs = await pool.request_batch([_get(n) for n in "cbacba"], 5.0, batch=2)
        assert [_name(o) for o in outs] == list("cbacba")
    finally:
        pool.close()


async def test_an_injected_server_error_mid_batch_is_that_request_s_alone(sim: KubeSim, control: SimControl) -> None:
    pool = _pool(sim)
    try:
        await pool.request_batch([_post("a")], 5.0)
        await control.fault("manager", {"type": "errors", "code": 500, "count": 1, "verbs": ["get"]})
        outs = await pool.request_batch([_post("b"), _get("a"), _get("a"), _get("b")], 5.0)
        assert [o.status for o in outs if isinstance(o, Response)] == [201, 500, 200, 200]
        assert [_name(outs[i]) for i in (0, 2, 3)] == ["b", "a", "b"]
    finally:
        pool.close()


async def test_requests_after_an_answer_that_closes_the_connection_go_again_on_a_new_one(sim: KubeSim) -> None:
    pool = _pool(sim)
    try:
        # kubesim hands a `Connection: close` request to aiohttp, which refuses it (400: bytes after
        # it) and closes: the requests behind it were not processed, and go again on a new connection.
        closing = _post("b", _HEAD + b"Connection: close\r\n")
        outs = await pool.request_batch([_post("a"), closing, _post("c"), _post("d")], 5.0)
        assert [o.status for o in outs if isinstance(o, Response)] == [201, 400, 201, 201]
        assert [_name(outs[i]) for i in (0, 2, 3)] == ["a", "c", "d"]
        again = await pool.request_batch([_post(n) for n in "acd"] + [_get("b")], 5.0)
        assert [o.status for o in again if isinstance(o, Response)] == [409, 409, 409, 404]
    finally:
        pool.close()


async def test_a_batch_past_its_timeout_fails_each_request_and_the_next_gets_answers(
        sim: KubeSim, control: SimControl) -> None:
    pool = _pool(sim)
    try:
        await control.fault("manager", {"type": "latency", "ms": 5000})
        outs = await pool.request_batch([_get("x"), _get("y"), _get("z")], 0.3)
        assert all(isinstance(o, HttpError) and "no answer within 0.3 s" in str(o) for o in outs), outs
        await control.clear("manager")
        outs = await pool.request_batch([_post("x"), _get("x")], 5.0)
        assert [_name(o) for o in outs] == ["x", "x"]
    finally:
        pool.close()


async def test_requests_of_one_loop_turn_go_together(sim: KubeSim, control: SimControl) -> None:
    pool = _pool(sim, pipeline=4, limit=8)
    try:
        names = [f"n{i}" for i in range(10)]
        created = await asyncio.gather(*(pool.request("POST", _BASE, _HEAD, json.dumps(
            {"metadata": {"name": n}}).encode(), 5.0) for n in names))
        assert [_name(r) for r in created] == names
        # ten requests in batches of at most four: three connections, each kept for the next turn
        assert len(pool._idle) == 3
        got = await asyncio.gather(*(pool.request("GET", f"{_BASE}/{n}", _HEAD, None, 5.0) for n in names[:4]))
        assert [_name(r) for r in got] == names[:4] and len(pool._idle) == 3
        # per-request outcomes: an error answer, and a timeout, are that request's
        await control.fault("manager", {"type": "errors", "code": 409, "count": 1, "verbs": ["get"]})
        first, second = await asyncio.gather(pool.request("GET", f"{_BASE}/n1", _HEAD, None, 5.0),
                                             pool.request("GET", f"{_BASE}/n2", _HEAD, None, 5.0))
        assert (first.status, second.status, _name(second)) == (409, 200, "n2")
        await control.fault("manager", {"type": "latency", "ms": 5000})
        late = await asyncio.gather(pool.request("GET", f"{_BASE}/n1", _HEAD, None, 0.3),
                                    pool.request("GET", f"{_BASE}/n2", _HEAD, None, 0.3), return_exceptions=True)
        assert all(isinstance(e, HttpError) for e in late), late
    finally:
        pool.close()
