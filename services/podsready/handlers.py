"""One leadership term of the pods-ready service (epoch E): decode -> core -> publish -> ack.

1. replay the Workload mirror of every cluster (last value per object) into the core and keep
   following it; timers the core asks for are set locally at once;
2. once caught up: fence (Fence(epoch=E) per cluster, so the watcher refuses an older leader's
   commands from here on), then start acting: decisions become commands, timers become JetStream
   message schedules in KQ_TIMERS (durable: they fire even while no replica runs);
3. consume fired schedules: the core decides on the state as it is then (a stale or duplicate
   firing decides nothing); the message is acked only after the command is stored.

Two clocks drive a deadline and the first to fire wins: one local timer in this process, always
at the earliest deadline (precise to the event loop; a burst of deadlines is one wake-up) and a bus
schedule per time bucket (`bucket_s`, the
server's own precision is about 250 ms) that survives any crash: when it fires, every deadline
up to then is decided (`Tracker.due_until`). Bus timers cost one schedule per bucket, not per
workload, and are never cancelled: a bucket firing for nothing decides nothing. Decision ids are
deterministic, so a deadline seen twice is decided once.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

import msgspec

from kq import subjects
from kq.api.kueue import Workload
from kq.messages import timer_decoder
from kq.mirror import MirrorRecordError, decode_record
from kq.obs import get_logger
from kq.runtime import Bus, Delivery, OutMsg, PermanentError
from services.podsready import outputs
from services.podsready.core.model import Changes, Decision, Key, PodsReadyConfig
from services.podsready.core.tracker import Tracker
from services.podsready.core.view import workload_view

Clock = Callable[[], float]
_workload_decoder = msgspec.json.Decoder(Workload)


class TermSettings(msgspec.Struct, frozen=True, kw_only=True):
    replay_batch: int = 1000
    fire_ack_wait_s: float = 5.0  # a fired timer a dead leader took is redelivered after this
    bucket_s: float = 0.25  # bus timers: one per this much time with deadlines in it
    publish_in_flight: int = 8  # decision batches published at once
    publish_chunk: int = 100  # decisions per batch: the first of a burst go out before the last are built
    audit_pause_s: float = 0.05  # audit events wait while decisions are being published
    bus_timers: bool = True  # also keep each deadline as a JetStream schedule (durability)
    local_timers: bool = True  # off only in tests of the bus timers alone


def durable_name() -> str:
    return f"{outputs.WRITER}-timers"


class Term:
    def __init__(self, bus: Bus, clusters: tuple[str, ...], config: PodsReadyConfig, epoch: int,
                 settings: TermSettings, clock: Clock = time.time) -> None:
        self.bus = bus
        self.clusters = clusters
        self.epoch = epoch
        self.settings = settings
        self.clock = clock
        self.tracker = Tracker(config)
        self.local: asyncio.TimerHandle | None = None  # one local timer: the earliest deadline
        self.local_at = math.inf
        self.decisions: list[Decision] = []  # waiting for the publisher
        self.buckets: set[float] = set()  # bus timers set (bucket times)
        self.new_buckets: list[float] = []  # waiting to be published
        self.decided = asyncio.Event()  # decisions wait to be published
        self.timers_changed = asyncio.Event()  # new buckets wait to become bus schedules
        self.audit: list[OutMsg] = []  # decision events waiting to be published (after their commands)
        self.audited = asyncio.Event()
        self.in_flight = 0  # decision batches being published
        self.acting = False
        self.published = 0
        self.log = get_logger("kq.podsready", epoch=epoch)

    # --- inputs --------------------------------------------------------------------------------------

    async def on_object(self, d: Delivery) -> None:
        try:
            rec = decode_record(d.subject, d.headers, d.data)
            if rec.deleted:
                self._absorb(self.tracker.forget(Key(rec.cluster, rec.namespace, rec.name)))
                return
            view = workload_view(rec.cluster, _workload_decoder.decode(rec.raw))
        except (MirrorRecordError, msgspec.DecodeError, msgspec.ValidationError, ValueError) as e:
            raise PermanentError(f"{d.subject} (seq {d.stream_seq}): {e}") from None
        self._absorb(self.tracker.observe(view, self.clock()))

    async def on_fire(self, d: Delivery) -> None:
        """A bus timer fired: decide every deadline up to now and publish before the message is acked."""
        try:
            timer_decoder.decode(d.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise PermanentError(f"{d.subject} (seq {d.stream_seq}): not a timer: {e}") from None
        changes = self.tracker.due_until(self.clock())
        decided, changes.decisions = changes.decisions, []
        self._absorb(changes)
        if decided:
            await self._publish_commands(decided)

    def _on_local(self) -> None:
        self.local, self.local_at = None, math.inf
        self._absorb(self.tracker.due_until(self.clock()))
        self._rearm()

    def _rearm(self) -> None:
        """Keep the one local timer at the earliest deadline (the core's heap head)."""
        if not self.settings.local_timers:
            return
        at = self.tracker.next_at()
        if at is None or at >= self.local_at:
            return
        if self.local is not None:
            self.local.cancel()
        loop = asyncio.get_running_loop()
        self.local = loop.call_at(loop.time() + max(0.0, at - self.clock()), self._on_local)
        self.local_at = at

    # --- effects -------------------------------------------------------------------------------------

    def _absorb(self, changes: Changes) -> None:
        """Timers and decisions from the core. A cancelled timer needs nothing here: the local timer
        follows the core's heap, and a bus bucket firing for nothing decides nothing."""
        if changes.empty():
            return
        for timer in changes.timers:
            bucket = outputs.bucket_of(timer.at, self.settings.bucket_s)
            if bucket not in self.buckets:
                self.buckets.add(bucket)
                self.new_buckets.append(bucket)
            if timer.at < self.local_at:
                self._rearm()
        if changes.decisions:
            self.decisions += changes.decisions
            self.decided.set()
        if self.new_buckets:
            self.timers_changed.set()

    async def _publish_commands(self, decisions: list[Decision]) -> None:
        await self.bus.publish_batch([outputs.command(x, self.epoch) for x in decisions])
        self.published += len(decisions)
        now = self.clock()
        self.audit += [e for x in decisions if (e := outputs.event(x, now)) is not None]
        if self.audit:
            self.audited.set()
        for x in decisions:
            self.log.debug("decided", decision=type(x).__name__, workload=x.key.label(), id=x.id)

    async def _publisher(self) -> None:
        """Decisions go out as soon as they are made: never behind the bus timers' upkeep or the audit
        events, and a batch does not wait for the previous batch's acks (a few in flight)."""
        slots = asyncio.Semaphore(self.settings.publish_in_flight)
        running: set[asyncio.Task[None]] = set()

        async def one(batch: list[Decision]) -> None:
            self.in_flight += 1
            try:
                await self._publish_commands(batch)
            finally:
                self.in_flight -= 1
                slots.release()

        try:
            while True:
                await self.decided.wait()
                self.decided.clear()
                decisions, self.decisions = self.decisions, []
                for at in range(0, len(decisions), self.settings.publish_chunk):
                    await slots.acquire()
                    for t in [t for t in running if t.done()]:
                        running.discard(t)
                        t.result()  # a failed publish ends the term (the next leader decides again)
                    task = asyncio.create_task(one(decisions[at : at + self.settings.publish_chunk]))
                    running.add(task)
                    await asyncio.sleep(0)  # let this chunk reach the wire before building the next
        finally:
            for t in running:
                t.cancel()
            await asyncio.gather(*running, return_exceptions=True)

    async def _auditor(self) -> None:
        """The decisions' audit events, after their commands and only while no decision waits: at a
        burst of deadlines the commands have the process to themselves."""
        while True:
            await self.audited.wait()
            self.audited.clear()
            while self.audit:
                while self.decisions or self.in_flight:
                    await asyncio.sleep(self.settings.audit_pause_s)
                chunk = self.settings.publish_chunk
                events, self.audit = self.audit[:chunk], self.audit[chunk:]
                await self.bus.publish_batch(events)

    async def _timekeeper(self) -> None:
        """Publish the bus timers of new buckets; forget the buckets gone by."""
        while True:
            await self.timers_changed.wait()
            self.timers_changed.clear()
            fresh, self.new_buckets = self.new_buckets, []
            if self.settings.bus_timers and fresh:
                await self.bus.publish_many([outputs.schedule(b) for b in sorted(fresh)])
            past = self.clock() - 60.0
            if len(self.buckets) > 4096:
                self.buckets = {b for b in self.buckets if b > past}

    # --- the term ------------------------------------------------------------------------------------

    async def run(self) -> None:
        filters = [subjects.object_filter(c, "workload") for c in self.clusters]
        mirror = self.bus.replay(subjects.OBJECTS_STREAM, filters, self.on_object, deliver="last_per_subject",
                                 batch=self.settings.replay_batch)
        t0 = time.monotonic()
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(mirror.run(), name="podsready:mirror")
                await mirror.caught_up.wait()
                self.log.info("state rebuilt", workloads=len(self.tracker), timers=len(self.tracker.timers),
                              seconds=round(time.monotonic() - t0, 3))
                await self.bus.publish_many([outputs.fence(c, self.epoch) for c in self.clusters])
                self.acting = True
                tg.create_task(self._publisher(), name="podsready:publisher")
                tg.create_task(self._timekeeper(), name="podsready:timekeeper")
                tg.create_task(self._auditor(), name="podsready:auditor")
                self.decided.set()
                self.timers_changed.set()
                self._absorb(self.tracker.due_until(self.clock()))  # what fell due while rebuilding
                tg.create_task(self.bus.consume(durable_name(), subjects.TIMERS_STREAM,
                                                subjects.timer_fire_filter(outputs.WRITER), self.on_fire,
                                                ack_wait=self.settings.fire_ack_wait_s),
                               name="podsready:fired")
                self.bus.mark_ready()
                self.log.info("deciding", clusters=list(self.clusters))
        finally:
            if self.local is not None:
                self.local.cancel()
                self.local, self.local_at = None, math.inf

