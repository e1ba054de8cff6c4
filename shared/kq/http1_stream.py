"""A streamed HTTP/1.1 answer (a watch) for kq.http1: the status line and headers parsed by
httptools, then the body handed on as blocks of whole lines, the socket paused while too much
is unread (flow control)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Mapping

import httptools
from multidict import CIMultiDict

_STREAM_HIGH = 4 << 20  # a stream's unread bytes beyond which the socket is not read (flow control)
_MAX_LINE = 64 << 20  # a line of a stream longer than this is an error, not memory


def parse_headers(head: list[bytes]) -> Mapping[str, str]:
    out: CIMultiDict[str] = CIMultiDict()
    for line in head:
        name, _, value = line.decode("latin-1").partition(":")
        out.add(name.strip(), value.strip())
    return out


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
        self._loop = asyncio.get_running_loop()
        self._heard = self._loop.time()  # when the last bytes came
        # One timer for the stream's silence, set again only when it rings: an asyncio.timeout per
        # wait made and cancelled a timer per block (~7 % of the watcher's list/watch CPU).
        self._alarm: asyncio.TimerHandle | None = None
        self._ended = False  # the whole answer came
        self._error: Exception | None = None
        self._paused = False
        self._interim = False

    @property
    def headers(self) -> Mapping[str, str]:
        return parse_headers([n + b": " + v for n, v in self._head])

    async def blocks(self, idle_timeout_s: float) -> AsyncIterator[bytes]:
        """The body in blocks of whole lines, each ending in a newline (a last line without one comes
        at the end). Raises ConnectionResetError when cut, TimeoutError after idle_timeout_s silent."""
        loop = self._loop
        try:
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
                if loop.time() - self._heard >= idle_timeout_s:
                    raise TimeoutError(f"nothing came for {idle_timeout_s:g} s")
                self._wake = loop.create_future()
                if self._alarm is None:  # rings at the earliest when the silence would be long enough
                    self._alarm = loop.call_at(self._heard + idle_timeout_s, self._ring)
                await self._wake
        finally:
            self._silence()

    async def read(self, idle_timeout_s: float) -> bytes:
        """The whole body (an error's answer)."""
        return b"".join([b async for b in self.blocks(idle_timeout_s)])

    def close(self) -> None:
        self._silence()
        if self.transport is not None:
            self.transport.close()

    def _ring(self) -> None:
        self._alarm = None
        self._wakeup()

    def _silence(self) -> None:
        if self._alarm is not None:
            self._alarm.cancel()
            self._alarm = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._heard = self._loop.time()
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
