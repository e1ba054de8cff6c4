"""Sharded admission: a replica holds a balanced share of the slots (`admission.shards > 1`).

Each slot has its own lease ("admission"/"<leasePartition>-<slot>"), epoch and writer
("admission-<slot>"); while a replica holds a slot's lease it runs one SlotTerm for it
(handover.py), which replays the whole mirror but decides only for that slot's cohort trees.

Balance: every replica announces itself with a TTL'd heartbeat (board.py). Every
`balance_interval_s` it counts the live replicas, its fair share is ceil(shards / replicas),
and then
- while it holds fewer slots than its share, it tries the free leases (starting at an offset
  derived from its name, so replicas do not all race for slot 0);
- while it holds more (a replica joined), it gives the highest slot up: the term is cancelled
  (it stops deciding at once) and the lease released, so a replica under its share takes it
  without waiting for the TTL; the new term fences before deciding.
A replica that dies stops renewing: its leases lapse within `leaseTtlS`, its heartbeat within
`replicaTtlS`, and the others' shares grow to cover its slots.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import zlib

import nats.errors

from kq.config import AdmissionConfig, ConfigError
from kq.obs import get_logger
from kq.runtime import Backoff, Bus, Lease, hold
from kq.runtime.leadership import free_ended_term
from services.admission.board import Board, Heartbeat
from services.admission.core.model import SchedulerConfig
from services.admission.handover import SlotTerm

SERVICE = "admission"


def fair_share(shards: int, replicas: int) -> int:
    return math.ceil(shards / max(1, replicas))


def check_sharding(settings: AdmissionConfig, sched: SchedulerConfig) -> None:
    """Settings sharding cannot honour are refused, naming the field."""
    if settings.shards > 1 and sched.block_admission:
        # blockAdmission stops admission in every ClusterQueue while any admitted workload is not
        # ready: a cluster-wide condition that slots deciding independently cannot hold exactly.
        raise ConfigError("admission.shards > 1 cannot be combined with kueue waitForPodsReady.blockAdmission "
                          "(it blocks admission across all cohort trees at once); set admission.shards: 1")


class Replica:
    def __init__(self, bus: Bus, clusters: tuple[str, ...], sched: SchedulerConfig, settings: AdmissionConfig,
                 instance: str, holder: str) -> None:
        self.bus, self.clusters, self.sched, self.settings = bus, clusters, sched, settings
        self.instance, self.holder = instance, holder
        self.shards = settings.shards
        self.board = Board(bus, settings.replica_ttl_s)
        self.held: dict[int, asyncio.Task[None]] = {}  # slot -> its holder task (lease + term)
        self.leases = {s: Lease(bus, SERVICE, f"{settings.lease_partition}-{s}", holder, ttl=settings.lease_ttl_s,
                                clock=bus.clock, own_connection=True) for s in range(self.shards)}
        self.not_before: dict[int, float] = {}  # slot -> when to stand again after its term failed
        self.backoff = {s: Backoff(settings.restart_backoff_s, settings.restart_backoff_max_s)
                        for s in range(self.shards)}
        self.offset = zlib.crc32(instance.encode()) % self.shards
        self.log = get_logger("kq.admission", instance=instance)

    async def run(self) -> None:
        self.bus.status = "standby"
        self.bus.metrics.role = "follower"
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._heartbeat(), name="admission:heartbeat")
                tg.create_task(self._balance(), name="admission:balance")
        finally:
            await self._give_up_all()
            with contextlib.suppress(Exception):
                await self.board.withdraw(self.instance)

    # --- heartbeat and balance --------------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        every = self.settings.replica_ttl_s / 3
        while True:
            try:
                await self.board.announce(Heartbeat(instance=self.instance, holder=self.holder,
                                                    slots=tuple(sorted(self.held))))
            except (TimeoutError, nats.errors.Error) as e:
                self.log.warning("heartbeat not written", error=repr(e))
            await self.bus.clock.sleep(every)

    async def _balance(self) -> None:
        while True:
            try:
                await self._rebalance()
            except (TimeoutError, nats.errors.Error) as e:
                self.log.warning("rebalance failed; trying again", error=repr(e))
            await self.bus.clock.sleep(self.settings.balance_interval_s)

    async def _rebalance(self) -> None:
        live = {b.instance for b in await self.board.replicas()} | {self.instance}
        share = fair_share(self.shards, len(live))
        while len(self.held) > share:
            slot = max(self.held)
            self.log.info("giving a slot up", slot=slot, held=sorted(self.held), share=share, replicas=len(live))
            await self._give_up(slot)
        now = self.bus.clock.monotonic()
        for i in range(self.shards):
            if len(self.held) >= share:
                break
            slot = (self.offset + i) % self.shards
            if slot in self.held or self.not_before.get(slot, 0.0) > now:
                continue
            lease = self.leases[slot]
            if await lease.try_acquire():
                assert lease.epoch is not None
                self.log.info("slot taken", slot=slot, epoch=lease.epoch, share=share, replicas=len(live))
                self.held[slot] = asyncio.create_task(self._hold(slot, lease, lease.epoch),
                                                      name=f"admission:slot-{slot}")

    # --- one held slot ----------------------------------------------------------------------------------

    async def _hold(self, slot: int, lease: Lease, epoch: int) -> None:
        """Run the slot's term while its lease is held; on any end, release the lease (unless lost)."""
        self.bus.metrics.role = "leader"  # Kueue's replica_role: this replica decides for some trees
        term = SlotTerm(self.bus, self.clusters, self.sched, epoch, self.settings.term, slot=slot, shards=self.shards,
                        board=self.board, report_s=min(0.2, self.settings.balance_interval_s))
        failed = False
        try:
            held = await hold(lease, term.run(), name=f"admission:slot-{slot}")
            if not held.finished:
                self.log.warning("slot lease lost", slot=slot, epoch=epoch)
        except Exception as e:  # noqa: BLE001 - the term's end is reported, then the slot is stood for again
            failed = True
            self.log.warning("slot term ended; standing for it again", slot=slot, epoch=epoch, reason=repr(e))
        finally:
            self.held.pop(slot, None)
            if failed:
                self.not_before[slot] = self.bus.clock.monotonic() + self.backoff[slot].next()
            else:
                self.backoff[slot].reset()
            if not self.held:
                self.bus.status, self.bus.metrics.role = "standby", "follower"
        del term  # the next term of any slot replays the whole mirror: this one's copy goes first
        await free_ended_term()

    async def _give_up(self, slot: int) -> None:
        task = self.held.get(slot)
        if task is None:
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        self.held.pop(slot, None)

    async def _give_up_all(self) -> None:
        for slot in sorted(self.held):
            await self._give_up(slot)
