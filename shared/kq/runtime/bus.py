"""The bus connection every kq process uses: connect, streams, publish with PubAck, consumers.

Publishing always goes through JetStream and waits for the PubAck, so "published"
means stored. A deterministic `msg_id` becomes `Nats-Msg-Id`: a retried publish of
the same decision is dropped by the stream's duplicate window. The current trace
context rides along in the headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import PubAck
from opentelemetry.trace import NoOpTracerProvider, Tracer, TracerProvider

from kq.clock import SYSTEM_CLOCK, Clock
from kq.config import NatsConfig
from kq.messages import SCHEMA_HEADER, SCHEMA_VERSION
from kq.metrics import ProcessMetrics
from kq.obs import get_logger, inject_context
from kq.runtime import consume as _consume
from kq.runtime import streams
from kq.runtime.delivery import Delivery
from kq.runtime.nats_client import LingeringClient
from kq.runtime.replay import Replay

Payload = bytes | msgspec.Struct
Handler = Callable[[Delivery], Awaitable[None]]
BatchHandler = Callable[[list[Delivery]], Awaitable[Sequence[BaseException | None]]]

MSG_ID = "Nats-Msg-Id"
_SCHEMA = str(SCHEMA_VERSION)
SCHEDULE = "Nats-Schedule"
SCHEDULE_TARGET = "Nats-Schedule-Target"

_encoder = msgspec.json.Encoder()
_RETRYABLE = (nats.errors.TimeoutError, asyncio.TimeoutError, nats.errors.ConnectionClosedError,
              nats.errors.ConnectionReconnectingError, nats.errors.StaleConnectionError,
              nats.errors.NoRespondersError, nats.js.errors.ServiceUnavailableError,
              # 503 to a publish: no stream leader answers, as while a JetStream cluster elects a new one
              nats.js.errors.NoStreamResponseError)


class _AckBatch:
    """One publish_batch call waiting for its acks."""

    __slots__ = ("pending", "failed", "all_in")

    def __init__(self, n: int, all_in: asyncio.Future[None]) -> None:
        self.pending = set(range(n))
        self.failed: list[int] = []
        self.all_in = all_in


class OutMsg(NamedTuple):
    """One message for publish_many."""

    subject: str
    payload: Payload
    msg_id: str | None
    headers: Mapping[str, str] | None = None


def encode_payload(payload: Payload) -> bytes:
    return payload if isinstance(payload, (bytes, bytearray)) else _encoder.encode(payload)


def schedule_time(at: datetime) -> str:
    """RFC 3339 UTC with milliseconds, as Nats-Schedule `@at` wants it."""
    if at.tzinfo is None:
        raise ValueError("schedule time must be timezone-aware")
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def connect_options(config: NatsConfig, name: str) -> dict[str, Any]:
    """TLS and the NATS user of service `name` (a closed bus, docs/configuration.md `nats:`)."""
    opts: dict[str, Any] = {}
    if config.tls is not None:
        ctx = ssl.create_default_context(cafile=config.tls.ca_file)
        if config.tls.cert_file and config.tls.key_file:
            ctx.load_cert_chain(config.tls.cert_file, config.tls.key_file)
        opts["tls"] = ctx
        if config.tls.server_name:
            opts["tls_hostname"] = config.tls.server_name
    path = config.credential_path(name)
    if path is not None:
        if not Path(path).is_file():
            raise ConnectionError(f"nats: no credentials for {name} at {path}")
        opts["nkeys_seed" if config.nkey_seed_file else "user_credentials"] = path
    return opts


class Bus:
    def __init__(
        self,
        nc: Client,
        config: NatsConfig,
        name: str,
        *,
        instance: str = "0",
        tracer_provider: TracerProvider | None = None,
        publish_timeout_s: float = 5.0,
        publish_retry_s: float = 20.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.nc = nc
        self.clock = clock  # every timed wait of this process's bus code (retries, backoff)
        self.js: JetStreamContext = nc.jetstream(timeout=publish_timeout_s)
        self.config = config
        self.name = name
        self.instance = instance
        self.tracer: Tracer = (tracer_provider or NoOpTracerProvider()).get_tracer("kq.runtime")
        self.publish_timeout_s = publish_timeout_s
        # How long a publish keeps retrying: long enough for an R3 stream to elect a new leader after
        # its leader's node died (NATS's raft election timeout is 4-9 s), as short as the old 4 x 5 s.
        self.publish_retry_s = publish_retry_s
        self.status = "starting"  # reported by the health responder; see mark_ready
        self.metrics = ProcessMetrics()  # this process's Prometheus metrics (served by kq.runtime.http)
        self.log = get_logger("kq.bus", service=name, instance=instance)
        # publish_batch's acks: one reply subscription, batches by key (see publish_batch)
        self._acks_prefix = ""
        self._batches: dict[str, _AckBatch] = {}
        self._batch_seq = 0

    @classmethod
    async def connect(
        cls,
        config: NatsConfig,
        name: str,
        *,
        instance: str = "0",
        tracer_provider: TracerProvider | None = None,
        connect_timeout_s: float = 30.0,
    ) -> Bus:
        """Connect, retrying for up to connect_timeout_s (the server may still be starting);
        once connected, reconnect forever."""
        log = get_logger("kq.bus", service=name, instance=instance)
        connected = False  # nats-py retries the first connect itself; stay quiet until then

        async def on_error(e: Exception) -> None:
            if connected:
                log.warning("nats error", error=repr(e))

        async def on_disconnected() -> None:
            if connected and not nc.is_draining and not nc.is_closed:
                log.warning("nats disconnected")

        async def on_reconnected() -> None:
            log.info("nats reconnected")

        nc = LingeringClient()  # one socket write per linger (nats_client.py)
        try:
            async with asyncio.timeout(connect_timeout_s):  # not wait_for: it may swallow a cancel (kq.clock)
                await nc.connect(
                    config.servers(),
                    **connect_options(config, name),
                    name=f"{name}-{instance}",
                    connect_timeout=2,
                    reconnect_time_wait=0.5,  # type: ignore[arg-type]  # annotated int, but slept on: 0.5s is meant
                    max_reconnect_attempts=-1,
                    allow_reconnect=True,
                    error_cb=on_error,
                    disconnected_cb=on_disconnected,
                    reconnected_cb=on_reconnected,
                )
        except (TimeoutError, nats.errors.Error, OSError) as e:
            with contextlib.suppress(Exception):
                await nc.close()
            raise ConnectionError(f"cannot connect to NATS at {config.url} within {connect_timeout_s}s: {e!r}") from e
        connected = True
        return cls(nc, config, name, instance=instance, tracer_provider=tracer_provider)

    async def ensure_streams(self, *, force: bool = False) -> None:
        """Create or update kq's streams, unless the config leaves them to a setup step (force: do it)."""
        if self.config.ensure_streams or force:
            await streams.ensure_streams(self.js, self.config)

    def mark_ready(self) -> None:
        self.status = "ready"

    async def close(self) -> None:
        """Drain: stop subscriptions, flush what was published, close."""
        if self.nc.is_closed:
            return
        try:
            await self.nc.drain()
        except Exception:
            await self.nc.close()

    # -- publishing ------------------------------------------------------------------------

    def _headers(self, msg_id: str | None, headers: Mapping[str, str] | None) -> dict[str, str]:
        h = dict(headers) if headers else {}
        if msg_id is not None:
            h[MSG_ID] = msg_id
        h.setdefault(SCHEMA_HEADER, _SCHEMA)  # kq.messages: which schema the payload follows
        # A message may name its own parent (one trace per workload, kq.obs); else the current span.
        return h if "traceparent" in h else inject_context(h)

    async def publish(
        self,
        subject: str,
        payload: Payload,
        *,
        msg_id: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> PubAck:
        """Publish to JetStream and wait for the PubAck; retried on timeouts and while no stream leader
        answers, for up to publish_retry_s (deduplicated by msg_id)."""
        data = encode_payload(payload)
        hdrs = self._headers(msg_id, headers)
        deadline = self.clock.monotonic() + self.publish_retry_s
        delay = 0.1
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self.js.publish(subject, data, headers=hdrs, timeout=self.publish_timeout_s)
            except _RETRYABLE as e:
                if self.nc.is_closed or self.clock.monotonic() + delay >= deadline:
                    raise  # closed for good (we closed it: shutting down), or out of time
                self.log.warning("publish retry", subject=subject, attempt=attempt, error=repr(e))
                await self.clock.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def publish_many(self, msgs: Iterable[OutMsg]) -> list[PubAck]:
        """Publish many concurrently (one write each, acks awaited together); failed ones are
        retried one by one. Returns the acks in order."""
        items = list(msgs)
        if not items:
            return []
        futures: list[asyncio.Future[PubAck]] = []
        try:
            for m in items:
                data = encode_payload(m.payload)
                futures.append(await self.js.publish_async(m.subject, data, headers=self._headers(m.msg_id, m.headers)))
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        done, not_done = await asyncio.wait(futures, timeout=self.publish_timeout_s)
        for f in not_done:
            f.cancel()
        for f in done:  # each error is looked at (retried or raised) below; none is "never retrieved"
            if not f.cancelled():
                f.exception()
        acks: list[PubAck] = []
        for m, f in zip(items, futures, strict=False):
            if f in done and not f.cancelled() and f.exception() is None:
                acks.append(f.result())
                continue
            err = None if f.cancelled() else f.exception()
            if err is not None and not isinstance(err, _RETRYABLE):
                raise err
            acks.append(await self.publish(m.subject, m.payload, msg_id=m.msg_id, headers=m.headers))
        return acks

    async def publish_batch(self, msgs: Sequence[OutMsg], *, timeout_s: float | None = None) -> None:
        """Publish many and wait until JetStream has stored every one: the cheap path for bursts.

        The acks come to one reply subscription that lives as long as the bus (a batch is a dict
        entry, not a subscription, a future, a task and a PubAck object per message: publish_async's
        cost dominates a burst of decisions, and a subscription per batch cost a SUB and an UNSUB).
        A message whose ack does not come, or comes with an error, is published again with
        `publish` (deduplicated by its msg_id)."""
        if not msgs:
            return
        prefix = await self._ack_prefix()
        self._batch_seq += 1
        batch = _AckBatch(len(msgs), asyncio.get_running_loop().create_future())
        key = str(self._batch_seq)
        self._batches[key] = batch
        try:
            if isinstance(self.nc, LingeringClient):  # one call for the batch (nats_client.py)
                await self.nc.publish_many([(m.subject, encode_payload(m.payload), f"{prefix}{key}.{i}",
                                             self._headers(m.msg_id, m.headers)) for i, m in enumerate(msgs)])
            else:
                publish = self.nc.publish
                for i, m in enumerate(msgs):
                    await publish(m.subject, encode_payload(m.payload), reply=f"{prefix}{key}.{i}",
                                  headers=self._headers(m.msg_id, m.headers))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s or self.publish_timeout_s):  # not wait_for: see kq.clock
                    await asyncio.shield(batch.all_in)
        finally:
            del self._batches[key]
        for i in sorted(batch.pending | set(batch.failed)):  # no ack (or an error): once more, the careful way
            m = msgs[i]
            await self.publish(m.subject, m.payload, msg_id=m.msg_id, headers=m.headers)

    async def _ack_prefix(self) -> str:
        """The reply subject prefix of publish_batch's acks (subscribed on first use)."""
        if not self._acks_prefix:
            prefix = self.nc.new_inbox() + "."
            if isinstance(self.nc, LingeringClient):  # an ack per message published: no Msg, no task turn
                await self.nc.subscribe_direct(prefix + "*.*", self._ack_in)
            else:
                await self.nc.subscribe(prefix + "*.*", cb=self._on_batch_ack)  # lives as long as the connection
            self._acks_prefix = self._acks_prefix or prefix  # (two first calls at once: either serves)
        return self._acks_prefix

    async def _on_batch_ack(self, m: Any) -> None:
        self._ack_in(m.subject, m.data)

    def _ack_in(self, subject: str, data: bytes) -> None:
        _, key, index = subject.rsplit(".", 2)
        batch = self._batches.get(key)
        if batch is None:
            return  # a batch that gave up waiting (its message is published again the careful way)
        i = int(index)
        if i not in batch.pending:
            return
        batch.pending.discard(i)
        if b'"error"' in data or b'"stream"' not in data:  # an error, or no stream answered (503)
            batch.failed.append(i)
        if not batch.pending and not batch.all_in.done():
            batch.all_in.set_result(None)

    async def schedule(
        self,
        schedule_subject: str,
        target_subject: str,
        at: datetime,
        payload: Payload,
        *,
        msg_id: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> PubAck:
        """A JetStream message schedule: at `at` the server stores `payload` on target_subject.
        Both subjects must be in the same stream (KQ_EVENTS or KQ_MK). Publishing again on the
        same schedule_subject replaces the timer (keep one schedule subject per timer)."""
        h = dict(headers) if headers else {}
        h[SCHEDULE] = f"@at {schedule_time(at)}"
        h[SCHEDULE_TARGET] = target_subject
        return await self.publish(schedule_subject, payload, msg_id=msg_id, headers=h)

    async def cancel_schedule(self, stream: str, schedule_subject: str) -> None:
        await self.js.purge_stream(stream, subject=schedule_subject)

    # -- consuming (see consume.py and replay.py) ------------------------------------------------

    async def consume(
        self,
        durable: str,
        stream: str,
        filter_subjects: str | Sequence[str],
        handler: Handler,
        **options: Any,
    ) -> None:
        await _consume.consume(self, durable, stream, filter_subjects, handler, **options)

    async def consume_batches(
        self,
        durable: str,
        stream: str,
        filter_subjects: str | Sequence[str],
        handler_batch: BatchHandler,
        **options: Any,
    ) -> None:
        await _consume.consume_batches(self, durable, stream, filter_subjects, handler_batch, **options)

    def replay(
        self,
        stream: str,
        filter_subjects: str | Sequence[str],
        handler: Handler,
        *,
        deliver: Literal["all", "last_per_subject"] = "all",
        batch: int = 1000,
        ahead: Callable[[Delivery], bool] | None = None,
        ahead_depth: int = 0,
    ) -> Replay:
        return Replay(self, stream, filter_subjects, handler, deliver=deliver, batch=batch, ahead=ahead,
                      ahead_depth=ahead_depth)
