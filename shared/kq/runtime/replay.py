"""Replay a stream from the start, in order, then keep following it: how a service rebuilds state.

An ephemeral ordered consumer (no acks, memory storage). If a message goes missing
on the way (consumer sequence gap) or the consumer disappears, it is re-created from
the last stream sequence handled, so the handler sees every message once, in order.

`caught_up` is set once the handler has seen everything that existed at the start:
when a handled message says nothing is pending, or its stream sequence reached the
stream's last sequence at the start, or at once if nothing matched.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from nats.js import api
from nats.nuid import NUID

from kq import subjects
from kq.obs import attach_message_context, detach_message_context
from kq.runtime.consume import now_rfc3339
from kq.runtime.delivery import Delivery
from kq.runtime.errors import Action, DeadLetter, PermanentError, classify
from kq.runtime.pull import ConsumerGone, PullStream, create_consumer

if TYPE_CHECKING:
    from kq.runtime.bus import Bus, Handler

_POLICY = {"all": api.DeliverPolicy.ALL, "last_per_subject": api.DeliverPolicy.LAST_PER_SUBJECT}


_YIELD_EVERY = 64  # handlers rarely await for real: let the loop breathe within a batch


class _Gap(Exception):
    pass


class Replay:
    """`async with bus.replay(...) as r: await r.wait_caught_up()`, or run `await r.run()` in a TaskGroup."""

    def __init__(
        self,
        bus: Bus,
        stream: str,
        filter_subjects: str | Sequence[str],
        handler: Handler,
        *,
        deliver: Literal["all", "last_per_subject"] = "all",
        batch: int = 1000,
    ) -> None:
        fs = [filter_subjects] if isinstance(filter_subjects, str) else list(filter_subjects)
        if not fs or not all(fs):
            raise ValueError(f"filter_subjects must name at least one subject, got {filter_subjects!r}")
        if deliver not in _POLICY:
            raise ValueError(f"deliver must be 'all' or 'last_per_subject', got {deliver!r}")
        self._bus = bus
        self.stream = stream
        self.filters = fs
        self._handler = handler
        self._deliver = deliver
        self._batch = batch
        self.caught_up = asyncio.Event()
        self.last_seq = 0  # stream sequence of the last message handled
        self.handled = 0
        self._task: asyncio.Task[None] | None = None
        self._nuid = NUID()

    def _consumer_config(self) -> api.ConsumerConfig:
        one = len(self.filters) == 1
        cfg = api.ConsumerConfig(
            name=self._nuid.next().decode(),
            ack_policy=api.AckPolicy.NONE,
            filter_subject=self.filters[0] if one else None,
            filter_subjects=None if one else self.filters,
            inactive_threshold=60.0,
            mem_storage=True,
            num_replicas=1,
            max_deliver=1,
        )
        if self.last_seq == 0:
            cfg.deliver_policy = _POLICY[self._deliver]
        else:  # resume after a gap: everything after what we handled (still last-value correct)
            cfg.deliver_policy = api.DeliverPolicy.BY_START_SEQUENCE
            cfg.opt_start_seq = self.last_seq + 1
        return cfg

    async def run(self) -> None:
        js = self._bus.js
        start_last = (await js.stream_info(self.stream)).state.last_seq
        while True:
            cfg = self._consumer_config()
            info = await create_consumer(js, self.stream, cfg)
            if info.num_pending == 0:
                self.caught_up.set()
            pull = PullStream(self._bus.nc, self.stream, cfg.name or "", batch=self._batch)
            await pull.start()
            expected = 1
            try:
                while True:
                    for d in await pull.get(self._batch):
                        if d.consumer_seq != expected:
                            raise _Gap(f"expected consumer seq {expected}, got {d.consumer_seq}")
                        expected += 1
                        await self._handle(d)
                        self.last_seq = d.stream_seq
                        self.handled += 1
                        if d.pending == 0 or d.stream_seq >= start_last:
                            self.caught_up.set()
                        if self.handled % _YIELD_EVERY == 0:
                            await asyncio.sleep(0)  # a long batch must not hold up replies and timers
            except (ConsumerGone, _Gap) as e:
                self._bus.log.warning(
                    "replay consumer reset", stream=self.stream, reason=str(e), after_seq=self.last_seq
                )
            finally:
                await pull.stop(nak_buffered=False)
                with contextlib.suppress(Exception):  # already gone, or the connection is closing
                    await js.delete_consumer(self.stream, cfg.name or "")

    async def _handle(self, d: Delivery) -> None:
        """Ordered: a temporary failure is retried in place; a permanent one is dead-lettered and skipped.

        No span per replayed message (a service replays every record of what it follows, most of them
        of no interest to it: a span each cost as much as handling one). The handler runs in the
        publisher's trace context when the message carries one, so whatever it decides and publishes
        (a decision's own span) joins that trace."""
        while True:
            token = attach_message_context(d.headers)
            try:
                await self._handler(d)
                return
            except Exception as e:
                outcome = classify(e)
                if outcome.action is Action.NAK:
                    self._bus.log.warning("replay handler will retry", subject=d.subject, error=outcome.error)
                    await self._bus.clock.sleep(outcome.delay_s)
                    continue
                self._bus.log.error(
                    "replay handler failed; dead-lettered and skipped",
                    subject=d.subject, seq=d.stream_seq, error_type=outcome.error_type, error=outcome.error,
                    exc_info=None if isinstance(e, PermanentError) else e,
                )
                await self._dead_letter(d, outcome.error_type, outcome.error)
                return
            finally:
                detach_message_context(token)

    async def _dead_letter(self, d: Delivery, error_type: str, error: str) -> None:
        bus = self._bus
        letter = DeadLetter(
            service=bus.name, instance=bus.instance, consumer="replay", stream=d.stream, stream_seq=d.stream_seq,
            subject=d.subject, deliveries=d.deliveries, error_type=error_type, error=error, at=now_rfc3339(bus.clock),
            headers=dict(d.headers), data=d.data,
        )
        await bus.publish(subjects.dead_letter_subject(bus.name), letter,
                          msg_id=f"dlq:{bus.name}:{d.stream}:replay:{d.stream_seq}")

    # -- background use ----------------------------------------------------------------------

    async def __aenter__(self) -> Replay:
        self._task = asyncio.create_task(self.run(), name=f"replay:{self.stream}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})  # its end, not its CancelledError: ours still propagates
            if not self._task.cancelled():
                self._task.exception()  # retrieved: a failure was the caller's to see through run()

    async def wait_caught_up(self, timeout: float | None = None) -> None:
        """Wait for caught_up; raises the replay's own error if it failed first."""
        waiter = asyncio.create_task(self.caught_up.wait())
        waits: set[asyncio.Future[Any]] = {waiter}
        if self._task is not None:
            waits.add(self._task)
        try:
            done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if self.caught_up.is_set():
            return
        if self._task is not None and self._task in done:
            self._task.result()  # raises
            raise RuntimeError("replay stopped before catching up")
        raise TimeoutError(f"replay of {self.stream} {self.filters} not caught up after {timeout}s "
                           f"(handled {self.handled}, last seq {self.last_seq})")
