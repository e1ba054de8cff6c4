"""Durable pull consumers and the one ack policy.

The handler runs first and publishes whatever the message caused (awaiting PubAcks);
only then is the message settled, from how the handler ended (errors.classify):
success -> ack; TemporaryError or bus trouble -> nak with delay; PermanentError or a
bug -> a dead-letter message, then term. If even the dead letter cannot be published
the message is nak'ed, so nothing is dropped silently.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Literal

from nats.js import api
from opentelemetry.trace import Link, get_current_span

from kq import subjects
from kq.clock import SYSTEM_CLOCK, Clock, rfc3339_millis
from kq.obs import attach_message_context, consumer_span, detach_message_context, extract_context, records_spans
from kq.runtime.delivery import Delivery
from kq.runtime.errors import Action, DeadLetter, Outcome, classify
from kq.runtime.executor import KeyedExecutor
from kq.runtime.pull import ConsumerGone, PullStream, create_consumer

if TYPE_CHECKING:
    from kq.runtime.bus import BatchHandler, Bus, Handler

_ACK = b"+ACK"
_DELIVER = {"all": api.DeliverPolicy.ALL, "new": api.DeliverPolicy.NEW}


def _filters(filter_subjects: str | Sequence[str]) -> list[str]:
    fs = [filter_subjects] if isinstance(filter_subjects, str) else list(filter_subjects)
    if not fs or not all(fs):
        raise ValueError(f"filter_subjects must name at least one subject, got {filter_subjects!r}")
    return fs


def durable_config(
    durable: str,
    filter_subjects: list[str],
    *,
    max_ack_pending: int,
    ack_wait: float,
    deliver: Literal["all", "new"],
) -> api.ConsumerConfig:
    one = len(filter_subjects) == 1
    return api.ConsumerConfig(
        name=durable,
        durable_name=durable,
        ack_policy=api.AckPolicy.EXPLICIT,
        deliver_policy=_DELIVER[deliver],
        filter_subject=filter_subjects[0] if one else None,
        filter_subjects=None if one else filter_subjects,
        max_ack_pending=max_ack_pending,
        ack_wait=ack_wait,
        max_deliver=-1,  # retry limits are ours (max_deliver in consume), decided with a dead letter
    )


def now_rfc3339(clock: Clock = SYSTEM_CLOCK) -> str:
    return rfc3339_millis(clock.now())


async def settle(bus: Bus, d: Delivery, outcome: Outcome) -> None:
    """Apply an outcome to a message: the only place that acks, naks or terms."""
    nc = bus.nc
    bus.metrics.settled(d.stream, d.consumer, outcome.action.value, d.pending,
                        bus.clock.now() - d.timestamp_ns / 1e9)
    if outcome.action is Action.ACK:
        await nc.publish(d.reply, _ACK)
        return
    if outcome.action is Action.NAK:
        await nc.publish(d.reply, b"-NAK " + json.dumps({"delay": int(outcome.delay_s * 1e9)}).encode())
        return
    letter = DeadLetter(
        service=bus.name,
        instance=bus.instance,
        consumer=d.consumer,
        stream=d.stream,
        stream_seq=d.stream_seq,
        subject=d.subject,
        deliveries=d.deliveries,
        error_type=outcome.error_type,
        error=outcome.error,
        at=now_rfc3339(bus.clock),
        headers=dict(d.headers),
        data=d.data,
    )
    try:
        await bus.publish(
            subjects.dead_letter_subject(bus.name),
            letter,
            msg_id=f"dlq:{bus.name}:{d.stream}:{d.consumer}:{d.stream_seq}",
        )
    except Exception as e:  # cannot record why: keep the message instead
        bus.log.error("dead letter publish failed; will redeliver", subject=d.subject, error=repr(e))
        await nc.publish(d.reply, b"-NAK " + json.dumps({"delay": int(5e9)}).encode())
        return
    reason = f"{outcome.error_type}: {outcome.error}"[:200].replace("\n", " ")
    await nc.publish(d.reply, b"+TERM " + reason.encode())


class _Inflight:
    """Messages handed to handlers and not yet settled: released (nak, no delay) when the
    consumer stops, so another instance gets them now rather than after the ack wait."""

    def __init__(self) -> None:
        self._by_reply: dict[str, Delivery] = {}
        self._since: dict[str, float] = {}  # reply -> when taken or last said in progress (keep_alive)

    def add(self, deliveries: list[Delivery], now: float = 0.0) -> None:
        for d in deliveries:
            self._by_reply[d.reply] = d
            self._since[d.reply] = now

    async def settle(self, bus: Bus, d: Delivery, outcome: Outcome) -> None:
        await settle(bus, d, outcome)
        self._by_reply.pop(d.reply, None)
        self._since.pop(d.reply, None)

    async def keep_alive(self, bus: Bus, ack_wait_s: float) -> None:
        """Forever: say "in progress" (+WPI) for messages held a third of their ack wait, so one
        waiting its turn behind a deep pipeline is not redelivered meanwhile: a redelivered copy
        would line up again, after commands that came later (an admission after its eviction)."""
        every = ack_wait_s / 3
        while True:
            await bus.clock.sleep(every)
            now = bus.clock.monotonic()
            for reply, since in list(self._since.items()):
                if now - since >= every and reply in self._by_reply and not bus.nc.is_closed:
                    self._since[reply] = now
                    try:
                        await bus.nc.publish(reply, b"+WPI")
                    except Exception:  # disconnected: the consumer is re-created or the ack wait runs out
                        break

    async def release_all(self, bus: Bus) -> None:
        pending, self._by_reply = list(self._by_reply), {}
        self._since = {}
        for reply in pending:
            if bus.nc.is_closed:
                return
            try:
                await bus.nc.publish(reply, b"-NAK")
            except Exception:
                return


def _log_outcome(bus: Bus, d: Delivery, exc: BaseException | None, outcome: Outcome) -> None:
    if outcome.action is Action.NAK:
        bus.log.warning(
            "message will be retried",
            subject=d.subject, seq=d.stream_seq, deliveries=d.deliveries, delay_s=outcome.delay_s,
            error_type=outcome.error_type, error=outcome.error,
        )
    elif outcome.action is Action.TERM:
        bus.log.error(
            "message dead-lettered",
            subject=d.subject, seq=d.stream_seq, deliveries=d.deliveries,
            error_type=outcome.error_type, error=outcome.error,
            exc_info=exc if exc is not None and outcome.error_type not in ("PermanentError",) else None,
        )


async def _handle_one(
    bus: Bus, d: Delivery, handler: Handler, span_name: str, max_deliver: int | None, inflight: _Inflight
) -> None:
    exc: BaseException | None = None
    if not records_spans(bus.tracer):  # nobody sees spans: only the publisher's context, no span of ours
        token = attach_message_context(d.headers)
        try:
            try:
                await handler(d)
            except Exception as e:
                exc = e
            await _settle_one(bus, d, exc, max_deliver, inflight)
        finally:
            detach_message_context(token)
        return
    with consumer_span(bus.tracer, span_name, d.headers, {"messaging.destination": d.subject,
                                                         "messaging.sequence": d.stream_seq}) as span:
        try:
            await handler(d)
        except Exception as e:
            exc = e
            span.record_exception(e)
        await _settle_one(bus, d, exc, max_deliver, inflight)


async def _settle_one(bus: Bus, d: Delivery, exc: BaseException | None, max_deliver: int | None,
                      inflight: _Inflight) -> None:
    outcome = classify(exc, deliveries=d.deliveries, max_deliver=max_deliver)
    if outcome.action is not Action.ACK:
        _log_outcome(bus, d, exc, outcome)
    await inflight.settle(bus, d, outcome)


async def _pull_loop(
    bus: Bus,
    durable: str,
    stream: str,
    cfg: api.ConsumerConfig,
    batch: int,
    process: Callable[[list[Delivery]], Coroutine[Any, Any, None]],
    inflight: _Inflight,
    pipeline: int = 1,
    window: int | None = None,
) -> None:
    """Create/update the durable consumer, pull, and hand batches to `process`; re-create the
    consumer if it disappears (stream reset, server restart with a memory store).

    pipeline > 1 lets that many batches be processed at once (handed over in stream order:
    `process` must itself keep whatever order it needs across overlapping batches).
    window: messages asked of the server ahead (default `batch`); see consume_batches."""
    while True:
        await create_consumer(bus.js, stream, cfg)
        pull = PullStream(bus.nc, stream, durable, batch=max(batch, window or batch))
        await pull.start()
        batches: KeyedExecutor[None] = KeyedExecutor(pipeline)
        # Pipelined batches may wait longer than the ack wait for their turn (a deep pipeline, a
        # window taken ahead, a starved process): their messages are kept in progress.
        alive = asyncio.create_task(inflight.keep_alive(bus, cfg.ack_wait or 30.0)) if pipeline > 1 else None
        try:
            while True:
                if pipeline <= 1:
                    deliveries = await pull.get(batch)
                    inflight.add(deliveries)
                    await process(deliveries)
                    continue
                # Room first, then pull: what is taken waits at most for room (its ack wait kept).
                # A failed process() ends the loop here, as it would unpipelined.
                await batches.room()
                deliveries = await pull.get(batch)
                inflight.add(deliveries, bus.clock.monotonic())
                batches.start(process(deliveries))
        except ConsumerGone as e:
            bus.log.warning("consumer gone; re-creating", consumer=durable, stream=stream, reason=str(e))
            await bus.clock.sleep(0.5)
        finally:
            if alive is not None:
                alive.cancel()
            await batches.close()
            await pull.stop(nak_buffered=True)
            await inflight.release_all(bus)


async def consume(
    bus: Bus,
    durable: str,
    stream: str,
    filter_subjects: str | Sequence[str],
    handler: Handler,
    *,
    batch: int = 256,
    max_ack_pending: int = 1024,
    ack_wait: float = 30.0,
    max_deliver: int | None = None,
    deliver: Literal["all", "new"] = "all",
    concurrency: int = 1,
) -> None:
    """Run a durable pull consumer until cancelled; handler(delivery) per message.

    concurrency > 1 handles up to that many messages at once (order is then not kept).
    max_deliver: after this many deliveries a temporary failure is dead-lettered too."""
    cfg = durable_config(durable, _filters(filter_subjects), max_ack_pending=max_ack_pending,
                         ack_wait=ack_wait, deliver=deliver)
    span_name = f"consume {stream}/{durable}"
    inflight = _Inflight()
    # _handle_one settles every outcome itself; an error escaping it does not end the consumer.
    messages: KeyedExecutor[None] = KeyedExecutor(concurrency, raise_failures=False)

    async def process(deliveries: list[Delivery]) -> None:
        if concurrency == 1:
            for d in deliveries:
                await _handle_one(bus, d, handler, span_name, max_deliver, inflight)
            return
        for d in deliveries:
            await messages.room()
            messages.start(_handle_one(bus, d, handler, span_name, max_deliver, inflight))

    try:
        await _pull_loop(bus, durable, stream, cfg, batch, process, inflight)
    finally:
        await messages.close()
        await inflight.release_all(bus)


async def consume_batches(
    bus: Bus,
    durable: str,
    stream: str,
    filter_subjects: str | Sequence[str],
    handler_batch: BatchHandler,
    *,
    batch: int = 256,
    max_ack_pending: int = 4096,
    ack_wait: float = 60.0,
    max_deliver: int | None = None,
    deliver: Literal["all", "new"] = "all",
    pipeline: int = 1,
    window: int | None = None,
) -> None:
    """Like consume, but handler_batch(deliveries) gets whatever has arrived (up to `batch`)
    and returns one outcome per message: None for success or the exception for that message.
    If it raises, every message in the batch gets that exception. pipeline > 1: up to that
    many batches are handled at once; the handler keeps any order it needs across them.

    window: messages kept asked of the server ahead of the handler (default `batch`). Small
    batches with a window of one batch cost a server round trip per half batch: under load that
    round trip, not the handler, bounded the watcher's commands (~300 a second, issue 12). What
    is taken ahead waits at most for pipeline room, its ack wait running."""
    cfg = durable_config(durable, _filters(filter_subjects), max_ack_pending=max_ack_pending,
                         ack_wait=ack_wait, deliver=deliver)
    tracer = bus.tracer
    span_name = f"consume-batch {stream}/{durable}"
    inflight = _Inflight()

    recording = records_spans(tracer)

    async def process(deliveries: list[Delivery]) -> None:
        links: list[Link] = []
        if recording:
            contexts = (get_current_span(extract_context(d.headers)).get_span_context() for d in deliveries[:128])
            links = [Link(c) for c in contexts if c.is_valid]
        with tracer.start_as_current_span(span_name, links=links, attributes={"messaging.batch.size": len(deliveries)}):
            try:
                results: Sequence[BaseException | None] = await handler_batch(deliveries)
                if len(results) != len(deliveries):
                    raise RuntimeError(f"batch handler returned {len(results)} outcomes for {len(deliveries)} messages")
            except Exception as e:
                results = [e] * len(deliveries)
            for d, exc in zip(deliveries, results, strict=False):
                outcome = classify(exc, deliveries=d.deliveries, max_deliver=max_deliver)
                if outcome.action is not Action.ACK:
                    _log_outcome(bus, d, exc, outcome)
                await inflight.settle(bus, d, outcome)

    await _pull_loop(bus, durable, stream, cfg, batch, process, inflight, pipeline, window)
