"""Replay a stream from the start, in order, then keep following it: how a service rebuilds state.

An ephemeral ordered consumer (no acks, memory storage). If a message goes missing
on the way (consumer sequence gap) or the consumer disappears, it is re-created from
the last stream sequence handled, so the handler sees every message once, in order.

`caught_up` is set once the handler has seen everything that existed at the start:
when a handled message says nothing is pending, or its stream sequence reached the
stream's last sequence at the start, or at once if nothing matched.

Look-ahead (`ahead`, for a last-value stream of whole snapshots such as KQ_OBJECTS): while far
behind, up to `ahead_depth` messages are held beyond the one being handled, and those the
`ahead` predicate picks are handled at once, out of turn. Per subject the order still holds: a
message handled ahead is not handled again, and an older message of its subject not handled yet
is skipped (a whole snapshot supersedes it). Within a short backlog nothing is reordered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Sequence
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
# Look-ahead: a message is looked at only with this many held before it ("far behind"); below,
# the handler sees exactly the stream's order.
_AHEAD_AFTER = 256


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
        ahead: Callable[[Delivery], bool] | None = None,
        ahead_depth: int = 0,
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
        if ahead_depth < 0:
            raise ValueError(f"ahead_depth must be >= 0, got {ahead_depth}")
        self._ahead = ahead if ahead_depth > 0 else None
        self._ahead_depth = ahead_depth
        # subject -> stream sequence of its message handled ahead, and those (seq, subject) in
        # order, forgotten once the in-order pass is past them
        self._ahead_seq: dict[str, int] = {}
        self._ahead_order: deque[tuple[int, str]] = deque()
        self.handled_ahead = 0
        self.caught_up = asyncio.Event()
        self.last_seq = 0  # stream sequence of the last message handled
        self.handled = 0
        # Messages known to wait after the last one handled (the server's count when that one
        # was delivered: the rest of a batch in hand included), and an event set after each
        # slice handled: a service that held the loop a while can let what waits in first.
        self.behind = 0
        self.progress = asyncio.Event()
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
            held: deque[Delivery] = deque()
            try:
                while True:
                    await self._hold(held, await pull.get(self._batch))
                    while held:
                        d = held.popleft()
                        if d.consumer_seq != expected:
                            raise _Gap(f"expected consumer seq {expected}, got {d.consumer_seq}")
                        expected += 1
                        if not self._superseded(d):
                            await self._handle(d)
                        self.last_seq = d.stream_seq
                        self.handled += 1
                        self.behind = d.pending
                        if d.pending == 0 or d.stream_seq >= start_last:
                            self.caught_up.set()
                        if self.handled % _YIELD_EVERY == 0:
                            self.progress.set()
                            await asyncio.sleep(0)  # a long batch must not hold up replies and timers
                            if self._ahead is not None:
                                await self._hold(held, pull.take(self._ahead_depth - len(held)))
                    self.progress.set()
            except (ConsumerGone, _Gap) as e:
                self._bus.log.warning(
                    "replay consumer reset", stream=self.stream, reason=str(e), after_seq=self.last_seq
                )
            finally:
                await pull.stop(nak_buffered=False)
                with contextlib.suppress(Exception):  # already gone, or the connection is closing
                    await js.delete_consumer(self.stream, cfg.name or "")

    async def _hold(self, held: deque[Delivery], new: list[Delivery]) -> None:
        """Append `new` to the held messages, handling at once those the look-ahead picks."""
        ahead = self._ahead
        for d in new:
            # (after a consumer reset a message handled ahead comes again: not twice)
            if (ahead is not None and len(held) >= _AHEAD_AFTER and self._ahead_seq.get(d.subject, 0) < d.stream_seq
                    and ahead(d)):
                await self._handle(d)
                self._ahead_seq[d.subject] = d.stream_seq
                self._ahead_order.append((d.stream_seq, d.subject))
                self.handled_ahead += 1
            held.append(d)

    def _superseded(self, d: Delivery) -> bool:
        """Was this message, or a newer one of its subject, handled ahead? Forgets what is passed."""
        seq = self._ahead_seq.get(d.subject)
        order = self._ahead_order
        while order and order[0][0] <= d.stream_seq:
            s, subject = order.popleft()
            if self._ahead_seq.get(subject) == s:
                del self._ahead_seq[subject]
        return seq is not None and d.stream_seq <= seq

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
