"""Wiring of the tas service: one lease ("tas"/"default"); while it is held, a SolverTerm.

A term (1) replays our own hold records (KQ_EVENTS, last per workload) and the mirror of the
kinds the solver reads (Topologies, ResourceFlavors, Nodes, Pods; Workloads from the first
ResourceFlavor naming a Topology on) of every configured cluster until caught up and synced,
(2) subscribes to `kq.v1.tas.solve` and answers admission until the lease is lost. A second
instance waits for the lease as a hot standby; nothing is lost when it takes over, because every
hold it must respect is either in a Workload's status (confirmed) or in a PlacementHeld record
(handed out, not yet confirmed).

Request/reply rather than a stream: admission needs one answer for one candidate now, and an
answer nobody waits for any more is worthless; what must survive (the capacity an answer
handed out) is made durable by the PlacementHeld record published before the reply.
"""

from __future__ import annotations

import asyncio

import msgspec
import nats

from kq import subjects
from kq.config import Config, ConfigError
from kq.obs import get_logger
from kq.placement import HOLDS_FILTER, PlacementHeld, SolveRequest
from kq.runtime import Backoff, Bus, Lease, connect_options, holder_name, stand
from services.tas.handlers import (
    BASE_KINDS,
    LATE_KINDS,
    NEEDED_KINDS,
    SolverInputs,
    caught_up,
    decode_request,
    record_hold,
    solve,
)

SERVICE = "tas"


class TasSettings(msgspec.Struct, frozen=True, kw_only=True):
    lease_partition: str = "default"
    lease_ttl_s: int = 5
    hold_ttl_s: float = 30.0  # an answer admission did not act on stops holding capacity after this
    restart_backoff_s: float = 0.5
    restart_backoff_max_s: float = 10.0
    replay_batch: int = 1000
    publish_timeout_s: float = 5.0  # a hold record's PubAck
    view_wait_s: float = 2.0  # longest wait for the Workload records a request says its asker had seen


def mirror_filters(clusters: tuple[str, ...], kinds: tuple[str, ...] = NEEDED_KINDS) -> list[str]:
    out: list[str] = []
    for c in clusters:
        out += [subjects.object_filter(c, k) for k in kinds]
        out += [subjects.sync_subject(c, k) for k in kinds]
    return out


class SolverTerm:
    def __init__(self, bus: Bus, clusters: tuple[str, ...], epoch: int, settings: TasSettings) -> None:
        self.bus = bus
        self.clusters = clusters
        self.epoch = epoch
        self.settings = settings
        self.inputs = SolverInputs(clusters, hold_ttl_s=settings.hold_ttl_s)
        self._finishing: set[asyncio.Task[None]] = set()
        self.workloads_ready = asyncio.Event()  # Workloads and Pods followed, replayed and synced
        self.log = get_logger("kq.tas", epoch=epoch)

    async def run(self) -> None:
        holds = self.bus.replay(subjects.EVENTS_STREAM, HOLDS_FILTER, self.inputs.on_hold, deliver="last_per_subject")
        mirror = self.bus.replay(subjects.OBJECTS_STREAM, mirror_filters(self.clusters, BASE_KINDS),
                                 self.inputs.on_object, deliver="last_per_subject", batch=self.settings.replay_batch)
        t0 = self.bus.clock.monotonic()
        async with asyncio.TaskGroup() as tg:
            tg.create_task(holds.run(), name="tas:holds")
            await holds.caught_up.wait()
            tg.create_task(mirror.run(), name="tas:mirror")
            await mirror.caught_up.wait()
            await self.inputs.synced.wait()
            tg.create_task(self._follow_workloads(), name="tas:follow-workloads")
            if self.inputs.wants_workloads.is_set():
                await self.workloads_ready.wait()
            self.log.info("state rebuilt", objects=mirror.handled, holds=holds.handled,
                          workloads=self.workloads_ready.is_set(),
                          seconds=round(self.bus.clock.monotonic() - t0, 3))
            # Requests and replies on a connection of their own, not behind the mirror's batches.
            self._nc = await nats.connect(self.bus.config.servers(), name=f"tas-{self.bus.instance}-solve",
                                          max_reconnect_attempts=-1, reconnect_time_wait=0.5,
                                          **connect_options(self.bus.config, self.bus.name))
            try:
                await self._nc.subscribe(subjects.TAS_SOLVE, queue="tas", cb=self._on_solve)
                self.bus.mark_ready()
                await asyncio.Event().wait()  # until the lease code cancels the term
            finally:
                await self._nc.close()

    async def _follow_workloads(self) -> None:
        """From the first flavor naming a Topology on, the Workloads and Pods too (last value each, then
        live): until then nothing is placed, so neither is read (world.LATE_KINDS)."""
        await self.inputs.wants_workloads.wait()
        replay = self.bus.replay(subjects.OBJECTS_STREAM, mirror_filters(self.clusters, LATE_KINDS),
                                 self.inputs.on_object, deliver="last_per_subject", batch=self.settings.replay_batch)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(replay.run(), name="tas:workloads")
            await replay.caught_up.wait()
            await self.inputs.workloads_synced.wait()
            self.workloads_ready.set()
            self.log.info("following Workloads and Pods", replayed=replay.handled)

    async def _on_solve(self, msg) -> None:
        """Solve in arrival order (synchronously: each answer sees the holds of the one before),
        then record the hold and reply off the subscription, so PubAcks overlap. A request whose
        asker saw newer Workload records waits for them here; nats-py runs this callback once at a
        time, so the requests behind it wait too and the order stays the arrival order."""
        req = decode_request(msg.data)
        if self.inputs.wants_workloads.is_set() and not self.workloads_ready.is_set():
            await self.workloads_ready.wait()  # a flavor just named a Topology: the placements Workloads hold first
        if isinstance(req, SolveRequest) and not await caught_up(self.inputs, req, self.bus.clock,
                                                                      self.settings.view_wait_s):
            self.log.warning("answering from a view older than the asker's", workload=f"{req.namespace}/{req.name}",
                             as_of=req.as_of, seen=self.inputs.worlds[req.cluster].workload_seq)
        try:
            reply, hold = solve(self.inputs, req, self.bus.clock.now())
        except Exception as e:  # a bug: say so loudly; admission asks again
            self.log.error("solve failed", error=repr(e), exc_info=e)
            return
        task = asyncio.create_task(self._finish(msg.reply, reply, hold))
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)

    async def _finish(self, reply_to: str, reply: bytes, hold: PlacementHeld | None) -> None:
        try:
            if hold is not None:
                await record_hold(self._nc.jetstream(), hold, self.settings.publish_timeout_s)
            if reply_to:
                await self._nc.publish(reply_to, reply)
        except Exception as e:  # noqa: BLE001 - not recorded means not answered: admission asks again
            self.log.warning("answer not recorded; not replying", error=repr(e))


async def main(bus: Bus, config: Config, settings: TasSettings | None = None) -> None:
    settings = settings or TasSettings()
    clusters = tuple(c.name for c in config.clusters)
    if not clusters:
        raise ConfigError("tas: no clusters configured (config `clusters`)")
    holder = holder_name(config.instance)
    lease = Lease(bus, SERVICE, settings.lease_partition, holder, ttl=settings.lease_ttl_s, clock=bus.clock)

    async def term(epoch: int) -> None:
        await SolverTerm(bus, clusters, epoch, settings).run()

    await stand(bus, lease, term, log=get_logger("kq.tas", instance=config.instance),
                backoff=Backoff(settings.restart_backoff_s, settings.restart_backoff_max_s))
