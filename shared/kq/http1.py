"""Unary HTTP/1.1 requests on keep-alive connections, for kq.kube's writes and reads.

aiohttp spent ~200 us of CPU per request on this machine (the request and response
objects, timers, header multidicts, the connector's bookkeeping) and the watcher makes
~7 requests per workload; this path spends ~80 us. It does only what the Kubernetes API
needs of a unary call: one request written at once, a response framed by Content-Length,
chunked transfer coding or the end of the connection (no compression is asked for, no
redirects are followed, no upgrade). Watches (long-lived streams) and proxied clusters
stay on aiohttp (kq.kube decides).

A connection is reused only after a complete response that did not ask to close it. A
request on a reused connection that gets no answer at all (the server had closed the
idle connection) is sent once more on a new one: kq's writes are conditional or
idempotent (resourceVersion preconditions, deterministic names), as client-go assumes
when it retries on a closed idle connection.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping

from multidict import CIMultiDict

_IDLE_S = 30.0  # a connection idle longer is closed rather than reused (servers drop idle ones)
_LIMIT = 2**20  # the longest header line; also how much a connection buffers before pausing


class HttpError(Exception):
    """No usable answer: connection refused, reset, timed out, or not HTTP/1.x."""


class _Stale(Exception):
    """A reused connection closed before any byte of the answer."""


class Response:
    __slots__ = ("status", "body", "_head")

    def __init__(self, status: int, head: list[bytes], body: bytes) -> None:
        self.status = status
        self.body = body
        self._head = head

    @property
    def headers(self) -> Mapping[str, str]:
        """The response's headers (parsed only when asked: an error's Retry-After)."""
        out: CIMultiDict[str] = CIMultiDict()
        for line in self._head:
            name, _, value = line.decode("latin-1").partition(":")
            out.add(name.strip(), value.strip())
        return out


class _Conn:
    __slots__ = ("reader", "writer", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def close(self) -> None:
        self.writer.close()


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

    async def request(self, method: str, target: str, head: bytes, body: bytes | None, timeout_s: float) -> Response:
        """`head`: the header lines after the request line, each ending in CRLF (Host included),
        without Content-Length. Raises HttpError when there is no complete answer."""
        data = b"".join((
            f"{method} {target} HTTP/1.1\r\n".encode(), head,
            b"Content-Length: %d\r\n\r\n" % len(body) if body is not None else b"\r\n",
            body or b"",
        ))
        async with self._slots:
            try:
                async with asyncio.timeout(timeout_s):
                    while True:
                        conn, reused = self._take()
                        if conn is None:
                            conn = await self._connect()
                        try:
                            resp, keep = await self._exchange(conn, data, reused)
                        except _Stale:
                            conn.close()
                            continue  # the server had closed it: once more on a new connection
                        except BaseException:
                            conn.close()
                            raise
                        if keep and not self._closed:
                            conn.idle_since = time.monotonic()
                            self._idle.append(conn)
                        else:
                            conn.close()
                        return resp
            except TimeoutError as e:
                raise HttpError(f"no answer within {timeout_s:g} s") from e
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
                raise HttpError(f"{type(e).__name__}: {e}") from e

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    def _take(self) -> tuple[_Conn | None, bool]:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if now - conn.idle_since < _IDLE_S and not conn.reader.at_eof():
                return conn, True
            conn.close()
        return None, False

    async def _connect(self) -> _Conn:
        reader, writer = await asyncio.open_connection(self._host, self._port, ssl=self._tls,
                                                       server_hostname=self._server_hostname, limit=_LIMIT)
        return _Conn(reader, writer)

    async def _exchange(self, conn: _Conn, data: bytes, reused: bool) -> tuple[Response, bool]:
        reader = conn.reader
        conn.writer.write(data)
        try:
            status_line = await reader.readuntil(b"\r\n")
        except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError) as e:
            if reused and not getattr(e, "partial", b""):
                raise _Stale() from e
            raise
        while True:
            version, _, rest = status_line.partition(b" ")
            if not version.startswith(b"HTTP/1."):
                raise ValueError(f"not an HTTP/1.x answer: {status_line[:80]!r}")
            status = int(rest[:3])
            head = await self._head(reader)
            if not 100 <= status < 200:
                break
            status_line = await reader.readuntil(b"\r\n")  # an interim answer: the real one follows
        length = -1
        chunked = close = False
        for line in head:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                close = b"close" in value.lower()
        keep = not close and version == b"HTTP/1.1"
        if status in (204, 304):
            body = b""
        elif chunked:
            body = await self._chunks(reader)
        elif length >= 0:
            body = await reader.readexactly(length)
        else:  # delimited by the end of the connection
            body, keep = await reader.read(), False
        return Response(status, head, body), keep

    @staticmethod
    async def _head(reader: asyncio.StreamReader) -> list[bytes]:
        lines: list[bytes] = []
        while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
            lines.append(line[:-2])
        return lines

    @staticmethod
    async def _chunks(reader: asyncio.StreamReader) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, if any
                    pass
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            if await reader.readexactly(2) != b"\r\n":
                raise ValueError("a chunk not followed by CRLF")
