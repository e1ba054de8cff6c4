"""One active writer per partition: a lease in the KQ_LEASES KV bucket.

- acquire: create the key only if it has no value (expected last subject sequence);
  the value's revision at creation is the holder's `epoch`, strictly increasing
  across holders because it is a stream sequence.
- keep alive: rewrite the value with the expected revision; each write carries
  `Nats-TTL`, so a holder that stops renewing loses the key after `ttl` seconds
  (per-message TTL, nats-server >= 2.11; whole seconds, at least 1).
- lost: a rewrite refused (someone else holds it) or no successful renewal within
  the TTL -> `lost` is set and the owner must stop deciding at once.
- re-take: a renewal that reaches the server just after our key expired finds it free; if no
  other holder can have held it since our last write, we write it again with the same epoch
  (see `_retake`) instead of losing the term.
- standby: polls until the key is free, then acquires with a higher epoch.
- renewals on a thread and connection of their own (`own_connection`): on the holder's loop a
  renewal waited for its long synchronous stretches (admission's first decision round after
  rebuilding 100,000 workloads: seconds of CPU, tens of seconds on a loaded machine) and for its
  connection's backlog (nats-py handles one connection's messages in order), and the lease lapsed
  right after the rebuild it was held for, again each term. Safety is unchanged (epochs fence
  commands; the key still lapses when the process stops); a wedged loop stops them after
  `stall_limit_s`.

nats-py's KeyValue.update() cannot carry a TTL, so we publish to the bucket's
subjects ourselves; the values stay readable with the ordinary KV API.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec
import nats
import nats.errors
from nats.js.errors import APIError, NotFoundError

from kq import subjects
from kq.clock import SYSTEM_CLOCK, Clock
from kq.runtime.bus import connect_options
from kq.runtime.streams import LEASE_BUCKET_MAX_AGE_S, LEASE_PREFIX, LEASE_STREAM

if TYPE_CHECKING:
    from nats.js import JetStreamContext

    from kq.runtime.bus import Bus

_EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
_TTL = "Nats-TTL"
_KV_OP = "KV-Operation"
_MARKER_REASON = "Nats-Marker-Reason"  # a server-written subject delete marker (TTL/max-age expiry)
_WRONG_LAST_SEQUENCE = (10071, 10164)
_STALL_LIMIT_TTLS = 12  # own_connection: renewals stop after the holder's loop ran nothing for this many TTLs
_THREAD_SLICE_S = 0.1  # the renewal thread looks at its stop flag (and beats the holder's loop) this often


class LeaseValue(msgspec.Struct, frozen=True, kw_only=True):
    holder: str
    service: str
    partition: str
    epoch: int  # 0 in the creating write (its revision becomes the epoch), then the epoch
    renewed_at: str


_decoder = msgspec.json.Decoder(LeaseValue)
_encoder = msgspec.json.Encoder()


class LeaseWindow:
    """How long a lease we wrote stays ours, on the monotonic clock: a write sent at `t` holds
    until t + ttl - margin (we stop deciding a little before the server expires the key)."""

    def __init__(self, ttl: float, renew_interval: float) -> None:
        self.ttl = ttl
        self.renew_interval = renew_interval
        self.margin = min(0.5, ttl / 10)
        self.valid_until = 0.0
        self.written_at = 0.0

    def written(self, sent_at: float) -> None:
        self.written_at = sent_at
        self.valid_until = sent_at + self.ttl - self.margin

    def valid(self, now: float) -> bool:
        return now < self.valid_until

    def next_renewal_in(self, now: float) -> float:
        """Wait before the next renewal: the interval, or sooner when the window closes before it
        (half the time left, so a failed attempt leaves room for another)."""
        wait = self.renew_interval
        if now + wait > self.valid_until:
            wait = max(0.05, min(wait, self.valid_until - now) / 2)
        return wait


class Lease:
    def __init__(
        self,
        bus: Bus,
        service: str,
        partition: str,
        holder: str,
        ttl: int = 10,
        *,
        renew_interval: float | None = None,
        poll_interval: float | None = None,
        clock: Clock = SYSTEM_CLOCK,
        own_connection: bool = False,
        stall_limit_s: float | None = None,
    ) -> None:
        if not isinstance(ttl, int) or ttl < 1 or ttl * 2 > LEASE_BUCKET_MAX_AGE_S:
            raise ValueError(f"lease ttl must be whole seconds in [1, {int(LEASE_BUCKET_MAX_AGE_S // 2)}], got {ttl!r}")
        self._bus = bus
        self.service = service
        self.partition = partition
        self.holder = holder
        self.ttl = ttl
        self.key = subjects.lease_key(service, partition)
        self.subject = LEASE_PREFIX + self.key
        self.renew_interval = renew_interval if renew_interval is not None else ttl / 3
        self.poll_interval = poll_interval if poll_interval is not None else max(0.1, ttl / 5)
        self.clock = clock
        self.window = LeaseWindow(ttl, self.renew_interval)
        self.epoch: int | None = None
        self.revision = 0
        self.lost = asyncio.Event()
        self.own_connection = own_connection  # keep_alive renews on a thread and NATS connection of its own
        self.stall_limit_s = stall_limit_s if stall_limit_s is not None else _STALL_LIMIT_TTLS * ttl
        self._renewing_js: JetStreamContext | None = None  # that connection's, while keep_alive runs
        self._renewing_thread = 0  # the thread that may use it
        self._holder_loop: asyncio.AbstractEventLoop | None = None  # while renewals run on a thread
        self._gone = False  # lost, as the renewal thread knows it (`lost` is set on the holder's loop)

    @property
    def _js(self) -> JetStreamContext:
        """The renewal thread's own connection on that thread, the bus's anywhere else."""
        if self._renewing_js is not None and threading.get_ident() == self._renewing_thread:
            return self._renewing_js
        return self._bus.js

    # -- state -------------------------------------------------------------------------------

    def is_held(self) -> bool:
        return self.epoch is not None and not self._is_lost() and self.window.valid(self.clock.monotonic())

    async def current(self) -> tuple[int, LeaseValue] | None:
        """The current holder's (revision, value), or None when the lease is free."""
        rev, value = await self._last()
        return (rev, value) if value is not None else None

    async def _last(self) -> tuple[int, LeaseValue | None]:
        """Revision of the key's last message (0 if none) and its value (None if free/deleted)."""
        try:
            raw = await self._js.get_msg(LEASE_STREAM, subject=self.subject, direct=True)
        except NotFoundError:
            return 0, None
        headers = raw.headers or {}
        if headers.get(_KV_OP) in ("DEL", "PURGE") or not raw.data:
            return int(raw.seq or 0), None
        return int(raw.seq or 0), _decoder.decode(raw.data)

    def _value(self, epoch: int) -> bytes:
        now = datetime.fromtimestamp(self.clock.now(), UTC).isoformat(timespec="milliseconds")
        return _encoder.encode(LeaseValue(holder=self.holder, service=self.service, partition=self.partition,
                                          epoch=epoch, renewed_at=now))

    async def _write(self, expected: int, epoch: int) -> int | None:
        """Conditional write with TTL; the new revision, or None when the expectation failed."""
        headers = {_EXPECTED_LAST_SUBJECT_SEQ: str(expected), _TTL: f"{self.ttl}s"}
        try:
            ack = await self._js.publish(self.subject, self._value(epoch), headers=headers)
        except APIError as e:
            if e.err_code in _WRONG_LAST_SEQUENCE:
                return None
            raise
        return ack.seq

    # -- acquire / renew / release ------------------------------------------------------------

    async def try_acquire(self) -> bool:
        last, value = await self._last()
        if value is not None:
            return False
        sent = self.clock.monotonic()
        rev = await self._write(last, 0)
        if rev is None:
            return False
        self.epoch = rev
        self.revision = rev
        self.window.written(sent)
        self.lost.clear()
        self._gone = False
        return True

    async def acquire(self, timeout: float | None = None) -> int:
        """Wait until this holder has the lease (standby polling); returns the epoch."""
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        while True:
            try:
                if await self.try_acquire():
                    assert self.epoch is not None
                    return self.epoch
            except (TimeoutError, nats.errors.TimeoutError, nats.errors.ConnectionReconnectingError):
                pass
            if deadline is not None and self.clock.monotonic() > deadline:
                held = await self.current()
                raise TimeoutError(f"lease {self.key} not acquired within {timeout}s; held by {held}")
            await self.clock.sleep(self.poll_interval)

    async def renew(self) -> bool:
        """Extend the lease; False (and `lost` set) when it is gone."""
        if self.epoch is None or self._is_lost():
            return False
        sent = self.clock.monotonic()
        refused = "another holder wrote the lease"
        try:
            rev = await self._write(self.revision, self.epoch)
            if rev is None:
                last, value = await self._last()
                if value is None:
                    rev, refused = await self._retake(last)
                elif value.holder == self.holder and value.epoch == self.epoch:
                    # Our previous renewal was stored although its ack was lost: adopt it.
                    self.revision = last
                    rev = await self._write(self.revision, self.epoch)
                else:
                    refused = f"another holder holds the lease ({value.holder}, epoch {value.epoch})"
        except (TimeoutError, nats.errors.Error):
            rev = -1  # unknown: maybe applied; we keep trying until our TTL would have run out
        if rev is None:
            self._lose(refused)
            return False
        if rev > 0:
            self.revision = rev
            self.window.written(sent)
            return True
        if not self.window.valid(self.clock.monotonic()):
            self._lose("no successful renewal within the TTL")
            return False
        return True

    async def _retake(self, last: int) -> tuple[int | None, str]:
        """Our key expired (TTL) before this renewal reached the server: write it again with the
        same epoch, or say why not (the new revision, or None and the reason).

        Safe because another holder's term after our expiry always leaves a trace we check:
        - holding now: its value is the key's last message (we saw none), or it writes before our
          conditional write, which then fails;
        - released: its delete marker stays (no TTL; bucket max age >> 2 * ttl), and we refuse
          any message on our subject after our revision but our own value or a server expiry marker;
        - expired too: impossible within 2 * ttl of our last write: ours expired no earlier than
          `written_at + ttl` (the server got it after we sent it), a later holder's value lives
          another ttl. Our write is acknowledged no earlier than the server applied it, so an ack
          received before `written_at + 2 * ttl` (our clock) proves no such term fits before it.
        Deciding in the gap: owners do not consult `window.valid` while deciding; they stop when
        `keep_alive` returns (a refused or late renewal sets `lost`; `hold` cancels the term).
        So a holder whose renewal is late keeps deciding until this call either way; the re-take
        only continues its term when no other holder can have decided concurrently."""
        assert self.epoch is not None
        deadline = self.window.written_at + 2 * self.ttl
        if self.clock.monotonic() >= deadline:
            return None, "the lease expired (TTL) too long ago to know that no other holder took it"
        other = await self._written_since(self.revision)
        if other is not None:
            return None, f"the lease expired (TTL) and {other}"
        rev = await self._write(last, self.epoch)
        if rev is None:
            return None, "the lease expired (TTL) and another holder took it"
        if self.clock.monotonic() >= deadline:  # acknowledged too late to vouch for the gap: hand it back
            self.revision = rev
            await self._delete()
            return None, "the lease expired (TTL) too long ago to know that no other holder took it"
        self._bus.log.warning("lease re-taken after expiry; no other holder", key=self.key, epoch=self.epoch,
                              holder=self.holder, revision=rev)
        return rev, ""

    async def _written_since(self, revision: int) -> str | None:
        """What on our subject after `revision` shows another writer (None: only our own value
        with our epoch, or server expiry markers)."""
        seq = revision + 1
        while True:
            try:
                raw = await self._js.get_msg(LEASE_STREAM, seq=seq, subject=self.subject, next=True, direct=True)
            except NotFoundError:
                return None
            seq = int(raw.seq or seq) + 1
            headers = raw.headers or {}
            if headers.get(_KV_OP) in ("DEL", "PURGE"):
                return f"was released or purged since (revision {raw.seq})"
            if not raw.data:
                if headers.get(_MARKER_REASON):
                    continue
                return f"an empty value was written since (revision {raw.seq})"
            value = _decoder.decode(raw.data)
            if value.holder != self.holder or value.epoch != self.epoch:
                return f"{value.holder} wrote it since (revision {raw.seq})"

    def _lose(self, why: str) -> None:
        if not self.lost.is_set() and not self._gone:
            self._bus.log.warning("lease lost", key=self.key, epoch=self.epoch, holder=self.holder, reason=why)
        self._gone = True
        if self._holder_loop is not None and asyncio.get_running_loop() is not self._holder_loop:
            with contextlib.suppress(RuntimeError):  # the holder's loop is closed: nobody left to tell
                self._holder_loop.call_soon_threadsafe(self.lost.set)  # asyncio.Event: set on its own loop
        else:
            self.lost.set()

    def _is_lost(self) -> bool:
        return self._gone or self.lost.is_set()

    async def keep_alive(self) -> None:
        """Renew until the lease is lost (then return, with `lost` set)."""
        if self.own_connection:
            await self._keep_alive_on_a_thread()
            return
        await self._renew_until_lost(self.clock.sleep, lambda: True)

    async def _renew_until_lost(self, sleep: Callable[[float], Awaitable[None]], may_renew: Callable[[], bool]) -> None:
        while not self._is_lost():
            await sleep(self.window.next_renewal_in(self.clock.monotonic()))
            if self._is_lost():
                return
            if not may_renew():
                if not self.window.valid(self.clock.monotonic()):
                    self._lose(f"the holder's loop stalled longer than {self.stall_limit_s}s: renewals stopped")
                    return
                continue
            if not await self.renew() or not self.window.valid(self.clock.monotonic()):
                self._lose("lease expired before renewal")
                return

    # -- renewals on a thread of their own (own_connection) ----------------------------------------

    async def _keep_alive_on_a_thread(self) -> None:
        """Renewals on a thread with its own event loop and NATS connection: a long synchronous
        stretch of the holder's loop (a rebuild, a decision round over 100,000 workloads) or its
        connection's backlog no longer delays them (the interpreter switches threads every few
        ms). While the holder's loop has not run for `stall_limit_s` (wedged), they stop: the
        lease lapses, as it does at once for a process that is stopped or dead."""
        loop = asyncio.get_running_loop()
        self._holder_loop, self._gone = loop, False
        ended = asyncio.Event()
        stop = threading.Event()
        beat = [self.clock.monotonic()]  # when the holder's loop last ran a callback of ours

        def beat_now() -> None:
            beat[0] = self.clock.monotonic()

        def main() -> None:
            try:
                asyncio.run(self._thread_renewals(loop, stop, beat_now, beat))
            except Exception as e:  # noqa: BLE001 - a renewal thread that fails: we no longer know we hold it
                self._lose(f"renewal thread failed: {e!r}")
            finally:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(ended.set)

        thread = threading.Thread(target=main, name=f"lease:{self.key}", daemon=True)
        thread.start()
        try:
            await ended.wait()
        finally:
            stop.set()  # cancelled (the term ends) or lost: wait for a renewal in flight before any release
            while thread.is_alive():
                await asyncio.sleep(0.02)
            self._holder_loop = None

    async def _thread_renewals(self, holder_loop: asyncio.AbstractEventLoop, stop: threading.Event,
                               beat_now: Callable[[], None], beat: list[float]) -> None:
        async def sleep(seconds: float) -> None:  # in slices: `stop` is a thread's event
            until = time.monotonic() + seconds
            while not stop.is_set() and (left := until - time.monotonic()) > 0:
                with contextlib.suppress(RuntimeError):
                    holder_loop.call_soon_threadsafe(beat_now)
                await asyncio.sleep(min(left, _THREAD_SLICE_S))
            if stop.is_set():
                raise asyncio.CancelledError

        def may_renew() -> bool:
            return self.clock.monotonic() - beat[0] < self.stall_limit_s

        with contextlib.suppress(asyncio.CancelledError):
            async with self._renewal_connection():
                await self._renew_until_lost(sleep, may_renew)

    @contextlib.asynccontextmanager
    async def _renewal_connection(self) -> AsyncIterator[None]:
        """The renewal thread's own connection, opened again until it connects (a renewal needs
        it: the shared one belongs to the holder's loop); meanwhile the window runs out."""
        bus = self._bus
        while True:
            nc = nats.NATS()
            try:
                async with asyncio.timeout(self.renew_interval):
                    await nc.connect(bus.config.servers(), name=f"{bus.name}-{bus.instance}-lease",
                                     max_reconnect_attempts=-1, reconnect_time_wait=1, allow_reconnect=True,
                                     **connect_options(bus.config, bus.name))
                break
            except (TimeoutError, OSError, nats.errors.Error) as e:
                with contextlib.suppress(Exception):
                    await nc.close()
                if not self.window.valid(self.clock.monotonic()):
                    self._lose(f"no connection for renewals: {e!r}")
                    raise asyncio.CancelledError from e
        self._renewing_js, self._renewing_thread = nc.jetstream(timeout=bus.publish_timeout_s), threading.get_ident()
        try:
            yield
        finally:
            self._renewing_js = None
            with contextlib.suppress(Exception):
                await nc.close()

    async def release(self) -> None:
        """Give the lease up now (a delete marker at our revision) so a standby need not wait the TTL."""
        if self.epoch is None:
            return
        if not self._is_lost():
            await self._delete()
        self.lost.set()
        self.epoch = None

    async def _delete(self) -> None:
        headers = {_EXPECTED_LAST_SUBJECT_SEQ: str(self.revision), _KV_OP: "DEL"}
        with contextlib.suppress(APIError, nats.errors.Error):  # someone else has it already, or it will expire
            await self._js.publish(self.subject, b"", headers=headers)
