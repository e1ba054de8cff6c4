"""Watch history and fan-out for one cluster.

Every committed change bumps the cluster's resourceVersion by exactly one and
appends exactly one event here, so the history is a contiguous run of
resourceVersions (floor, floor+len]: resuming from rv R replays the events
after R, and R < floor is 410 Gone, as on an API server whose watch cache
has moved past R.

Each open watch is a Watcher with a bounded buffer of encoded lines; a
watcher that falls too far behind is closed (cleanly, like the API server
does with slow consumers) and its client resumes from the last rv it read.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from kubesim.errors import gone

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"
_PREFIX = {t: b'{"type":"' + t.encode() + b'","object":' for t in (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR)}


def event_line(etype: str, raw: bytes) -> bytes:
    """One watch event on the wire: a JSON object and a newline."""
    return _PREFIX[etype] + raw + b"}\n"


@dataclass(slots=True)
class Event:
    rv: int
    rkey: str  # resource key (ResourceType.key)
    ns: str  # "" for cluster-scoped objects
    etype: str  # ADDED | MODIFIED | DELETED
    obj: Mapping[str, Any]  # the object after the change (for DELETED: its last state)
    prev: Mapping[str, Any] | None  # the object before a MODIFIED
    raw: bytes  # `obj` encoded
    prev_raw: bytes | None = None  # `prev` encoded
    line: bytes | None = None  # the watch line of `etype`, made once for all the watchers that get it

    def line_as(self, etype: str) -> bytes:
        if etype != self.etype:
            return event_line(etype, self.raw)  # a selector's view (ADDED / DELETED for a MODIFIED)
        if self.line is None:
            self.line = event_line(etype, self.raw)
        return self.line


class _Past:
    """An event in the history: only the encoded objects. The decoded ones stay with the live
    fan-out; a history of 100,000 decoded objects was most of kubesim's memory (and GC walks)."""

    __slots__ = ("rv", "rkey", "ns", "etype", "raw", "prev_raw")

    def __init__(self, ev: Event) -> None:
        self.rv, self.rkey, self.ns, self.etype = ev.rv, ev.rkey, ev.ns, ev.etype
        self.raw, self.prev_raw = ev.raw, ev.prev_raw if ev.etype == MODIFIED else None


Match = Callable[[Mapping[str, Any]], bool]
_decode = msgspec.json.Decoder().decode


def translate(ev: Event, match: Match | None) -> str | None:
    """The event type a watcher with this selector sees, or None when it sees nothing.

    With a selector, an object that starts matching arrives as ADDED and one that
    stops matching leaves as DELETED, as the API server's watch does.
    """
    if match is None:
        return ev.etype
    now = match(ev.obj)
    if ev.etype != MODIFIED:
        return ev.etype if now else None
    before = ev.prev is not None and match(ev.prev)
    if now:
        return MODIFIED if before else ADDED
    return DELETED if before else None


def _translate_past(p: _Past, match: Match | None) -> str | None:
    """translate() for a history event, decoding its objects only when a selector must see them."""
    if match is None:
        return p.etype
    now = match(_decode(p.raw))
    if p.etype != MODIFIED:
        return p.etype if now else None
    before = p.prev_raw is not None and match(_decode(p.prev_raw))
    if now:
        return MODIFIED if before else ADDED
    return DELETED if before else None


class Watcher:
    """One open watch: filters events and buffers their lines for the HTTP writer."""

    __slots__ = ("rkey", "ns", "match", "buf", "wake", "closed", "_limit", "agent")

    def __init__(self, rkey: str, ns: str | None, match: Match | None, limit: int, agent: str = "") -> None:
        self.rkey = rkey
        self.agent = agent  # the client's User-Agent (a partition may cut only some clients)
        self.ns = ns
        self.match = match
        self.buf: deque[bytes] = deque()
        self.wake = asyncio.Event()
        self.closed: str | None = None  # why: "overflow" | "cut" | "cut-mid" | "disconnect" | "gone" (client)
        self._limit = limit

    def offer(self, ev: Event) -> None:
        if self.closed is not None or (self.ns is not None and ev.ns != self.ns):
            return
        etype = translate(ev, self.match)
        if etype is None:
            return
        self.buf.append(ev.line_as(etype))
        if len(self.buf) > self._limit:
            # Too slow: end the watch; the client resumes from the last rv it has seen.
            self.buf.clear()
            self.close("overflow")
        self.wake.set()

    def close(self, why: str) -> None:
        if self.closed is None:
            self.closed = why
        self.wake.set()

    def drain(self) -> bytes:
        data = b"".join(self.buf)
        self.buf.clear()
        self.wake.clear()
        return data


class Alarm:
    """A watch's one timer (bookmark, timeout, client-gone check), set again only when its time
    changes or it has rung: an asyncio.timeout per wait made and cancelled a timer per event."""

    __slots__ = ("_loop", "_event", "_handle", "_at")

    def __init__(self, loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        self._loop = loop
        self._event = event
        self._handle: asyncio.TimerHandle | None = None
        self._at = 0.0

    def ring_at(self, at: float) -> None:
        if self._handle is not None:
            if self._at == at:
                return
            self._handle.cancel()
        self._at = at
        self._handle = self._loop.call_at(at, self._ring)

    def _ring(self) -> None:
        self._handle = None
        self._event.set()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class WatchHub:
    def __init__(self, history_size: int, buffer_limit: int = 10_000) -> None:
        self._history: deque[_Past] = deque(maxlen=max(1, history_size))
        self._floor = 0  # rv of the newest event no longer in the history
        self._watchers: dict[str, set[Watcher]] = {}
        self._buffer_limit = buffer_limit

    # --- publishing ---

    def publish(self, ev: Event) -> None:
        hist = self._history
        if len(hist) == hist.maxlen:
            self._floor = hist[0].rv
        hist.append(_Past(ev))
        for w in self._watchers.get(ev.rkey, ()):
            w.offer(ev)

    def expire(self, current_rv: int) -> None:
        """Forget all history: any resume from an older rv now gets 410."""
        self._history.clear()
        self._floor = current_rv

    # --- watching ---

    def replay(self, rkey: str, ns: str | None, match: Match | None, after: int, current: int) -> list[bytes]:
        """Lines for the events after rv `after`; 410 when they are no longer all known."""
        if after < self._floor:
            raise gone(f"too old resource version: {after} ({self._floor + 1})")
        if after >= current:
            return []
        out: list[bytes] = []
        start = after - self._floor
        for ev in itertools.islice(self._history, start, None):
            if ev.rkey != rkey or (ns is not None and ev.ns != ns):
                continue
            etype = _translate_past(ev, match)
            if etype is not None:
                out.append(event_line(etype, ev.raw))
        return out

    def open(self, rkey: str, ns: str | None, match: Match | None, agent: str = "") -> Watcher:
        w = Watcher(rkey, ns, match, self._buffer_limit, agent)
        self._watchers.setdefault(rkey, set()).add(w)
        return w

    def close(self, w: Watcher) -> None:
        ws = self._watchers.get(w.rkey)
        if ws is not None:
            ws.discard(w)

    def watchers(self) -> Iterable[Watcher]:
        return [w for ws in self._watchers.values() for w in ws]

    def cut_all(self, why: str, agent_prefix: str = "") -> int:
        """Close every open watch (only those of clients whose User-Agent starts with agent_prefix, if given)."""
        ws = [w for w in self.watchers() if w.agent.startswith(agent_prefix)]
        for w in ws:
            w.close(why)
        return len(ws)
