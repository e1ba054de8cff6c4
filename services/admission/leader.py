"""One leadership term of the admission scheduler (epoch E), from rebuild to losing the lease.

1. follow our command outcomes (KQ_EVENTS), so nothing the watcher says from now on is missed;
2. replay the mirror (last value per object) of every kind the core needs, in every cluster,
   until caught up and a sync marker was seen for each (cluster, kind);
3. fence: publish Fence(epoch=E) to each cluster and wait for its outcome, then until the fence
   itself is consumed from KQ_CMD: every command queued before it (an older leader's) has been
   applied or refused by then, and its outcome published;
4. decide: run cycles when there is work or a backoff ends, publish commands then events
   (awaiting the PubAcks lets the inputs that came meanwhile in before the next cycle).
   A partition waits while an older leader's write is not yet visible in the mirror.

The term ends by exception: LostLeadership (a StaleEpoch refusal) or a failure; the lease
code (kq.runtime.lead) cancels it at once when the lease is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import msgspec
import nats
import nats.errors
from nats.js.errors import NotFoundError

from kq import subjects
from kq.config import AdmissionTermConfig
from kq.messages import CommandOutcome
from kq.obs import get_logger
from kq.placement import SolveRequest, reply_decoder
from kq.placement import encoder as placement_encoder
from kq.runtime import Bus, OutMsg, connect_options
from services.admission.core.decisions import CycleResult, PlacementRequest
from services.admission.core.model import SchedulerConfig
from services.admission.core.ownership import OwnsTree
from services.admission.handlers import Inputs, missing_sync, publish
from services.admission.plan import events as k8s_events
from services.admission.plan import metrics
from services.admission.plan.inputs import NEEDED_KINDS
from services.admission.plan.outputs import WRITER, Outgoing, fence_command
from services.admission.plan.partition import LostLeadership, Partition
from services.admission.tracing import trace_decisions
from services.admission.visibility import serving_visibility

T = TypeVar("T")


# The `admission.term:` section of kq's config file (kq.config.AdmissionTermConfig).
TermSettings = AdmissionTermConfig


def mirror_filters(clusters: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for c in clusters:
        out += [subjects.object_filter(c, k) for k in NEEDED_KINDS]
        out += [subjects.sync_subject(c, k) for k in NEEDED_KINDS]
    return out


class LeaderTerm:
    def __init__(self, bus: Bus, clusters: tuple[str, ...], config: SchedulerConfig, epoch: int,
                 settings: TermSettings, *, writer: str = WRITER,
                 owns: Mapping[str, OwnsTree] | None = None, workers: frozenset[str] = frozenset()) -> None:
        if not clusters:
            raise ValueError("admission: no clusters configured (config `clusters`)")
        self.bus = bus
        self.clusters = clusters
        self.epoch = epoch
        self.writer = writer  # sharded admission: one writer per slot, fenced per writer by the watcher
        self.settings = settings
        self.clock = bus.clock  # the one clock (kq.clock): tests drive the term on fake time
        # `workers`: MultiKueue worker clusters among `clusters` (their queue statuses are paced slower)
        status_every = {c: settings.worker_status_interval_s if c in workers else settings.status_interval_s
                        for c in clusters}
        self.partitions = {c: Partition(c, epoch, config, status_every[c], settings.pending_interval_s,
                                        settings.pending_in_flight or None, writer=writer,
                                        owns=owns[c] if owns else None,
                                        status_in_flight=settings.status_in_flight or None,
                                        status_hold_s=settings.status_hold_s) for c in clusters}
        self.inputs = Inputs(self.partitions, self._lose)
        self.lost: LostLeadership | None = None
        self._asking: set[asyncio.Task[None]] = set()  # requests to the topology solver in flight
        self.log = get_logger("kq.admission", epoch=epoch, writer=writer)
        self.decided_through = 0  # mirror position: every decision taken on state up to it is published

    def _lose(self, e: LostLeadership) -> None:
        self.lost = e
        self.inputs.changed.set()

    async def run(self) -> None:
        # Placement requests go on a connection of their own: a reply must not queue behind the
        # mirror's replay batches on the shared socket (it is on every admission's path).
        self._solve_nc = await nats.connect(self.bus.config.servers(), name=f"{self.bus.name}-{self.bus.instance}-tas",
                                            max_reconnect_attempts=-1, reconnect_time_wait=0.5,
                                            **connect_options(self.bus.config, self.bus.name))
        try:
            await self._run()
        finally:
            for task in list(self._asking):
                task.cancel()
            for p in self.partitions.values():  # the gauges must not hold on to an ended term's state
                self.bus.metrics.build_deferred(self._gauges_key(p))
            await self._solve_nc.close()

    def _gauges_key(self, p: Partition) -> str:
        return f"kueue_queues:{self.writer}:{p.cluster}"  # one per term (slots may share a process)

    def outcome_filters(self) -> list[str]:
        return [subjects.outcome_subject(self.writer, c) for c in self.clusters]

    async def before_deciding(self) -> None:
        """After the fence, before the first decision (sharded admission waits for other slots here)."""

    async def _run(self) -> None:
        outcomes = self.outcomes = self.bus.replay(subjects.EVENTS_STREAM, self.outcome_filters(),
                                                   self.inputs.on_outcome, deliver="last_per_subject")
        mirror = self.mirror = self.bus.replay(subjects.OBJECTS_STREAM, mirror_filters(self.clusters),
                                               self.inputs.on_object, deliver="last_per_subject",
                                               batch=self.settings.replay_batch, ahead=self.inputs.ahead,
                                               ahead_depth=self.settings.replay_ahead)
        t0 = self.clock.monotonic()
        async with asyncio.TaskGroup() as tg:
            tg.create_task(outcomes.run(), name="admission:outcomes")
            await self._until(outcomes.caught_up.wait(), lambda: "outcomes replay to catch up")
            tg.create_task(mirror.run(), name="admission:mirror")
            await self._until(mirror.caught_up.wait(), lambda: f"mirror replay to catch up (handled {mirror.handled})")
            await self._until(self.inputs.synced.wait(),
                              lambda: f"sync markers of {missing_sync(self.partitions.values())}")
            for p in self.partitions.values():
                p.mark_rebuilt()
            self.log.info("state rebuilt", objects=mirror.handled, seconds=round(self.clock.monotonic() - t0, 3))
            await self._fence()
            await self.before_deciding()
            self.bus.mark_ready()
            self.log.info("deciding", clusters=list(self.clusters), seconds=round(self.clock.monotonic() - t0, 3))
            async with serving_visibility(self.bus, self.partitions):
                await self._decide()

    async def _until(self, aw: Awaitable[T], what: str | Callable[[], str]) -> T:
        """Await `aw`, saying every progress_log_s what for (no deadline: the lease code cancels
        the term if it has to)."""
        fut = asyncio.ensure_future(aw)
        try:
            while True:
                done, _ = await asyncio.wait({fut}, timeout=self.settings.progress_log_s)
                if done:
                    return fut.result()
                self.log.warning("still waiting before deciding", waiting_for=what() if callable(what) else what)
        finally:
            if not fut.done():
                fut.cancel()

    # --- 3. fence ------------------------------------------------------------------------------------

    async def _fence(self, decision: str = "fence") -> None:
        loop = asyncio.get_running_loop()
        fences = [fence_command(c, self.epoch, self.writer, decision) for c in self.clusters]
        for f in fences:
            self.inputs.fences[f.msg_id] = loop.create_future()
        acks = await self.bus.publish_many([OutMsg(f.subject, f.message, f.msg_id) for f in fences])
        for f, ack in zip(fences, acks, strict=True):
            out: CommandOutcome = await self._until(self.inputs.fences[f.msg_id], f"the outcome of {f.msg_id}")
            if not out.applied:
                raise LostLeadership(f"fence {f.msg_id} refused: {out.reason}")
            await self._until(
                self._consumed(ack.seq), f"{f.msg_id} (seq {ack.seq}) to leave {subjects.COMMANDS_STREAM}"
            )
        self.inputs.fences.clear()

    async def _consumed(self, seq: int) -> None:
        """KQ_CMD is a work queue: the fence is gone once acked, and the watcher acks a batch only
        after every command in it (and before it) was handled."""
        while True:
            try:
                await self.bus.js.get_msg(subjects.COMMANDS_STREAM, seq=seq)
            except NotFoundError:
                return
            await self.clock.sleep(self.settings.fence_poll_s)

    # --- 4. decide -----------------------------------------------------------------------------------

    async def _decide(self) -> None:
        parts = [self.partitions[c] for c in sorted(self.partitions)]
        changed = self.inputs.changed
        while True:
            if self.lost is not None:
                raise self.lost
            changed.clear()
            commands: list[Outgoing] = []
            events: list[Outgoing] = []
            produced = more = False
            round_started = self.clock.monotonic()
            deadline = round_started + self.settings.max_round_s
            seen = self.mirror.last_seq  # the cycles below run on the state up to here (no await in between)
            for p in parts:
                results: list[CycleResult] = []
                while p.wants_cycle(now := self.clock.now()):
                    started = self.clock.monotonic()
                    result = p.cycle(now)
                    self.bus.metrics.apply(metrics.attempt(result, self.clock.monotonic() - started))
                    if result.empty():
                        break  # nothing came of it: do not spin on this partition
                    results.append(result)
                    if self.clock.monotonic() >= deadline:
                        break
                more = more or p.wants_cycle(self.clock.now())
                if not results and not p.has_due(self.clock.now()):
                    continue
                produced = produced or bool(results)
                self.bus.metrics.apply(metrics.decisions(results, p.state, self.clock.now()))
                p.reported.add(results)
                self.bus.metrics.defer(self._gauges_key(p), p.take_gauges)
                outputs, errors = p.plan(results, self.clock.now())
                for err in errors:
                    self.log.error("decision not published", cluster=p.cluster, error=err)
                decided = outputs.commands
                if self.settings.record_events:
                    decided = k8s_events.with_events(decided, results, p.state, p.cluster, self.epoch,
                                                     self.clock.now(), self.writer)
                commands += trace_decisions(self.bus.tracer, p.cluster, p.traceparents, results, decided)
                events += outputs.events
            if commands or events:
                await publish(self.bus, commands, events)
            self.decided_through = seen
            for p in parts:
                for req, ask in p.take_asks():
                    task = asyncio.create_task(self._ask(p, req, ask), name=f"admission:tas:{req.workload}")
                    self._asking.add(task)
                    task.add_done_callback(self._asking.discard)
            if produced and more:
                await self._let_inputs_in(self.clock.monotonic() - round_started)
                continue
            await self._wait_for_work(parts, spin_guard=more)

    async def _let_inputs_in(self, budget_s: float) -> None:
        """Between two rounds of cycles, the mirror's waiting messages come in for up to as long as
        the round took. One yield let one replay slice (64 messages) in per round, so with rounds
        of long cycles (large-scale: 1,000 heads) the state they decided on fell ever further
        behind: finishes seen 64 per round while the quota they freed sat idle."""
        await asyncio.sleep(0)
        mirror = self.mirror
        end = self.clock.monotonic() + budget_s
        while mirror.behind > 0 and self.lost is None:
            left = end - self.clock.monotonic()
            if left <= 0:
                return
            mirror.progress.clear()
            await self.clock.wait(mirror.progress, left)

    async def _ask(self, p: Partition, req: PlacementRequest, ask: SolveRequest) -> None:
        """Ask the topology solver (request/reply) until answered or the question is moot; a
        solver that is down or failing over is asked again, the workload waits meanwhile."""
        data = placement_encoder.encode(ask)
        delay = self.settings.solve_retry_s
        while p.state.placement_outstanding(req.workload, req.id):
            t0 = self.clock.monotonic()
            try:
                msg = await self._solve_nc.request(subjects.TAS_SOLVE, data, timeout=self.settings.solve_timeout_s)
                reply = reply_decoder.decode(msg.data)
            except (nats.errors.Error, msgspec.DecodeError, msgspec.ValidationError) as e:
                self.log.warning("topology solver did not answer; asking again", workload=req.workload,
                                 error=repr(e), delay_s=delay)
                await self.clock.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            p.answer(req, reply, self.clock.now())
            self.inputs.changed.set()
            took = self.clock.monotonic() - t0
            if took > self.settings.slow_solve_s:
                self.log.warning("slow topology placement", workload=req.workload, seconds=round(took, 3),
                                 placed=reply.placed)
            return

    async def _wait_for_work(self, parts: list[Partition], spin_guard: bool) -> None:
        wakeups = [at for p in parts if (at := p.next_wakeup()) is not None]
        timeout = max(0.0, min(wakeups) - self.clock.now()) if wakeups else None
        if spin_guard:
            timeout = self.settings.spin_guard_s if timeout is None else min(timeout, self.settings.spin_guard_s)
        await self.clock.wait(self.inputs.changed, timeout)
