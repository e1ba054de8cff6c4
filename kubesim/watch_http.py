"""A watch on the wire: what it starts from, then its events as a chunked JSON stream until it ends.

`open_watch` does everything that can refuse the request (a 400 for a bad parameter) and takes what
happened before and the live feed in the same loop turn, so nothing is lost between them.
`stream_watch` then writes to a sink: aiohttp's StreamResponse (`ResponseSink`), or the connection
front's transport directly (kubesim/fast_http.py), which spares aiohttp's writer per write.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import msgspec
from aiohttp import web

from kubesim.cluster import Cluster
from kubesim.errors import ApiError, bad_request
from kubesim.resources import ResourceType
from kubesim.selectors import matcher, parse_field_selector, parse_label_selector
from kubesim.watch import BOOKMARK, ERROR, Alarm, Watcher, event_line

_encode = msgspec.json.Encoder().encode
_TRUE = ("true", "1")

# An idle watch without bookmarks looks this often whether its client went away. Each look is a
# timer and a wake-up: at 1 s, the ~700 watches of a manager and 20 workers cost kubesim 30 ms of
# CPU a second doing nothing.
_GONE_CHECK_S = 5.0


class WatchSink(Protocol):
    """Where a watch's answer goes: a 200 with a chunked JSON body."""

    async def start(self) -> None: ...

    async def write(self, data: bytes) -> None: ...

    async def end(self) -> None: ...

    def drop(self) -> None:
        """Cut the connection without finishing the answer (a partitioned API server)."""

    async def flushed(self) -> None:
        """Return once what was written has left (or cannot)."""

    def gone(self) -> bool:
        """The client went away."""


@dataclass(slots=True)
class OpenWatch:
    rt: ResourceType
    watcher: Watcher | None  # None: the answer is `initial` alone (410 Gone as an ERROR event)
    initial: bytes  # the lines before the live feed
    bookmarks: bool
    timeout_s: float | None


def open_watch(cluster: Cluster, rt: ResourceType, ns: str | None, q: Mapping[str, str], agent: str) -> OpenWatch:
    """The watch's start (raises ApiError for a bad request): past events and the live feed taken
    in the same loop turn."""
    store = cluster.store
    if q.get("dryRun"):
        raise bad_request("kubesim does not support dryRun")
    match = matcher(parse_label_selector(q.get("labelSelector")), parse_field_selector(q.get("fieldSelector"), rt))
    bookmarks = q.get("allowWatchBookmarks", "").lower() in _TRUE
    try:
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else None
    except ValueError:
        raise bad_request(f"timeoutSeconds: not a number: {q.get('timeoutSeconds')!r}") from None
    if timeout is not None and timeout <= 0:
        timeout = None  # 0 means "the server's default", which here is no limit
    rv_text = q.get("resourceVersion", "")
    if rv_text in ("", "0"):
        initial = b"".join([event_line("ADDED", e.raw) for e in store.list(rt, ns, match)])
    else:
        try:
            after = int(rv_text)
        except ValueError:
            raise bad_request(f"resourceVersion: not a valid resource version: {rv_text!r}") from None
        try:
            initial = b"".join(store.hub.replay(rt.key, ns, match, after, store.rv))
        except ApiError as e:  # 410 Gone arrives as an ERROR event on a 200 stream
            return OpenWatch(rt, None, event_line(ERROR, _encode(e.status())), bookmarks, timeout)
    return OpenWatch(rt, store.hub.open(rt.key, ns, match, agent), initial, bookmarks, timeout)


def bookmark(cluster: Cluster, rt: ResourceType) -> bytes:
    obj = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(cluster.store.rv)}}
    return event_line(BOOKMARK, _encode(obj))


async def stream_watch(sink: WatchSink, cluster: Cluster, opened: OpenWatch, *, bookmark_s: float,
                       flush_s: float) -> None:
    """Write the watch's answer until it times out, is closed (overflow, cut) or its client goes."""
    w, rt, bookmarks, timeout = opened.watcher, opened.rt, opened.bookmarks, opened.timeout_s
    if w is None:
        await sink.start()
        await sink.write(opened.initial)
        await sink.end()
        return
    store = cluster.store
    loop = asyncio.get_running_loop()
    alarm = Alarm(loop, w.wake)
    try:
        await sink.start()
        if opened.initial:
            await sink.write(opened.initial)
        deadline = loop.time() + timeout if timeout else None
        next_bookmark = loop.time() + bookmark_s
        # With bookmarks, each bookmark's write finds a client that went away: no extra wake-ups.
        next_check = math.inf if bookmarks else loop.time() + _GONE_CHECK_S
        flushed_at = -flush_s
        while True:
            if w.buf:
                # At most one write per flush interval: under load the events of a few ms go out
                # in one chunk (one syscall here, one read in the client); an idle watch writes at once.
                wait = flushed_at + flush_s - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                data = w.drain()
                if data:
                    await sink.write(data)
                flushed_at = loop.time()
                continue
            if w.closed is not None:
                break
            now = loop.time()
            if deadline is not None and now >= deadline:
                if bookmarks:
                    await sink.write(bookmark(cluster, rt))
                break
            if bookmarks and now >= next_bookmark:
                await sink.write(bookmark(cluster, rt))
                next_bookmark = now + bookmark_s
                continue
            if now >= next_check:
                if sink.gone():
                    return
                next_check = now + _GONE_CHECK_S
            alarm.ring_at(min(deadline or math.inf, next_bookmark if bookmarks else math.inf, next_check))
            w.wake.clear()  # nothing is buffered: only a new event or the alarm wakes us
            await w.wake.wait()
        why = w.closed
        if why in ("cut-mid", "disconnect"):
            if why == "cut-mid":
                half = bookmark(cluster, rt)
                await sink.write(half[: len(half) // 2])
                await sink.flushed()
            sink.drop()
            return
        if not sink.gone():
            await sink.end()
    except (ConnectionResetError, ConnectionError):
        pass  # the client is gone
    finally:
        alarm.cancel()
        store.hub.close(w)


class ResponseSink:
    """A watch answered through aiohttp (a request the connection front handed off)."""

    def __init__(self, request: web.BaseRequest) -> None:
        self.request = request
        self.resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        self.resp.enable_chunked_encoding()

    async def start(self) -> None:
        await self.resp.prepare(self.request)

    async def write(self, data: bytes) -> None:
        await self.resp.write(data)

    async def end(self) -> None:
        await self.resp.write_eof()

    def drop(self) -> None:
        if self.request.transport is not None:
            self.request.transport.abort()

    async def flushed(self) -> None:
        await flushed(self.request.transport)

    def gone(self) -> bool:
        tr = self.request.transport
        return tr is None or tr.is_closing()


async def flushed(tr: asyncio.BaseTransport | None) -> None:
    """Let a half-written chunk reach the client before the connection is cut (at most ~0.1 s)."""
    for _ in range(100):
        if tr is None or tr.is_closing() or tr.get_write_buffer_size() == 0:  # type: ignore[attr-defined]
            return
        await asyncio.sleep(0.001)
