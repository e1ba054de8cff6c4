"""HTTP/1.1 for kq.kube: unary requests on keep-alive connections, and streamed answers (watches).

httptools (llhttp, MagicStack's bindings as for uvloop) parses the answers: the status
line, headers, Content-Length or chunked bodies, interim 1xx answers and whether the
connection may be kept. The pool around it is ours because aiohttp's per-request objects
(request and response, timers, header multidicts, the connector's bookkeeping) cost ~200 us
of CPU per request on this machine and the watcher makes ~7 requests per workload; this
path costs ~55 us (a Protocol feeding the parser; the earlier hand-written StreamReader
parser cost ~65 us, same benchmark). It does only what the Kubernetes API needs of a
unary call: one request written at once, no compression asked for, no redirects followed,
no upgrade. A watch (`Http1Pool.stream`) gets a connection of its own and its body comes as
blocks of whole lines (one wake-up per read, not per line as aiohttp's readline). Proxied
clusters stay on aiohttp (kq.kube decides).

A connection is reused only after a complete answer that did not ask to close it. A
request on a reused connection that gets no answer at all (the server had closed the
idle connection) is sent once more on a new one: kq's writes are conditional or
idempotent (resourceVersion preconditions, deterministic names), as client-go assumes
when it retries on a closed idle connection.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping

import httptools
from multidict import CIMultiDict

_IDLE_S = 30.0  # a connection idle longer is closed rather than reused (servers drop idle ones)
_STREAM_HIGH = 4 << 20  # a stream's unread bytes beyond which the socket is not read (flow control)
_MAX_LINE = 64 << 20  # a line of a stream longer than this is an error, not memory
_TICK_S = 0.25  # how late at most a request's timeout fires


class HttpError(Exception):
    """No usable answer: connection refused, reset, timed out, or not HTTP/1.x."""


class _Stale(Exception):
    """A reused connection closed before any byte of the answer."""


def _headers(head: list[bytes]) -> Mapping[str, str]:
    out: CIMultiDict[str] = CIMultiDict()
    for line in head:
        name, _, value = line.decode("latin-1").partition(":")
        out.add(name.strip(), value.strip())
    return out


class Response:
    __slots__ = ("status", "body", "_head")

    def __init__(self, status: int, head: list[bytes], body: bytes) -> None:
        self.status = status
        self.body = body
        self._head = head

    @property
    def headers(self) -> Mapping[str, str]:
        """The response's headers (parsed only when asked: an error's Retry-After)."""
        return _headers(self._head)


class _Conn(asyncio.Protocol):
    """One connection; httptools parses what arrives, one exchange at a time."""

    __slots__ = ("transport", "idle_since", "closed", "_parser", "_done", "_got", "_status", "_head",
                 "_name", "_body", "_interim")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self.closed = False
        self._parser = httptools.HttpResponseParser(self)
        self._done: asyncio.Future[tuple[Response, bool]] | None = None
        self._got = False  # a byte of the current answer arrived
        self._reset()

    def _reset(self) -> None:
        self._status = 0
        self._head: list[tuple[bytes, bytes]] = []
        self._name = b""
        self._body: list[bytes] = []
        self._interim = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._done is None or self._done.done():
            self.close()  # unasked bytes on an idle connection (a 408 before closing): not reusable
            return
        self._got = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(ValueError(f"not an HTTP/1.x answer: {e}: {data[:80]!r}"))

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        done = self._done
        if done is None or done.done():
            return
        if self._status and not self._interim and self._framed_by_close():
            self._finish(False)  # a body delimited by the end of the connection
        elif not self._got:
            done.set_exception(_Stale())
        else:
            self._fail(ConnectionResetError(f"connection closed mid-answer: {exc}"))

    # httptools callbacks
    def on_status(self, status: bytes) -> None:
        self._status = self._parser.get_status_code()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head.append((name, value))

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        self._interim = 100 <= self._status < 200

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._interim:
            self._reset()  # an interim answer: the real one follows
            return
        self._finish(self._parser.should_keep_alive())

    # exchanges
    def exchange(self, data: bytes) -> asyncio.Future[tuple[Response, bool]]:
        assert self.transport is not None
        self._done = asyncio.get_running_loop().create_future()
        self._got = False
        self._reset()
        self.transport.write(data)
        return self._done

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _framed_by_close(self) -> bool:
        names = {n.lower() for n, _ in self._head}
        return b"content-length" not in names and b"transfer-encoding" not in names

    def _finish(self, keep: bool) -> None:
        done = self._done
        if done is not None and not done.done():
            head = [n + b": " + v for n, v in self._head]
            done.set_result((Response(self._status, head, b"".join(self._body)), keep))

    def _fail(self, exc: Exception) -> None:
        done = self._done
        if done is not None and not done.done():
            done.set_exception(exc)
        self.close()

    def expire(self) -> None:
        """The exchange under way took too long: it fails with TimeoutError, the connection is closed."""
        self._fail(TimeoutError())


def _looked_at(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled():
        fut.exception()


class Stream(asyncio.Protocol):
    """A streamed answer on a connection of its own: the status line and headers, then the body
    as it comes (`blocks`: whole lines; `read`: all of it). Close it when done."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.status = 0
        self._head: list[tuple[bytes, bytes]] = []
        self._parser = httptools.HttpResponseParser(self)
        self._headers_in: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._headers_in.add_done_callback(_looked_at)  # a failure after `stream` gave up is no news
        self._blocks: deque[bytes] = deque()  # whole lines, not read yet
        self._queued = 0
        self._partial = bytearray()  # the start of a line whose end has not come
        self._wake: asyncio.Future[None] | None = None
        self._ended = False  # the whole answer came
        self._error: Exception | None = None
        self._paused = False
        self._interim = False

    @property
    def headers(self) -> Mapping[str, str]:
        return _headers([n + b": " + v for n, v in self._head])

    async def blocks(self, idle_timeout_s: float) -> AsyncIterator[bytes]:
        """The body in blocks of whole lines, each ending in a newline (a last line without one comes
        at the end). Raises ConnectionResetError when cut, TimeoutError after idle_timeout_s silent."""
        while True:
            if self._blocks:
                block = self._blocks.popleft()
                self._queued -= len(block)
                if self._paused and self._queued < _STREAM_HIGH // 2 and self.transport is not None:
                    self._paused = False
                    self.transport.resume_reading()
                yield block
                continue
            if self._error is not None:
                raise self._error
            if self._ended:
                if self._partial:
                    last, self._partial = bytes(self._partial), bytearray()
                    yield last
                return
            self._wake = asyncio.get_running_loop().create_future()
            async with asyncio.timeout(idle_timeout_s):
                await self._wake

    async def read(self, idle_timeout_s: float) -> bytes:
        """The whole body (an error's answer)."""
        return b"".join([b async for b in self.blocks(idle_timeout_s)])

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(ValueError(f"not an HTTP/1.x answer: {e}: {data[:80]!r}"))
            self.close()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._ended:
            return
        if self.status and self._headers_in.done() and not self._framed():
            self._end()  # a body delimited by the end of the connection
        else:
            self._fail(ConnectionResetError(f"connection closed mid-answer: {exc}"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._head.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self._interim = 100 <= self.status < 200
        if self._interim:
            self._head = []
        elif not self._headers_in.done():
            self._headers_in.set_result(None)

    def on_body(self, body: bytes) -> None:
        end = body.rfind(b"\n")
        if end < 0:
            self._partial += body
            if len(self._partial) > _MAX_LINE:
                self._fail(ValueError(f"a line longer than {_MAX_LINE} bytes"))
                self.close()
            return
        if self._partial:
            block = bytes(self._partial) + body[:end + 1]
            self._partial = bytearray(body[end + 1:])
        else:
            block = body[:end + 1] if end + 1 < len(body) else body
            if end + 1 < len(body):
                self._partial = bytearray(body[end + 1:])
        self._blocks.append(block)
        self._queued += len(block)
        if not self._paused and self._queued > _STREAM_HIGH and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wakeup()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self._end()

    def _framed(self) -> bool:
        names = {n.lower() for n, _ in self._head}
        return b"content-length" in names or b"transfer-encoding" in names

    def _end(self) -> None:
        self._ended = True
        self._wakeup()
        self.close()

    def _fail(self, exc: Exception) -> None:
        if self._error is None and not self._ended:
            self._error = exc
        if not self._headers_in.done():
            self._headers_in.set_exception(exc)
        self._wakeup()

    def _wakeup(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)


class Http1Pool:
    """Connections to one server; at most `limit` open at once."""

    def __init__(self, host: str, port: int, *, tls: ssl.SSLContext | None, server_hostname: str | None,
                 limit: int) -> None:
        self._host = host
        self._port = port
        self._tls = tls
        self._server_hostname = server_hostname if tls is not None else None
        self._idle: list[_Conn] = []
        self._slots = asyncio.Semaphore(limit)
        self._closed = False
        # Exchanges under way -> when they time out, watched by one task (_expire_late) rather than
        # a timer per request (asyncio.timeout was ~2 % of the watcher's CPU, ~7 requests a workload).
        self._deadlines: dict[_Conn, float] = {}
        self._watchdog: asyncio.Task[None] | None = None

    async def request(self, method: str, target: str, head: bytes, body: bytes | None, timeout_s: float) -> Response:
        """`head`: the header lines after the request line, each ending in CRLF (Host included),
        without Content-Length. Raises HttpError when there is no complete answer."""
        data = b"".join((
            f"{method} {target} HTTP/1.1\r\n".encode(), head,
            b"Content-Length: %d\r\n\r\n" % len(body) if body is not None else b"\r\n",
            body or b"",
        ))
        async with self._slots:
            deadline = time.monotonic() + timeout_s
            try:
                while True:
                    conn, reused = self._take()
                    if conn is None:
                        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                            conn = await self._connect()
                    self._deadlines[conn] = deadline
                    if self._watchdog is None:
                        self._watchdog = asyncio.get_running_loop().create_task(self._expire_late())
                    try:
                        resp, keep = await conn.exchange(data)
                    except _Stale:
                        conn.close()
                        if reused:
                            continue  # the server had closed it: once more on a new connection
                        raise ConnectionResetError("closed before any answer") from None
                    except BaseException:
                        conn.close()
                        raise
                    finally:
                        self._deadlines.pop(conn, None)
                    if keep and not self._closed and not conn.closed:
                        conn.idle_since = time.monotonic()
                        self._idle.append(conn)
                    else:
                        conn.close()
                    return resp
            except TimeoutError as e:
                raise HttpError(f"no answer within {timeout_s:g} s") from e
            except (OSError, ValueError) as e:
                raise HttpError(f"{type(e).__name__}: {e}") from e

    async def stream(self, method: str, target: str, head: bytes, timeout_s: float) -> Stream:
        """A request whose answer is read as it comes (a watch), on a new connection: returns once
        the status and headers are in (`timeout_s` to connect and to get them). Raises HttpError."""
        data = f"{method} {target} HTTP/1.1\r\n".encode() + head + b"\r\n"
        stream: Stream | None = None
        try:
            async with asyncio.timeout(timeout_s):
                _, stream = await asyncio.get_running_loop().create_connection(
                    Stream, self._host, self._port, ssl=self._tls, server_hostname=self._server_hostname)
                assert stream.transport is not None
                stream.transport.write(data)
                await stream._headers_in
            return stream
        except TimeoutError as e:
            if stream is not None:
                stream.close()
            raise HttpError(f"no answer within {timeout_s:g} s") from e
        except (OSError, ValueError) as e:
            if stream is not None:
                stream.close()
            raise HttpError(f"{type(e).__name__}: {e}") from e

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()
        if self._watchdog is not None:
            self._watchdog.cancel()

    async def _expire_late(self) -> None:
        """Fail each exchange still under way at its deadline (TimeoutError, its connection closed);
        wakes at the earliest deadline, and ends when none is under way (the next request restarts it)."""
        try:
            while self._deadlines:
                now = time.monotonic()
                for conn in [c for c, d in self._deadlines.items() if d <= now]:
                    del self._deadlines[conn]
                    conn.expire()
                if self._deadlines:  # (at most _TICK_S: a request with a shorter timeout may come meanwhile)
                    await asyncio.sleep(min(_TICK_S, max(0.001, min(self._deadlines.values()) - now)))
        finally:
            self._watchdog = None

    def _take(self) -> tuple[_Conn | None, bool]:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < _IDLE_S and not conn.closed:
                return conn, True
            conn.close()
        return None, False

    async def _connect(self) -> _Conn:
        _, conn = await asyncio.get_running_loop().create_connection(
            _Conn, self._host, self._port, ssl=self._tls, server_hostname=self._server_hostname)
        return conn
