"""One leadership term of the pods-ready service (epoch E): decode -> core -> publish -> ack.

1. replay the Workload mirror of every cluster (last value per object) into the core and keep
   following it; timers the core asks for are set locally at once;
2. once caught up: fence (Fence(epoch=E) per cluster, so the watcher refuses an older leader's
   commands from here on), then start acting: decisions become commands, timers become JetStream
   message schedules in KQ_TIMERS (durable: they fire even while no replica runs);
3. consume fired schedules: the core decides on the state as it is then (a stale or duplicate
   firing decides nothing); the message is acked only after the command is stored.

Two clocks drive a deadline and the first to fire wins: a local timer in this process (precise
to the event loop) and the bus schedule (precise to the server's scheduler, about 250 ms, and
surviving any crash). Both reach the core through `Tracker.due`, and decision ids are
deterministic, so a deadline seen twice is decided once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import msgspec

from kq import subjects
from kq.api.kueue import Workload
from kq.messages import timer_decoder
from kq.mirror import MirrorRecordError, decode_record
from kq.obs import get_logger
from kq.runtime import Bus, Delivery, PermanentError
from services.podsready import outputs
from services.podsready.core.model import Changes, Decision, Key, PodsReadyConfig, Timer
from services.podsready.core.tracker import Tracker
from services.podsready.core.view import workload_view

Clock = Callable[[], float]
_workload_decoder = msgspec.json.Decoder(Workload)


class TermSettings(msgspec.Struct, frozen=True, kw_only=True):
    replay_batch: int = 1000
    fire_ack_wait_s: float = 5.0  # a fired timer a dead leader took is redelivered after this
    purge_concurrency: int = 64  # timer cancellations in flight at once
    bus_timers: bool = True  # also keep each deadline as a JetStream schedule (durability)


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
        self.local: dict[Key, asyncio.TimerHandle] = {}
        self.decisions: list[Decision] = []  # waiting for the flusher
        self.bus_timers: dict[Key, Timer | None] = {}  # set (Timer) or cancel (None), the last wins
        self.wake = asyncio.Event()
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
        """A bus timer fired: decide now and publish before the message is acked."""
        try:
            msg = timer_decoder.decode(d.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise PermanentError(f"{d.subject} (seq {d.stream_seq}): not a timer: {e}") from None
        changes = self.tracker.due(outputs.timer_key(msg), self.clock())
        decided, changes.decisions = changes.decisions, []
        self._absorb(changes)
        if decided:
            await self._publish_decisions(decided)

    def _on_local(self, key: Key) -> None:
        self.local.pop(key, None)
        self._absorb(self.tracker.due(key, self.clock()))

    # --- effects -------------------------------------------------------------------------------------

    def _absorb(self, changes: Changes) -> None:
        if changes.empty():
            return
        loop = asyncio.get_running_loop()
        for key in changes.cancelled:
            handle = self.local.pop(key, None)
            if handle is not None:
                handle.cancel()
            self.bus_timers[key] = None
        for timer in changes.timers:
            handle = self.local.pop(timer.key, None)
            if handle is not None:
                handle.cancel()
            delay = max(0.0, timer.at - self.clock())
            self.local[timer.key] = loop.call_at(loop.time() + delay, self._on_local, timer.key)
            self.bus_timers[timer.key] = timer
        self.decisions += changes.decisions
        self.wake.set()

    async def _publish_decisions(self, decisions: list[Decision]) -> None:
        now = self.clock()
        await self.bus.publish_many([outputs.command(x, self.epoch) for x in decisions])
        events = [e for x in decisions if (e := outputs.event(x, now)) is not None]
        if events:
            await self.bus.publish_many(events)
        self.published += len(decisions)
        for x in decisions:
            self.log.info("decided", decision=type(x).__name__, workload=x.key.label(), id=x.id)

    async def _flush(self) -> None:
        decisions, self.decisions = self.decisions, []
        if decisions:
            await self._publish_decisions(decisions)
        if not self.settings.bus_timers:
            self.bus_timers.clear()
            return
        timers, self.bus_timers = self.bus_timers, {}
        sets = [outputs.schedule(t) for t in timers.values() if t is not None]
        if sets:
            await self.bus.publish_many(sets)
        cancels = [k for k, t in timers.items() if t is None]
        sem = asyncio.Semaphore(self.settings.purge_concurrency)

        async def purge(key: Key) -> None:
            async with sem:
                await self.bus.cancel_schedule(subjects.TIMERS_STREAM, outputs.schedule_subject(key))

        if cancels:
            await asyncio.gather(*(purge(k) for k in cancels))

    async def _flusher(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            await self._flush()

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
                tg.create_task(self._flusher(), name="podsready:flusher")
                self.wake.set()
                tg.create_task(self.bus.consume(durable_name(), subjects.TIMERS_STREAM,
                                                subjects.timer_fire_filter(outputs.WRITER), self.on_fire,
                                                ack_wait=self.settings.fire_ack_wait_s),
                               name="podsready:fired")
                self.bus.mark_ready()
                self.log.info("deciding", clusters=list(self.clusters))
        finally:
            for handle in self.local.values():
                handle.cancel()
            self.local.clear()

