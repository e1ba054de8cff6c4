"""kq.http1 against a scripted server on a real socket: framing (Content-Length, chunked, end of
connection), keep-alive reuse, a reused connection the server had closed, timeouts, TLS."""

from __future__ import annotations

import asyncio
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from support.wait import eventually

from kq.http1 import Http1Pool, HttpError, Response
from kq.stack.secure import make_certificates

pytestmark = pytest.mark.timeout(30)
HEAD = b"Host: test\r\nAccept: application/json\r\n"
# (the request's bytes, its number on its connection from 1) -> what to send (None: close at once)
Answer = Callable[[bytes, int], bytes | None]


@asynccontextmanager
async def server(answer: Answer, close_after: bool = False) -> AsyncIterator[tuple[int, list[int]]]:
    """Answers each request on a connection with answer(request); yields the port and, per request,
    the number of the connection it came on."""
    seen: list[int] = []
    conns = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal conns
        conns += 1
        me = conns
        nth = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                seen.append(me)
                nth += 1
                out = answer(head + body, nth)
                if out is None:
                    break
                writer.write(out)
                await writer.drain()
                if close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield srv.sockets[0].getsockname()[1], seen
    finally:
        srv.close()
        await srv.wait_closed()


def pool(port: int) -> Http1Pool:
    return Http1Pool("127.0.0.1", port, tls=None, server_hostname=None, limit=4)


async def test_content_length_answers_reuse_one_connection() -> None:
    def answer(req: bytes, nth: int) -> bytes:
        assert req.startswith(b"PATCH /a/b HTTP/1.1\r\nHost: test\r\n")
        assert b"Content-Length: 7\r\n\r\n{\"x\":1}" in req
        return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"

    async with server(answer) as (port, seen):
        p = pool(port)
        for _ in range(3):
            resp = await p.request("PATCH", "/a/b", HEAD, b'{"x":1}', 5)
            assert (resp.status, resp.body) == (200, b"{}")
        assert seen == [1, 1, 1]
        p.close()


async def test_chunked_answer_with_an_interim_one_and_a_retry_after_header() -> None:
    body = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\n" \
           b"Transfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3;ext=1\r\n:1}\r\n0\r\n\r\n"
    async with server(lambda req, nth: body) as (port, seen):
        p = pool(port)
        resp = await p.request("GET", "/x", HEAD, None, 5)
        assert (resp.status, resp.body, resp.headers["retry-after"]) == (429, b'{"a":1}', "3")
        resp = await p.request("GET", "/x", HEAD, None, 5)
        assert resp.status == 429 and seen == [1, 1]
        p.close()


async def test_an_answer_delimited_by_the_end_of_the_connection_is_not_reused() -> None:
    async with server(lambda req, nth: b"HTTP/1.1 201 Created\r\n\r\n{\"ok\":true}", close_after=True) as (port, seen):
        p = pool(port)
        for _ in range(2):
            resp = await p.request("POST", "/x", HEAD, b"{}", 5)
            assert (resp.status, resp.body) == (201, b'{"ok":true}')
        assert seen == [1, 2]
        p.close()


async def test_a_reused_connection_the_server_closed_is_replaced_once() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    # A kept-alive connection the server drops when the next request comes (its idle timeout).
    async with server(lambda req, nth: ok if nth == 1 else None) as (port, seen):
        p = pool(port)
        assert (await p.request("GET", "/x", HEAD, None, 5)).status == 200
        assert (await p.request("PATCH", "/x", HEAD, b"{}", 5)).status == 200
        assert seen == [1, 1, 2]
        p.close()


async def test_no_answer_is_an_error_not_a_retry_on_a_new_connection() -> None:
    async with server(lambda req, nth: None) as (port, seen):
        p = pool(port)
        with pytest.raises(HttpError):
            await p.request("POST", "/x", HEAD, b"{}", 5)
        assert seen == [1]
        p.close()


def _echo(req: bytes) -> bytes:
    """200 with the request's target as the body."""
    target = req.split(b" ")[1]
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(target), target)


async def test_a_connection_cut_mid_batch_fails_the_rest_and_sends_nothing_again() -> None:
    # the server answers two of the batch and closes while reading the third: the third and fourth
    # may have been processed, so they fail rather than go again
    async with server(lambda req, nth: _echo(req) if nth <= 2 else None) as (port, seen):
        p = pool(port)
        outs = await p.request_batch([Http1Pool.encode("PATCH", f"/{i}", HEAD, b"{}") for i in range(4)], 5)
        assert [o.body for o in outs[:2] if isinstance(o, Response)] == [b"/0", b"/1"]
        assert all(isinstance(o, HttpError) and "closed" in str(o) for o in outs[2:]), outs
        assert set(seen) == {1} and not p._idle
        p.close()


async def test_a_batch_on_a_reused_connection_the_server_had_closed_goes_again_once() -> None:
    total = 0

    def answer(req: bytes, nth: int) -> bytes | None:
        nonlocal total
        total += 1
        return None if total == 2 else _echo(req)  # the kept connection dropped as the batch comes

    async with server(answer) as (port, seen):
        p = pool(port)
        assert (await p.request("GET", "/first", HEAD, None, 5)).status == 200
        outs = await p.request_batch([Http1Pool.encode("GET", f"/{i}", HEAD, None) for i in range(3)], 5)
        assert [o.body for o in outs if isinstance(o, Response)] == [b"/0", b"/1", b"/2"]
        assert seen == [1, 1, 2, 2, 2]
        p.close()


async def test_requests_of_one_loop_turn_share_connections_and_keep_their_answers() -> None:
    async with server(lambda req, nth: _echo(req)) as (port, seen):
        p = Http1Pool("127.0.0.1", port, tls=None, server_hostname=None, limit=4, pipeline=8)
        got = await asyncio.gather(*(p.request("GET", f"/{i}", HEAD, None, 5) for i in range(20)))
        assert [r.body for r in got] == [f"/{i}".encode() for i in range(20)]
        assert sorted(Counter(seen).values()) == [4, 8, 8]  # 8 + 8 + 4 on three connections
        p.close()


@asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    """A server that reads and never answers; yields its port."""
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    srv = await asyncio.start_server(silent, "127.0.0.1", 0)
    try:
        yield srv.sockets[0].getsockname()[1]
    finally:
        srv.close()
        await srv.wait_closed()


async def test_a_silent_server_times_out() -> None:
    async with silent_server() as port:
        p = pool(port)
        with pytest.raises(HttpError, match="no answer within"):
            await p.request("GET", "/x", HEAD, None, 0.2)
        p.close()


async def test_a_short_timeout_fires_while_a_longer_request_waits() -> None:
    """Timeouts are watched by one task per pool, not a timer per request: a request with a short
    timeout that comes while a longer one waits still times out near its own deadline, and the
    pool's watcher ends once nothing is under way."""
    async with silent_server() as port:
        p = pool(port)
        long = asyncio.create_task(p.request("GET", "/long", HEAD, None, 20))
        await eventually(lambda: len(p._deadlines) == 1, timeout=5, what="the long request under way")
        with pytest.raises(HttpError, match=r"no answer within 0\.3 s"):
            await asyncio.wait_for(p.request("GET", "/short", HEAD, None, 0.3), timeout=5)
        assert not long.done()
        long.cancel()
        with pytest.raises(asyncio.CancelledError):
            await long
        await eventually(lambda: p._watchdog is None, timeout=5, what="the pool's timeout watcher ended")
        p.close()


async def test_closing_the_pool_fails_pipelined_requests_under_way_and_queued() -> None:
    async with silent_server() as port:
        p = Http1Pool("127.0.0.1", port, tls=None, server_hostname=None, limit=1, pipeline=2)
        calls = [asyncio.create_task(p.request("GET", f"/{i}", HEAD, None, 20)) for i in range(5)]
        await eventually(lambda: len(p._deadlines) == 1, timeout=5, what="the first two under way")
        p.close()
        done, _ = await asyncio.wait(calls, timeout=5)
        assert len(done) == 5 and all(isinstance(c.exception(), HttpError) for c in calls)


async def test_garbage_is_an_error() -> None:
    async with server(lambda req, nth: b"SSH-2.0-OpenSSH\r\n\r\n") as (port, _):
        p = pool(port)
        with pytest.raises(HttpError, match="not an HTTP"):
            await p.request("GET", "/x", HEAD, None, 5)
        p.close()


async def test_tls_with_the_servers_ca_and_not_without(tmp_path: Path) -> None:
    ca, cert, key = make_certificates(tmp_path, "127.0.0.1")
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=served)
    port = srv.sockets[0].getsockname()[1]
    try:
        trusted = Http1Pool("127.0.0.1", port, tls=ssl.create_default_context(cafile=str(ca)),
                            server_hostname=None, limit=2)
        assert (await trusted.request("GET", "/x", HEAD, None, 10)).body == b"{}"
        trusted.close()
        stranger = Http1Pool("127.0.0.1", port, tls=ssl.create_default_context(), server_hostname=None, limit=2)
        with pytest.raises(HttpError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            await stranger.request("GET", "/x", HEAD, None, 10)
        stranger.close()
    finally:
        srv.close()
        await srv.wait_closed()


async def test_an_answer_split_across_reads_is_put_together() -> None:
    parts = [b"HTTP/1.1 100 Cont", b"inue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Le", b"ngth: 7\r\n\r\n{\"a", b"\":1}"]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            for part in parts:  # each written and drained apart: separate reads at the client
                writer.write(part)
                await writer.drain()
                await asyncio.sleep(0.01)
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        p = pool(srv.sockets[0].getsockname()[1])
        resp = await p.request("GET", "/x", HEAD, None, 5)
        assert (resp.status, resp.body) == (200, b'{"a":1}')
        p.close()
    finally:
        srv.close()
        await srv.wait_closed()


async def test_a_connection_closed_mid_body_is_an_error_not_a_retry() -> None:
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"a\""
    async with server(lambda req, nth: cut, close_after=True) as (port, seen):
        p = pool(port)
        with pytest.raises(HttpError, match="mid-answer"):
            await p.request("GET", "/x", HEAD, None, 5)
        assert seen == [1]
        p.close()


@asynccontextmanager
async def streaming(parts: list[bytes], *, then_close: bool = True) -> AsyncIterator[int]:
    """A server that answers the first request with `parts`, each written apart; then closes the
    connection (or keeps it open, silent)."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            for part in parts:
                writer.write(part)
                await writer.drain()
                await asyncio.sleep(0.01)
            if not then_close:
                await asyncio.sleep(30)
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield srv.sockets[0].getsockname()[1]
    finally:
        srv.close()
        await srv.wait_closed()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


async def test_a_stream_comes_in_blocks_of_whole_lines() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    parts = [head, _chunk(b'{"a":1}\n{"b'), _chunk(b'":2}\n'), _chunk(b'{"c":3}\n{"d":4}\n{"e"'), _chunk(b":5}"),
             b"0\r\n\r\n"]
    async with streaming(parts) as port:
        s = await pool(port).stream("GET", "/w?watch=true", HEAD, 5)
        assert s.status == 200
        blocks = [b async for b in s.blocks(5)]
        s.close()
    assert all(b.endswith(b"\n") for b in blocks[:-1])
    assert b"".join(blocks).split(b"\n") == [b'{"a":1}', b'{"b":2}', b'{"c":3}', b'{"d":4}', b'{"e":5}']


async def test_a_stream_cut_mid_body_is_an_error_and_a_silent_one_times_out() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    async with streaming([head, _chunk(b'{"a":1}\n')]) as port:
        s = await pool(port).stream("GET", "/w", HEAD, 5)
        got = []
        with pytest.raises(ConnectionResetError):
            async for b in s.blocks(5):
                got.append(b)
        assert got == [b'{"a":1}\n']
    async with streaming([head, _chunk(b'{"a":1}\n')], then_close=False) as port:
        s = await pool(port).stream("GET", "/w", HEAD, 5)
        with pytest.raises(TimeoutError):
            async for _ in s.blocks(0.3):
                pass
        s.close()


async def test_a_stream_answered_with_an_error_is_read_whole() -> None:
    answer = b"HTTP/1.1 410 Gone\r\nContent-Length: 12\r\nRetry-After: 3\r\n\r\n{\"code\":410}"
    async with streaming([answer], then_close=False) as port:
        s = await pool(port).stream("GET", "/w", HEAD, 5)
        assert (s.status, s.headers["Retry-After"]) == (410, "3")
        assert await s.read(5) == b'{"code":410}'
        s.close()
