"""The connection front: plain API requests answered straight from the socket, the rest by aiohttp.

aiohttp spends about 100 us of CPU on each request (request and response objects, header
handling, a task switch) where the store's work is 10-30 us and the socket's ~30 us: two thirds
of kubesim's CPU, and kubesim shares the machine with everything it simulates. So each
connection starts here. A request that is plain HTTP/1.1 with a Content-Length body, to a
cluster with no partition or latency fault, for any verb but watch, is answered synchronously
by ApiServer.plain, the same code aiohttp's path calls. A watch under the same conditions is
written here too (kubesim/watch_http.py, the code aiohttp's path runs, to a sink that frames
the chunks on the transport); the connection serves its next request once the watch has ended.
Anything else (discovery, the control API, chunked bodies, `Connection: close`, a malformed
request) hands the connection, with the bytes not yet answered, to an aiohttp RequestHandler
for the rest of its life.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote

import msgspec
from multidict import MultiDict

from kubesim.api_http import ApiServer, Target, parse_target, verb_of
from kubesim.cluster import Cluster
from kubesim.errors import ApiError
from kubesim.watch import Watcher
from kubesim.watch_http import OpenWatch, WatchSink, flushed, open_watch

_encode = msgspec.json.Encoder().encode
log = logging.getLogger(__name__)
_MAX_HEAD = 64 * 1024
_PREFIX = "/clusters/"
_HANDED_OFF = ("transfer-encoding", "expect", "upgrade")
_FAST_METHODS = frozenset(("GET", "POST", "PUT", "PATCH", "DELETE"))  # HEAD's answer has no body: aiohttp's
_STATUS_LINES = {s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\n".encode() for s in HTTPStatus}

Answer = tuple[int, bytes, Mapping[str, str] | None]
# Header lines parsed before, as (lower-case name, value): a client sends the same few lines with
# every request (kq's are built once per content type), and parsing them was ~a fifth of a request.
_header_lines: dict[str, tuple[str, str]] = {}
_HEADER_LINES = 4096  # distinct lines kept (Content-Length has one per body size); then it starts over
_WATCH_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


@dataclass(frozen=True, slots=True)
class WatchStart:
    """A watch opened by FastPath.answer, for the connection to stream."""

    cluster: Cluster
    opened: OpenWatch


class FastPath:
    def __init__(self, api: ApiServer, clusters: Mapping[str, Cluster]) -> None:
        self._api = api
        self._clusters = clusters

    async def stream(self, sink: WatchSink, start: WatchStart) -> None:
        await self._api.stream_watch(sink, start.cluster, start.opened)

    def answer(self, method: str, target: str, headers: Mapping[str, str],
               body: bytes) -> Answer | WatchStart | None:
        """(status, JSON body, extra headers), or None: aiohttp's path must take this request.
        `headers`: names in lower case."""
        if method not in _FAST_METHODS:
            return None
        path, _, qs = target.partition("?")
        if "%" in path:
            path = unquote(path)
        if not path.startswith(_PREFIX):
            return None
        name, slash, tail = path[len(_PREFIX):].partition("/")
        cluster = self._clusters.get(name)
        if (not slash or cluster is None or cluster.disconnected or cluster.disconnected_agent is not None
                or cluster.faults.latency_ms):
            return None
        query: MultiDict[str] = MultiDict(parse_qsl(qs, keep_blank_values=True)) if qs else MultiDict()
        try:
            user = cluster.authn.user_of(headers.get("user-agent"), headers.get("authorization"))
            parsed = parse_target(tail.strip("/").split("/"), path)
            if not isinstance(parsed, Target):
                return None
            verb = verb_of(method, parsed, query)
            self._api.admit(cluster, user, parsed, verb)
            if verb == "watch":
                return WatchStart(cluster, open_watch(cluster, parsed.rt, parsed.ns, query,
                                                      headers.get("user-agent", "")))
            status, data = self._api.plain(cluster, parsed, verb, query, headers.get("content-type"), body)
            return status, data, None
        except ApiError as e:
            return e.code, _encode(e.status()), e.headers
        except Exception:  # a kubesim bug: answered 500 as aiohttp would, the connection kept
            log.exception("kubesim: error answering %s %s", method, target)
            return 500, _encode({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                 "message": "kubesim internal error", "reason": "InternalError", "code": 500}), None


def _response(status: int, body: bytes, extra: Mapping[str, str] | None) -> bytes:
    head = _STATUS_LINES.get(status) or f"HTTP/1.1 {status} Unknown\r\n".encode()
    lines = [head, b"Content-Type: application/json\r\nContent-Length: ", str(len(body)).encode(), b"\r\n"]
    if extra:
        lines.extend(f"{k}: {v}\r\n".encode() for k, v in extra.items())
    lines.append(b"\r\n")
    lines.append(body)
    return b"".join(lines)


class FrontProtocol(asyncio.Protocol):
    """One client connection: answered here until a request needs aiohttp, then forwarded to it."""

    def __init__(self, fast: FastPath, make_handler: Callable[[], Any], live: set[FrontProtocol]) -> None:
        self._fast = fast
        self._make_handler = make_handler
        self._live = live
        self._buf = bytearray()
        self._inner: Any = None  # the aiohttp RequestHandler, once handed off
        # The hand-off or a watch's start, due after the answers before it are written.
        self._pending: Callable[[], None] | None = None
        self._watch: _Sink | None = None  # the watch being streamed on this connection
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport subclass
        self._live.add(self)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)
            return
        self._buf += data
        if self._watch is not None:
            return  # served once the watch has ended
        # Pipelined requests read together are answered with one write (one send for them all).
        out: list[bytes] = []
        while self._inner is None and self._buf:
            answer = self._serve_one()
            if answer is None:
                break
            out.append(answer)
        if out:
            assert self.transport is not None
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))
        if self._pending is not None:
            self._pending()

    def _serve_one(self) -> bytes | None:
        """The answer to the first buffered request; None when it is not complete yet or must be
        handed off (then self._pending hands it off once the answers before it are written)."""
        buf = self._buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > _MAX_HEAD:
                self._pending = self._hand_off
            return None
        request_line, _, rest = buf[:end].decode("latin-1").partition("\r\n")
        method, _, tail = request_line.partition(" ")
        target, _, version = tail.partition(" ")
        if version != "HTTP/1.1" or " " in target:
            self._pending = self._hand_off
            return None
        headers: dict[str, str] = {}
        for line in rest.split("\r\n") if rest else ():
            parsed = _header_lines.get(line)
            if parsed is None:
                name, sep, value = line.partition(":")
                if not sep or not name or name[-1] in " \t":
                    self._pending = self._hand_off
                    return None
                parsed = (name.lower(), value.strip())
                if len(_header_lines) >= _HEADER_LINES:
                    _header_lines.clear()
                _header_lines[line] = parsed
            key, value = parsed
            # A repeated header is its values joined, as HTTP reads it (a doubled Content-Length is then
            # not a number, and aiohttp answers it).
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        length = headers.get("content-length", "0")
        if (any(h in headers for h in _HANDED_OFF) or headers.get("connection", "").lower() == "close"
                or not length.isdigit()):
            self._pending = self._hand_off
            return None
        total = end + 4 + int(length)
        if len(buf) < total:
            return None
        answer = self._fast.answer(method, target, headers, bytes(buf[end + 4:total]))
        if answer is None:
            self._pending = self._hand_off
            return None
        del buf[:total]
        if isinstance(answer, WatchStart):
            self._pending = functools.partial(self._start_watch, answer)
            return None
        return _response(*answer)

    def _start_watch(self, start: WatchStart) -> None:
        self._pending = None
        assert self.transport is not None
        sink = _Sink(self.transport, start.opened.watcher)
        self._watch = sink
        task = asyncio.get_running_loop().create_task(self._fast.stream(sink, start))
        task.add_done_callback(self._watch_ended)

    def _watch_ended(self, task: asyncio.Task[None]) -> None:
        self._watch = None
        if not task.cancelled() and (e := task.exception()) is not None:
            log.error("kubesim: watch failed", exc_info=e)
            if self.transport is not None:
                self.transport.abort()
            return
        if self.transport is not None and not self.transport.is_closing() and self._buf:
            self.data_received(b"")  # what the client sent meanwhile

    def _hand_off(self) -> None:
        self._pending = None
        handler = self._make_handler()
        self._inner = handler
        handler.connection_made(self.transport)
        if self._buf:
            data, self._buf = bytes(self._buf), bytearray()
            handler.data_received(data)

    def eof_received(self) -> bool | None:
        if self._inner is not None:
            return self._inner.eof_received()
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._live.discard(self)
        if self._inner is not None:
            self._inner.connection_lost(exc)
        if self._watch is not None:
            self._watch.lost()

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()
        if self._watch is not None:
            self._watch.pause()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()
        if self._watch is not None:
            self._watch.resume()

    def close(self) -> None:
        """Server shutdown: a connection still served here is closed; aiohttp closes its own."""
        if self._inner is None and self.transport is not None:
            self.transport.close()


class _Sink:
    """A watch's answer framed in chunks straight onto the transport (watch_http.WatchSink)."""

    __slots__ = ("_tr", "_watcher", "_paused", "_drained")

    def __init__(self, transport: asyncio.Transport, watcher: Watcher | None) -> None:
        self._tr = transport
        self._watcher = watcher
        self._paused = False
        self._drained: asyncio.Future[None] | None = None

    async def start(self) -> None:
        self._tr.write(_WATCH_HEAD)

    async def write(self, data: bytes) -> None:
        if self._tr.is_closing():
            raise ConnectionResetError("the client went away")
        if data:
            self._tr.write(b"%x\r\n%b\r\n" % (len(data), data))
        if self._paused:  # the client reads slower than we write: wait for the transport to drain
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained

    async def end(self) -> None:
        self._tr.write(b"0\r\n\r\n")

    def drop(self) -> None:
        self._tr.abort()

    async def flushed(self) -> None:
        await flushed(self._tr)

    def gone(self) -> bool:
        return self._tr.is_closing()

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def lost(self) -> None:
        """The connection closed: the watch ends at once (not at its next write or check)."""
        if self._watcher is not None:
            self._watcher.close("gone")
        self.resume()
