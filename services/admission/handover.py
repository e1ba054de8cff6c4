"""One term of one admission slot (sharded admission): a LeaderTerm that decides only for the
cohort trees hashed to its slot, and hands trees over safely.

Within a slot, handover is today's failover: the new term has a higher epoch for the slot's own
writer ("admission-<slot>"), fences it (the watcher then refuses the old term's late commands), and
waits on echo gates while an older write is not yet in the mirror.

Across slots, a cohort edit can move a ClusterQueue from slot A's tree into slot B's. Slot A's
writer is not fenced by B's epoch, so B must not decide for the moved queue while A may still be
deciding for it, nor before A's commands for it are applied and visible. What we do:

1. A term whose slot gains a ClusterQueue it had seen belonging to another slot ends at once,
   before deciding anything on the edited tree (LostLeadership); the slot is stood for again and
   the next term starts from the mirror.
2. Every term, before its first decision, after fencing its own writer:
   a. reports its position (the KQ_OBJECTS sequence up to which everything it decided is
      published; while not deciding yet, how far it has read) in the board, and keeps reporting;
   b. waits until every other slot's last report is at or past its own mirror position M. A slot
      that has read the record moving a queue out of its tree stops deciding for it, and a report
      past that record means its commands for the queue are all published;
   c. publishes a second fence ("handover") and waits until it is consumed: every command queued
      before it, the other slots' commands for the moved queues included, has been applied or
      refused, and its outcome published;
   d. reads the outcomes up to their last sequence: an applied write of another slot on a
      workload of ours that the mirror does not show yet becomes an echo gate (plan/partition.py).
Always doing 2 (not only after a move) keeps it simple: it costs a term start one more fence and
the wait for the other slots to have read as far. Reports are written only after the term fenced
its own writer, so a late command of a stale holder of that slot can no longer be applied.

The filter: the core (core/ownership.py) decides only for trees whose root hashes to this slot.
"""

from __future__ import annotations

import asyncio
import functools

import nats.errors
from nats.js.errors import NotFoundError

from kq import subjects
from kq.runtime import Bus
from services.admission.board import Board, Position
from services.admission.core.model import SchedulerConfig
from services.admission.core.ownership import slot_of
from services.admission.leader import LeaderTerm, TermSettings
from services.admission.plan.partition import LostLeadership, Partition


def slot_writer(slot: int) -> str:
    return f"admission-{slot}"


class SlotOwnership:
    """The core's predicate for one cluster: the tree root hashes to our slot (cached per root)."""

    def __init__(self, cluster: str, slot: int, shards: int) -> None:
        self.cluster, self.slot, self.shards = cluster, slot, shards
        self._known: dict[str, bool] = {}

    def __call__(self, root: str) -> bool:
        mine = self._known.get(root)
        if mine is None:
            mine = self._known[root] = slot_of(self.cluster, root, self.shards) == self.slot
        return mine


class SlotTerm(LeaderTerm):
    def __init__(self, bus: Bus, clusters: tuple[str, ...], config: SchedulerConfig, epoch: int,
                 settings: TermSettings, *, slot: int, shards: int, board: Board, report_s: float) -> None:
        owns = {c: SlotOwnership(c, slot, shards) for c in clusters}
        super().__init__(bus, clusters, config, epoch, settings, writer=slot_writer(slot), owns=owns)
        self.slot, self.shards, self.board, self.report_s = slot, shards, board, report_s
        self.deciding = False
        self._foreign: dict[str, set[str] | None] = dict.fromkeys(clusters)  # queues seen in another slot
        self._reporter: asyncio.Task[None] | None = None
        for p in self.partitions.values():
            p.on_tree_record = functools.partial(self._check_moves, p)

    def outcome_filters(self) -> list[str]:
        """Our outcomes and every other slot's (their writes on our workloads become echo gates)."""
        return [subjects.outcome_subject(slot_writer(s), c) for s in range(self.shards) for c in self.clusters]

    # --- 1. a queue moved into our slot ----------------------------------------------------------------

    def _check_moves(self, p: Partition) -> None:
        if not p.rebuilt:
            return  # the baseline is taken when the replay has caught up (mark_rebuilt calls us)
        owned = p.state.owned_roots()
        foreign = self._foreign[p.cluster]
        if foreign is None:
            self._foreign[p.cluster] = {n for n, mine in owned.items() if not mine}
            return
        moved = sorted(n for n, mine in owned.items() if mine and n in foreign)
        if moved:
            self._lose(LostLeadership(f"{p.cluster}: ClusterQueue(s) {', '.join(moved)} moved into slot {self.slot}; "
                                      "a new term takes them over after the other slots let go"))
            return
        foreign.update(n for n, mine in owned.items() if not mine)

    # --- 2. before the first decision ------------------------------------------------------------------

    def position(self) -> int:
        return self.decided_through if self.deciding else self.mirror.last_seq

    async def _report(self) -> None:
        last = -1
        quiet = 0.0
        while True:
            seq = self.position()
            if seq != last or quiet >= 30 * self.report_s:  # rewritten now and then: the bucket ages values out
                try:
                    await self.board.report(Position(slot=self.slot, epoch=self.epoch, seq=seq))
                    last, quiet = seq, 0.0
                except (TimeoutError, nats.errors.Error) as e:  # the others wait for it: keep trying
                    self.log.warning("position not reported", seq=seq, error=repr(e))
            await self.clock.sleep(self.report_s)
            quiet += self.report_s

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            if self._reporter is not None:
                self._reporter.cancel()
                await asyncio.gather(self._reporter, return_exceptions=True)

    async def before_deciding(self) -> None:
        self._reporter = asyncio.create_task(self._report(), name=f"admission:slot-{self.slot}:position")
        mark = self.mirror.last_seq
        await self._until(self._others_past(mark), lambda: f"the other slots to report mirror position {mark}")
        await self._fence("handover")
        last = await self._last_outcome_seq()
        await self._until(self._outcomes_past(last), f"outcomes up to seq {last}")
        self.decided_through = self.mirror.last_seq  # nothing decided yet: true of all read so far
        self.deciding = True
        self.log.info("slot handed over", slot=self.slot, shards=self.shards, mirror_seq=mark)

    async def _others_past(self, mark: int) -> None:
        waiting = [s for s in range(self.shards) if s != self.slot]
        while waiting:
            positions = await asyncio.gather(*(self.board.position(s) for s in waiting))
            waiting = [s for s, pos in zip(waiting, positions, strict=True) if pos is None or pos.seq < mark]
            if waiting:
                await self.clock.sleep(self.report_s)

    async def _last_outcome_seq(self) -> int:
        last = 0
        for subject in self.outcome_filters():
            try:
                raw = await self.bus.js.get_msg(subjects.EVENTS_STREAM, subject=subject)
            except NotFoundError:
                continue
            last = max(last, int(raw.seq or 0))
        return last

    async def _outcomes_past(self, seq: int) -> None:
        while self.outcomes.last_seq < seq:
            await self.clock.sleep(self.settings.fence_poll_s)
