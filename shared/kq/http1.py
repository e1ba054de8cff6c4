"""HTTP/1.1 for kq.kube: unary requests on keep-alive connections, and streamed answers (watches).

httptools (llhttp, MagicStack's bindings as for uvloop) parses the answers: the status
line, headers, Content-Length or chunked bodies, interim 1xx answers and whether the
connection may be kept. The pool around it is ours because aiohttp's per-request objects
(request and response, timers, header multidicts, the connector's bookkeeping) cost ~200 us
of CPU per request on this machine and the watcher makes ~7 requests per workload; this
path costs ~55 us (a Protocol feeding the parser; the earlier hand-written StreamReader
parser cost ~65 us, same benchmark). It does only what the Kubernetes API needs of a
unary call: a request written at once (or a batch of them, pipelined: `request_batch`, and
`pipeline` to send together the requests made in the same turn of the loop), no compression
asked for, no redirects followed, no upgrade. A watch (`Http1Pool.stream`) gets a connection
of its own and its body comes as blocks of whole lines (one wake-up per read, not per line as
aiohttp's readline; `kq.http1_stream`). Proxied clusters stay on aiohttp (kq.kube decides).

A connection is reused only after a complete answer that did not ask to close it. A
request on a reused connection that gets no answer at all (the server had closed the
idle connection) is sent once more on a new one: kq's writes are conditional or
idempotent (resourceVersion preconditions, deterministic names), as client-go assumes
when it retries on a closed idle connection. In a pipelined batch, requests after an answer
that closes the connection are sent again on a new one (the server processed none of them);
those a connection cut otherwise left unanswered fail (the server may have processed them).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import Mapping, Sequence

import httptools

from kq.http1_stream import Stream, parse_headers

_IDLE_S = 30.0  # a connection idle longer is closed rather than reused (servers drop idle ones)
_TICK_S = 0.25  # how late at most a request's timeout fires


class HttpError(Exception):
    """No usable answer: connection refused, reset, timed out, or not HTTP/1.x."""


class _Stale(Exception):
    """A reused connection closed before any byte of the answers."""


class _Unsent(Exception):
    """An answer before this request's said `Connection: close`: the server did not process it
    (RFC 9112, 9.6), so it may be sent again on a new connection."""


class Response:
    __slots__ = ("status", "body", "_head")

    def __init__(self, status: int, head: list[bytes], body: bytes) -> None:
        self.status = status
        self.body = body
        self._head = head

    @property
    def headers(self) -> Mapping[str, str]:
        """The response's headers (parsed only when asked: an error's Retry-After)."""
        return parse_headers(self._head)


Outcome = Response | Exception  # one request's answer, or why it has none


class _Conn(asyncio.Protocol):
    """One connection; a batch of requests written at once, httptools parsing their answers in order."""

    __slots__ = ("transport", "idle_since", "closed", "_parser", "_done", "_results", "_want", "_any", "_got",
                 "_status", "_head", "_name", "_body", "_interim")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self.closed = False
        self._parser = httptools.HttpResponseParser(self)
        self._done: asyncio.Future[list[Outcome]] | None = None
        self._results: list[Outcome] = []
        self._want = 0  # answers the batch under way asked for
        self._any = False  # a byte of the batch's answers arrived
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
        self._any = self._got = True
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
            self._answered(False)  # a body delimited by the end of the connection
        if done.done():
            return
        if not self._any:
            self._fail(_Stale())
        elif self._got:
            self._fail(ConnectionResetError(f"connection closed mid-answer: {exc}"))
        else:  # the server may have processed it: an error, not a retry
            self._fail(ConnectionResetError(f"connection closed before the answer: {exc}"))

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
        self._answered(self._parser.should_keep_alive())

    # exchanges
    def send(self, data: bytes, count: int) -> asyncio.Future[list[Outcome]]:
        """Write `count` requests (`data`, all of them); the future gets their outcomes in order."""
        assert self.transport is not None
        self._done = asyncio.get_running_loop().create_future()
        self._results = []
        self._want = count
        self._any = self._got = False
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

    def _answered(self, keep: bool) -> None:
        head = [n + b": " + v for n, v in self._head]
        self._results.append(Response(self._status, head, b"".join(self._body)))
        self._reset()
        self._got = False
        if len(self._results) >= self._want:
            if not keep:
                self.close()
            self._resolve()
        elif not keep:  # the server closes after this answer and processed none of the rest
            self._fail(_Unsent())

    def _resolve(self) -> None:
        done = self._done
        if done is not None and not done.done():
            done.set_result(self._results)

    def _fail(self, exc: Exception) -> None:
        """Every request of the batch not answered yet gets `exc`; the connection is closed."""
        self._results.extend(exc for _ in range(self._want - len(self._results)))
        self._resolve()
        self.close()

    def expire(self) -> None:
        """The batch under way took too long: its unanswered requests fail with TimeoutError."""
        self._fail(TimeoutError())


def _http_error(exc: Exception, timeout_s: float) -> HttpError:
    if isinstance(exc, HttpError):
        return exc
    if isinstance(exc, TimeoutError):
        err = HttpError(f"no answer within {timeout_s:g} s")
    else:
        err = HttpError(f"{type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err


class Http1Pool:
    """Connections to one server; at most `limit` open at once.

    `pipeline` > 1: the requests made in the same turn of the event loop go out together, up to
    that many written at once on one connection and their answers read back in order (RFC 9112,
    9.3.2), rather than one connection and one write each. A server answers one connection's
    requests one after another, so this trades the server's concurrency for fewer system calls
    on both sides: worth it against a server that handles requests one at a time anyway (kubesim),
    a cost against one that would have worked on them in parallel."""

    def __init__(self, host: str, port: int, *, tls: ssl.SSLContext | None, server_hostname: str | None,
                 limit: int, pipeline: int = 1) -> None:
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
        self._pipeline = max(1, pipeline)
        # Requests waiting to be sent together (pipeline > 1), and the task that sends them.
        self._queued: deque[tuple[bytes, float, asyncio.Future[Response]]] = deque()
        self._pump: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()

    @staticmethod
    def encode(method: str, target: str, head: bytes, body: bytes | None) -> bytes:
        """A request's bytes. `head`: the header lines after the request line, each ending in CRLF
        (Host included), without Content-Length."""
        return b"".join((
            f"{method} {target} HTTP/1.1\r\n".encode(), head,
            b"Content-Length: %d\r\n\r\n" % len(body) if body is not None else b"\r\n",
            body or b"",
        ))

    async def request(self, method: str, target: str, head: bytes, body: bytes | None, timeout_s: float) -> Response:
        """`head` as for `encode`. Raises HttpError when there is no complete answer."""
        data = self.encode(method, target, head, body)
        if self._pipeline > 1:
            fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
            self._queued.append((data, timeout_s, fut))
            if self._pump is None:
                self._pump = pump = asyncio.get_running_loop().create_task(self._send_queued())
                self._sending.add(pump)
                pump.add_done_callback(self._sending.discard)
            return await fut
        async with self._slots:
            out = (await self._exchange([data], timeout_s))[0]
        if isinstance(out, Response):
            return out
        raise _http_error(out, timeout_s)

    async def request_batch(self, requests: Sequence[bytes], timeout_s: float, *, batch: int = 64) -> list[Outcome]:
        """Requests (`encode`'s bytes) pipelined, up to `batch` written at once on one connection and
        the chunks on connections of their own; their outcomes in order: a Response, or the HttpError
        of a request no complete answer came to (`timeout_s` per chunk, from when it is written)."""
        chunks = [list(requests[i:i + batch]) for i in range(0, len(requests), max(1, batch))]

        async def one(chunk: list[bytes]) -> list[Outcome]:
            async with self._slots:
                outs = await self._exchange(chunk, timeout_s)
            return [o if isinstance(o, Response) else _http_error(o, timeout_s) for o in outs]

        parts = await asyncio.gather(*(one(c) for c in chunks))
        return [o for part in parts for o in part]

    async def _exchange(self, requests: list[bytes], timeout_s: float) -> list[Outcome]:
        """The outcomes of `requests` written together on one connection (a slot held): a Response or
        the exception that ended the request. A batch a reused connection gave no byte to (the server
        had closed it) is sent once more on a new one, and requests after an answer that closed the
        connection go on a new one too (the server did not process them)."""
        deadline = time.monotonic() + timeout_s
        out: list[Outcome | None] = [None] * len(requests)
        todo = list(range(len(requests)))
        fresh_stale = False  # a batch got no byte on a new connection: no more retries
        while todo:
            conn, reused = self._take()
            try:
                if conn is None:
                    async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                        conn = await self._connect()
            except (OSError, TimeoutError, ValueError) as e:
                for i in todo:
                    out[i] = e
                break
            self._deadlines[conn] = deadline
            if self._watchdog is None:
                self._watchdog = asyncio.get_running_loop().create_task(self._expire_late())
            data = requests[todo[0]] if len(todo) == 1 else b"".join(requests[i] for i in todo)
            try:
                got = await conn.send(data, len(todo))
            except BaseException:
                conn.close()
                raise
            finally:
                self._deadlines.pop(conn, None)
            if not conn.closed and not self._closed:
                conn.idle_since = time.monotonic()
                self._idle.append(conn)
            again: list[int] = []
            for i, o in zip(todo, got, strict=True):
                if isinstance(o, _Unsent) or (isinstance(o, _Stale) and reused):
                    again.append(i)
                elif isinstance(o, _Stale):
                    out[i] = ConnectionResetError("closed before any answer")
                    fresh_stale = True
                else:
                    out[i] = o
            todo = [] if fresh_stale else again
        return [o if o is not None else ConnectionResetError("closed before any answer") for o in out]

    async def _send_queued(self) -> None:
        """Sends what `request` queued: up to `pipeline` requests at a time on one connection, as
        slots are free. Started in the turn of the first request, it runs in the next: every request
        made meanwhile is in the queue. The last chunk it sends itself (a lone request costs one task),
        after handing the queue over to a new task for the requests that come meanwhile."""
        loop = asyncio.get_running_loop()
        me = asyncio.current_task()
        try:
            while self._queued:
                await self._slots.acquire()
                chunk: list[tuple[bytes, float, asyncio.Future[Response]]] = []
                while self._queued and len(chunk) < self._pipeline:
                    item = self._queued.popleft()
                    if not item[2].done():  # (its caller gave up waiting)
                        chunk.append(item)
                if not chunk:
                    self._slots.release()
                    continue
                if not self._queued:
                    self._pump = None
                    await self._send_chunk(chunk)
                    return
                task = loop.create_task(self._send_chunk(chunk))
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)
        finally:
            if self._pump is me:
                self._pump = None

    async def _send_chunk(self, chunk: list[tuple[bytes, float, asyncio.Future[Response]]]) -> None:
        timeout_s = min(t for _, t, _ in chunk)
        futs = [f for _, _, f in chunk]
        try:
            outs = await self._exchange([d for d, _, _ in chunk], timeout_s)
        except BaseException as e:  # cancelled (the pool closed), or a bug: no answers
            for fut in futs:
                if not fut.done():
                    fut.set_exception(HttpError(f"{type(e).__name__}: {e}"))
            if not isinstance(e, Exception):
                raise
            return
        finally:
            self._slots.release()
        for fut, o in zip(futs, outs, strict=True):
            if fut.done():
                continue
            if isinstance(o, Response):
                fut.set_result(o)
            else:
                fut.set_exception(_http_error(o, timeout_s))

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
        for task in list(self._sending):  # (the pumps among them)
            task.cancel()
        while self._queued:
            fut = self._queued.popleft()[2]
            if not fut.done():
                fut.set_exception(HttpError("the connection pool closed"))

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
