"""nats-py's client with a flusher that lingers a moment before it writes.

nats-py writes what was published to the socket once per wake-up of its flusher task: a publish
wakes the flusher, which runs on the next turn of the event loop. A busy service publishes from
many tasks in many turns (a command group's outcome, a mirror round, a consumer's acks and pull
requests), so most writes carried a message or two: the socket writes were ~15 % of the watcher's
and of admission's CPU (py-spy, session 6), and each is a wake-up of nats-server too. Lingering
`LINGER_S` before writing lets what is published meanwhile go in the same write: at most one
write per linger, a delay far below any hop's other costs. pyproject.toml pins nats-py's minor
version: `_flusher` is the library's own loop (2.16), only the linger is added.

`publish_many` puts many messages on the pending list in one call, the wire format built as
nats-py's `publish` builds it (same checks: subject, header keys, CR/LF in values, sizes) but once
per message instead of a coroutine call, a header key regex and a flush kick per message: a
batch's messages were ~5 % of the watcher's CPU in `Client.publish` (py-spy, session 7).

`subscribe_direct` hands each message of a subscription to a plain function as the parser reads
it (subject and payload), without nats-py's Msg object, its queue and a task's turn per message:
for publish_batch's acks, one message per message published. `subscribe_messages` does the same
with the whole Msg (headers parsed): a pull consumer's messages reach its buffer in the turn that
read them, not one turn later through nats-py's task per subscription (a turn of a busy loop is
milliseconds, and every hop of a workload's round trip is a pull).

`_process_headers` reads a plain header block (no inline status) as nats-py's does, a name read
once: every mirror record carries four headers, and nats-py's per-line key decode and whitespace
scan were ~3.5 % of admission's CPU in large-scale (py-spy, session 11).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence

from nats import errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

LINGER_S = 0.001
_SUBJECT_INVALID = re.compile(r"[ \t\r\n]")  # as nats-py's publish: CR/LF could inject protocol commands
_HEADER_KEY = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
_KEYS: dict[str, str] = {}  # header key -> "Key: " (stripped and checked; "" for an empty key): keys are few


_HDR_LINE = b"NATS/1.0\r\n"
_NAMES: dict[bytes, str | None] = {}  # header name as read -> its key (None: one nats-py skips); names are few
_ANY_SPACE = re.compile(r"\s")  # str.isspace's characters, as nats-py tests each one of a key


def _header_name(raw: bytes) -> str | None:
    try:
        key: str | None = raw.strip().decode("ascii")
    except UnicodeDecodeError:
        key = None
    if key is not None and _ANY_SPACE.search(key):
        key = None
    if len(_NAMES) < 1024:
        _NAMES[raw] = key
    return key


def parse_header_block(block: bytes) -> dict[str, str] | None:
    """A header block without an inline status (it starts "NATS/1.0\\r\\n"), as nats-py's
    Client._process_headers reads it."""
    out: dict[str, str] = {}
    for line in block[len(_HDR_LINE):].split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        key = _NAMES[name] if name in _NAMES else _header_name(name)
        if key is not None:
            out[key] = value.strip().decode("utf-8", "replace")
    return out or None


def _key_text(key: str) -> str:
    k = key.strip()
    if k and not _HEADER_KEY.fullmatch(k):
        raise errors.BadHeaderError(k)
    text = k + ": " if k else ""  # (nats-py skips an empty key)
    if len(_KEYS) < 1024:
        _KEYS[key] = text
    return text


def header_block(headers: Mapping[str, str]) -> bytes:
    """The NATS/1.0 header block of a message, byte for byte as nats-py's publish writes it."""
    out = "NATS/1.0\r\n"
    for k, v in headers.items():
        if key := _KEYS.get(k) or _key_text(k):
            v = v.strip()
            if "\r" in v or "\n" in v:  # (rare: translate is the slow part of a header)
                v = v.translate(_VALUE_NEWLINES)
            out += key + v + "\r\n"
    return (out + "\r\n").encode()


DirectHandler = Callable[[str, bytes], None]  # (subject, payload); headers are not read
MsgHandler = Callable[[Msg], None]


class LingeringClient(Client):
    _direct: dict[int, DirectHandler] | None = None
    _direct_msgs: dict[int, MsgHandler] | None = None

    async def subscribe_direct(self, subject: str, handler: DirectHandler) -> None:
        """Every message on `subject` to `handler` as it is read, for as long as the connection lives
        (resubscribed on reconnect as any subscription). The handler must not block."""
        sub = await self.subscribe(subject)
        if self._direct is None:
            self._direct = {}
        self._direct[sub._id] = handler

    async def subscribe_messages(self, subject: str, handler: MsgHandler) -> Subscription:
        """Every message on `subject` to `handler` as it is read, until the subscription is
        unsubscribed or drained (resubscribed on reconnect). The handler must not block."""
        sub = await self.subscribe(subject)
        if self._direct_msgs is None:
            self._direct_msgs = {}
        self._direct_msgs[sub._id] = handler
        return sub

    def _remove_sub(self, sid: int, max_msgs: int = 0) -> None:
        super()._remove_sub(sid, max_msgs)
        if self._direct_msgs:
            self._direct_msgs.pop(sid, None)

    async def _process_msg(self, sid: int, subject: bytes, reply: bytes, data: bytes,
                           headers: bytes | None) -> None:
        handler = self._direct.get(sid) if self._direct else None
        if handler is not None:
            self.stats["in_msgs"] += 1
            self.stats["in_bytes"] += len(data)
            handler(subject.decode(), data)
            return
        whole = self._direct_msgs.get(sid) if self._direct_msgs else None
        if whole is not None:
            self.stats["in_msgs"] += 1
            self.stats["in_bytes"] += len(data)
            whole(self._build_message(sid, subject, reply, data, await self._process_headers(headers)))
            return
        await super()._process_msg(sid, subject, reply, data, headers)  # type: ignore[arg-type]

    async def _process_headers(self, headers: bytes | None) -> dict[str, str] | None:
        if headers and headers.startswith(_HDR_LINE):
            return parse_header_block(headers)
        return await super()._process_headers(headers)  # an inline status, or nothing

    async def _flusher(self) -> None:
        assert self._transport, "Client.connect must be called first"
        assert self._flush_queue, "Client.connect must be called first"
        while True:
            if not self.is_connected or self.is_connecting:
                break
            future: asyncio.Future[None] = await self._flush_queue.get()
            try:
                await asyncio.sleep(LINGER_S)  # what is published meanwhile joins this write
                if self._pending_data_size > 0:
                    self._transport.writelines(self._pending[:])
                    self._pending = []
                    self._pending_data_size = 0
                    await self._transport.drain()  # type: ignore[no-untyped-call]  # nats-py leaves it unannotated
            except OSError as e:
                await self._error_cb(e)
                await self._process_op_err(e)
                break
            except (asyncio.CancelledError, RuntimeError, AttributeError):
                break
            finally:
                if not future.done():
                    future.set_result(None)

    async def publish_many(self, msgs: Sequence[tuple[str, bytes, str, Mapping[str, str]]]) -> None:
        """Publish (subject, payload, reply, headers) messages as `publish` would one by one."""
        if self.is_closed:
            raise errors.ConnectionClosedError
        if self.is_draining_pubs:
            raise errors.ConnectionDrainingError
        cmds: list[bytes] = []
        size = 0
        for subject, payload, reply, headers in msgs:
            if not subject or _SUBJECT_INVALID.search(subject) or (reply and _SUBJECT_INVALID.search(reply)):
                raise errors.BadSubjectError
            if len(payload) > self._max_payload:
                raise errors.MaxPayloadError
            hdr = header_block(headers)
            cmd = b"HPUB %s %s %d %d\r\n%s%s\r\n" % (
                subject.encode(), reply.encode(), len(hdr), len(hdr) + len(payload), hdr, payload)
            cmds.append(cmd)
            size += len(cmd)
            self.stats["out_msgs"] += 1
            self.stats["out_bytes"] += len(payload)
        if not self.is_connected and (self._max_pending_size <= 0
                                      or size + self._pending_data_size > self._max_pending_size):
            raise errors.OutboundBufferLimitError
        self._pending.extend(cmds)
        self._pending_data_size += size
        if self._max_pending_size > 0 and self._pending_data_size > self._max_pending_size:
            await self._flush_pending(force_flush=True)
        elif self._flush_queue is not None and self._flush_queue.empty():
            await self._flush_pending()
