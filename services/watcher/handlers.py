"""Commands from KQ_CMD: decode -> plan (core.commands) -> conditional write -> outcome -> ack.

A batch is split by target object: commands for the same object run in stream
order, different objects run concurrently. If one command for an object must
be retried, the later ones for that object are retried too, so they never
overtake it. The outcome is published (and acknowledged by the stream) before
the command is acked; a redelivered command plans again and finds its work
done (Skip -> applied), so the outcome is the same and deduplicated.

Decisions start from the watcher's cache; a write is conditional so a stale
cache costs a 409 and a re-read. A Skip or a Refusal is only concluded on a
fresh read from the API server, except where the cache's word is final: the
cache holds every write of this watcher (write-through), so a workload it shows
already pending for the same reason, or already evicted, shows what the
watcher's own writes left; Kueue's scheduler and preemptor skip those writes on
their informer cache too. Those re-reads were ~6 % of the watcher's requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import msgspec

from kq import subjects
from kq.api.constants import KUEUE_GROUP, KUEUE_VERSION
from kq.api.events import ObjectReference
from kq.clock import rfc3339_seconds
from kq.kube import BadRequest, Conflict, Forbidden, KubeClient, KubeError, NotFound, Throttled, retry_delay
from kq.messages import (
    AdmitWorkload,
    Command,
    CommandOutcome,
    EventNote,
    EvictWorkload,
    Fence,
    FinishWorkload,
    RecordEvent,
    SetClusterQueueStatus,
    SetLocalQueueStatus,
    SetWorkloadPending,
    command_decoder,
    event_notes,
    outcome_of,
)
from kq.obs import consumer_span, get_logger
from kq.runtime import Bus, Delivery, KeyedExecutor, OutMsg, PermanentError, Place, TemporaryError
from services.watcher.apply import apply_action, read
from services.watcher.core.authority import refuse_writer
from services.watcher.core.commands import FINISHED, STALE_EPOCH, plan_command, target_ref
from services.watcher.core.mk_commands import ALREADY_FINISHED
from services.watcher.core.writes import Delete, Refusal, Skip, Write
from services.watcher.events import EventWriter
from services.watcher.objects import ClusterObjects
from services.watcher.outcomes import OutcomePublisher
from services.watcher.write_slots import WriteSlots

_KUEUE_API = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
SUPERSEDED = "Superseded"
# Commands that say all there is to say about their part of an object: a queue's whole status, a
# pending workload's QuotaReserved=False with why. Of several waiting for one object, only the newest
# needs writing: Kueue's queue controllers coalesce reconciles of one key in their work queue, and
# a scheduler that tried a workload less often would not have written the older reasons either.
_COALESCED = (SetClusterQueueStatus, SetLocalQueueStatus, SetWorkloadPending)
# Skips concluded on the cache (see the module's docstring); FINISHED: nothing un-finishes a Workload.
_DONE_ON_CACHE = {SetWorkloadPending: "Unchanged", EvictWorkload: "AlreadyEvicted", FinishWorkload: ALREADY_FINISHED}
# Commands that only report: they wait for a write slot behind every waiting command that holds or
# frees quota (write_slots.py), unless such a command waits behind them for the same object.
_BACKGROUND = (*_COALESCED, RecordEvent)


class _Blocked(TemporaryError):
    pass


class CommandExecutor:
    def __init__(self, bus: Bus, cluster: str, client: KubeClient, objects: ClusterObjects, *,
                 concurrency: int, max_replans: int) -> None:
        self.bus = bus
        self.cluster = cluster
        self.client = client
        self.objects = objects
        self.max_replans = max_replans
        self.epochs: dict[str, int] = {}  # writer -> newest epoch seen
        # object -> (stream sequence, writer, epoch, uid) of the newest coalesced command that arrived
        # for it and has not run yet (an entry leaves when that command runs: bounded by what is in flight).
        self._newest: dict[tuple[str, str, str], tuple[int, str, int, str]] = {}
        # Per target object, one group after another, each handing the next what blocked it (None:
        # nothing); API writes at most `concurrency` at a time, urgent groups first (write_slots.py).
        self._writes: KeyedExecutor[BaseException] = KeyedExecutor(concurrency)
        self._slots = WriteSlots(concurrency)
        self._urgent_lined: dict[Any, int] = {}  # object -> its urgent groups lined up and not yet done
        # workload -> (stream sequence, writer, epoch, uid) of the newest AdmitWorkload that arrived for
        # it and has not run yet: an older SetWorkloadPending of it is moot (the admit overwrites it).
        self._admits: dict[tuple[str, str, str], tuple[int, str, int, str]] = {}
        # The Events of a batch's writes are recorded after its slot is freed, as background writes
        # (Kueue's recorder is asynchronous too); at most this many commands' Events wait at once.
        self._notes_room = asyncio.Semaphore(4 * concurrency)
        self._note_tasks: set[asyncio.Task[None]] = set()
        self.log = get_logger("kq.watcher.commands", cluster=cluster)
        self.events = EventWriter(client, bus.instance, bus.clock)
        self._outcomes = OutcomePublisher(bus)  # every group's outcomes in the next publish (outcomes.py)

    # --- epochs survive a restart through the outcomes we published ---

    async def restore_epochs(self, timeout_s: float = 60.0) -> None:
        """The newest outcome per writer tells the epoch it had reached (a lower bound; commands raise it)."""

        async def handle(d: Delivery) -> None:
            try:
                out = msgspec.json.decode(d.data, type=CommandOutcome)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return
            if out.cluster == self.cluster and out.reason != STALE_EPOCH:
                self.epochs[out.writer] = max(self.epochs.get(out.writer, 0), out.epoch)

        replay = self.bus.replay(subjects.EVENTS_STREAM, f"{subjects.PREFIX}.out.*.{subjects.escape(self.cluster)}",
                                 handle, deliver="last_per_subject")
        async with replay:
            await replay.wait_caught_up(timeout=timeout_s)

    # --- the batch handler ---

    async def handle_batch(self, deliveries: list[Delivery]) -> Sequence[BaseException | None]:
        """Batches may overlap (the consumer pipelines them): everything that depends on stream
        order, the epochs and the per-object queue, is settled before the first await."""
        results: list[BaseException | None] = [None] * len(deliveries)
        groups: dict[Any, list[tuple[int, Command, int]]] = {}
        admitting: set[Any] = set()  # workloads with an AdmitWorkload in this batch
        # Epochs in stream order: a command is judged against the newest epoch its writer had
        # shown up to that point (in this batch or an earlier one), whatever order groups run in.
        running = self.epochs
        for i, d in enumerate(deliveries):
            try:
                cmd = command_decoder.decode(d.data)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                results[i] = PermanentError(f"{d.subject}: not a command: {e}")
                continue
            if why := refuse_writer(subjects.command_writer(d.subject), cmd):
                self.log.warning("command refused", subject=d.subject, id=cmd.id, why=why)
                results[i] = PermanentError(f"{d.subject}: {why}")
                continue
            if cmd.cluster != self.cluster:
                results[i] = PermanentError(
                    f"{d.subject}: command for cluster {cmd.cluster!r} on {self.cluster!r}'s subject"
                )
                continue
            seen = running.get(cmd.writer, 0)
            running[cmd.writer] = max(seen, cmd.epoch)
            ref = target_ref(cmd) or ("fence", cmd.writer, "")
            if isinstance(cmd, _COALESCED):
                newest = self._newest.get(ref)
                if newest is None or newest[0] < d.stream_seq:  # a redelivered older one stays older
                    self._newest[ref] = (d.stream_seq, cmd.writer, cmd.epoch, getattr(cmd, "uid", ""))
            elif isinstance(cmd, AdmitWorkload):
                admit = self._admits.get(ref)
                if admit is None or admit[0] < d.stream_seq:
                    self._admits[ref] = (d.stream_seq, cmd.writer, cmd.epoch, cmd.uid)
                admitting.add(ref)
            groups.setdefault(ref, []).append((i, cmd, seen))
        # Per object, a group waits for the same object's group of an earlier batch; if that one
        # left a command to retry, this one's commands are retried too, so none overtakes it.
        lined_up = [(ref, items, self._writes.line_up(ref)) for ref, items in groups.items()]
        urgent_groups = {ref for ref, items in groups.items()
                         if any(not isinstance(cmd, _BACKGROUND) for _, cmd, _ in items)}
        for ref in urgent_groups:
            self._urgent_lined[ref] = self._urgent_lined.get(ref, 0) + 1
            # The same object's report waiting for a background slot is now in its way: a pending reason
            # the admission makes moot goes on without a slot (run_group takes one if it must write after
            # all); anything else waits in the urgent line.
            if not (ref in admitting and self._slots.excuse(ref)):
                self._slots.promote(ref)

        async def run_group(ref: Any, items: list[tuple[int, Command, int]], place: Place[BaseException]) -> None:
            blocked: BaseException | None = None
            decided: list[tuple[int, Command, CommandOutcome]] = []
            notes: list[tuple[Command, str, tuple[EventNote, ...]]] = []
            try:
                blocked = await place.turn()
                # (asked even of a stale command: the newest one's entry goes when it runs)
                skip = [blocked is None and self._superseded(ref, cmd, deliveries[i].stream_seq)
                        and cmd.epoch >= max_epoch for i, cmd, max_epoch in items]
                writes = blocked is None and not all(skip)
                # Urgent if it is, or if an urgent group of the same object waits behind it.
                urgent = ref in urgent_groups or self._urgent_lined.get(ref, 0) > 0
                # The slot is held for the API writes only, not for publishing outcomes; `held` is the
                # line it was handed over in (what release wants), None while none is held.
                held: bool | None = None
                try:
                    if writes:
                        held = await self._slots.acquire(urgent=urgent, key=ref)
                    for (i, cmd, max_epoch), superseded in zip(items, skip, strict=True):
                        if blocked is not None:
                            results[i] = _Blocked(f"an earlier command for the same object is retrying: {blocked}")
                            continue
                        if superseded or (cmd.epoch >= max_epoch
                                          and self._superseded_since(ref, cmd, deliveries[i].stream_seq)):
                            decided.append((i, cmd, self._outcome(cmd, True, SUPERSEDED, "")))
                            continue
                        if held is None:  # excused from the background line (excuse), yet this one is not moot
                            held = await self._slots.acquire(urgent=True, key=ref)
                        seq = deliveries[i].stream_seq
                        if isinstance(cmd, AdmitWorkload) and self._admits.get(ref, (-1,))[0] == seq:
                            del self._admits[ref]  # it runs: the entry goes (bounded by what is in flight)
                        try:
                            # The command's span continues the decider's (one trace per workload, kq.obs).
                            with consumer_span(self.bus.tracer, f"watcher.command {type(cmd).__name__}",
                                               deliveries[i].headers, {"kq.command": cmd.id}):
                                outcome = await self._decide(cmd, max_epoch)
                            decided.append((i, cmd, outcome))
                            if written := self._notes_of(cmd, outcome):
                                notes.append(written)
                        except TemporaryError as e:
                            results[i] = blocked = e
                        except Exception as e:
                            results[i] = blocked = e
                finally:
                    if held is not None:
                        self._slots.release(held)
                for cmd, uid, cmd_notes in notes:
                    await self._record_later(cmd, uid, cmd_notes)
                if decided:  # outcomes stored before handle_batch returns, hence before any ack
                    try:
                        await self._report([(cmd, out) for _, cmd, out in decided])
                    except Exception as e:  # retried: the re-plan finds the work done, same outcome
                        for i, _, _ in decided:
                            results[i] = e
                        blocked = blocked or e
            except BaseException as e:
                blocked = blocked or e
                raise
            finally:
                if ref in urgent_groups:
                    left = self._urgent_lined.get(ref, 1) - 1
                    if left > 0:
                        self._urgent_lined[ref] = left
                    else:
                        self._urgent_lined.pop(ref, None)
                place.leave(blocked)

        async with asyncio.TaskGroup() as tg:
            for ref, items, place in lined_up:
                tg.create_task(run_group(ref, items, place))
        return results

    def _superseded(self, ref: Any, cmd: Command, seq: int) -> bool:
        """A coalesced command that a newer one of the same writer (same or newer epoch, same object
        incarnation) replaces whole: writing it would cost a PATCH (and for a workload an Event), a
        watch event and a mirror record for nothing."""
        if not isinstance(cmd, _COALESCED):
            return False
        if isinstance(cmd, SetWorkloadPending) and self._admit_follows(ref, cmd, seq):
            newest = self._newest.get(ref)
            if newest is not None and newest[0] <= seq:
                del self._newest[ref]  # no newer report of it is waiting: the entry goes with this one
            return True
        newest = self._newest.get(ref)
        if newest is None:
            return False
        if newest[0] <= seq:  # this one is the newest: it runs, and the entry goes
            del self._newest[ref]
            return False
        return newest[1] == cmd.writer and newest[2] >= cmd.epoch and newest[3] == getattr(cmd, "uid", "")

    def _superseded_since(self, ref: Any, cmd: Command, seq: int) -> bool:
        """What arrived while a coalesced command waited for its write slot replaces it whole (as
        `_superseded`, which already let it run; the newer command's entry stays for it)."""
        if not isinstance(cmd, _COALESCED):
            return False
        if isinstance(cmd, SetWorkloadPending) and self._admit_follows(ref, cmd, seq):
            return True
        newest = self._newest.get(ref)
        return (newest is not None and newest[0] > seq and newest[1] == cmd.writer and newest[2] >= cmd.epoch
                and newest[3] == getattr(cmd, "uid", ""))

    def _admit_follows(self, ref: Any, cmd: SetWorkloadPending, seq: int) -> bool:
        """An admission of the same workload incarnation by the same writer (same or newer epoch) came
        after this pending reason: the admit sets QuotaReserved=True over it, so it need not be written."""
        admit = self._admits.get(ref)
        return (admit is not None and admit[0] > seq and admit[1] == cmd.writer and admit[2] >= cmd.epoch
                and admit[3] == cmd.uid)

    # --- one command ---

    async def execute(self, cmd: Command, max_epoch: int | None = None) -> CommandOutcome:
        """Apply one command and publish its outcome. max_epoch defaults to the newest seen."""
        if max_epoch is None:
            max_epoch = self.epochs.get(cmd.writer, 0)
        outcome = await self._decide(cmd, max_epoch)
        if written := self._notes_of(cmd, outcome):
            await self._record_notes(*written)
        await self._report([(cmd, outcome)])
        return outcome

    async def _decide(self, cmd: Command, max_epoch: int) -> CommandOutcome:
        """Apply one command (the API writes); its outcome is not published yet, its Events not recorded."""
        outcome = await self._apply(cmd, max_epoch)
        if outcome.reason != STALE_EPOCH:
            self.epochs[cmd.writer] = max(self.epochs.get(cmd.writer, 0), cmd.epoch)
        return outcome

    @staticmethod
    def _notes_of(cmd: Command, outcome: CommandOutcome) -> tuple[Command, str, tuple[EventNote, ...]] | None:
        """The Events to record now that the command's write is done (as Kueue records them), if any."""
        uid, notes = event_notes(cmd)
        return (cmd, uid, notes) if notes and outcome.applied and not outcome.reason else None

    async def _record_later(self, cmd: Command, uid: str, notes: tuple[EventNote, ...]) -> None:
        """Record in the background, in a background write slot: an admission's or eviction's Events do
        not hold its write slot nor its outcome (what frees or holds quota goes first). Waits only when
        too many commands' Events are waiting already."""
        await self._notes_room.acquire()

        async def record() -> None:
            try:
                held = await self._slots.acquire(urgent=False)  # (no key: never excused)
                try:
                    await self._record_notes(cmd, uid, notes)
                finally:
                    if held is not None:
                        self._slots.release(held)
            finally:
                self._notes_room.release()

        task = asyncio.create_task(record(), name=f"events:{cmd.id}")
        self._note_tasks.add(task)
        task.add_done_callback(self._note_tasks.discard)

    async def _record_notes(self, cmd: Command, uid: str, notes: tuple[EventNote, ...]) -> None:
        """Best effort, as Kubernetes' own recorder: an event that cannot be written is logged and
        dropped (the command's write stands; retrying the command would not write it again)."""
        ref = target_ref(cmd)
        if ref is None:
            return
        _kind, ns, name = ref
        involved = ObjectReference(api_version=_KUEUE_API, kind="Workload", namespace=ns, name=name, uid=uid)

        async def record(note: EventNote) -> None:
            ev = RecordEvent(id=f"{cmd.id}|{note.reason}", cluster=cmd.cluster, writer=cmd.writer, epoch=cmd.epoch,
                             involved=involved, event_type=note.event_type, reason=note.reason, action=note.reason,
                             message=note.message, at=note.at)
            try:
                await self.events.record_note(ev)
            except KubeError as e:
                self.log.warning("event not recorded", command=cmd.id, reason=note.reason, error=str(e))

        # Each note is its own Event (the name hashes the reason): written side by side, not one
        # round trip after the other (QuotaReserved and Admitted come together). The others run as
        # tasks started before the first's request is queued, so all go out in the same write; not
        # through gather, whose future and callbacks cost more than the two tasks' work.
        others = [asyncio.ensure_future(record(note)) for note in notes[1:]]
        try:
            await record(notes[0])
        except BaseException:
            for task in others:
                task.cancel()
            raise
        for task in others:
            await task

    async def _report(self, done: list[tuple[Command, CommandOutcome]]) -> None:
        """Publish outcomes, in order, awaiting the stream's acks (deduplicated by command id), with
        those of the groups finishing meanwhile."""
        await self._outcomes.publish([OutMsg(subjects.outcome_subject(cmd.writer, self.cluster), out, f"out:{cmd.id}")
                                      for cmd, out in done])
        for cmd, out in done:
            log = self.log.info if out.applied else self.log.warning
            log("command done", id=cmd.id, type=type(cmd).__name__, applied=out.applied, reason=out.reason)

    def _outcome(self, cmd: Command, applied: bool, reason: str, rv: str) -> CommandOutcome:
        # Plan reasons are the watcher's str constants; kq.messages.OutcomeReason lists their values.
        return outcome_of(cmd, cluster=self.cluster, applied=applied, reason=reason,  # type: ignore[arg-type]  # plan reasons are str constants whose values OutcomeReason lists
                          resource_version=rv)

    async def _apply(self, cmd: Command, max_epoch: int) -> CommandOutcome:
        ref = target_ref(cmd)
        if ref is None or isinstance(cmd, Fence) or cmd.epoch < max_epoch:
            plan = plan_command(cmd, None, max_epoch, rfc3339_seconds(self.bus.clock.now()))
            # No target or a stale epoch: nothing to write or delete, only a skip or a refusal.
            assert isinstance(plan, (Skip, Refusal)), plan
            return self._outcome(cmd, isinstance(plan, Skip), plan.reason, "")
        if isinstance(cmd, RecordEvent):
            return await self._record_event(cmd)
        kind, ns, name = ref
        current: Any = self.objects.get(kind, ns, name) if self.objects.caches(kind) else None
        fresh = current is None
        if fresh and not self.objects.gone(getattr(cmd, "uid", "")):  # seen deleted: the server's word too
            current = await self._read(kind, ns, name)
        wrote = False
        for _ in range(self.max_replans):
            plan = plan_command(cmd, current, max_epoch, rfc3339_seconds(self.bus.clock.now()))
            rv = current.metadata.resource_version if current is not None else ""
            if isinstance(plan, (Skip, Refusal)):
                # Conclude only on the server's word, unless the cache's word is final: a stale epoch,
                # a Workload (of the command's uid) already Finished, or already as the command wants it.
                if not fresh and not self._final_on_cache(cmd, plan.reason):
                    current, fresh = await self._read(kind, ns, name), True
                    continue
                if isinstance(plan, Refusal):
                    return self._outcome(cmd, False, plan.reason, rv)
                return self._outcome(cmd, True, "" if wrote else plan.reason, rv)
            try:
                current = await apply_action(self.client, plan)
                wrote, fresh = True, True
                if current is not None and self.objects.caches(kind) and not self.objects.gone(current.metadata.uid):
                    # Write-through: the next command for this object plans on what we wrote, not on a
                    # copy the watch has not brought yet (a 409 and a GET). Older echoes are ignored;
                    # an object deleted while we waited for the answer stays deleted.
                    self.objects.put(kind, current)
            except NotFound:
                # The server's word that no object of this name exists, so none of the command's uid:
                # a GET would only say so again (it was ~0.7 reads a MultiKueue job, for copies the
                # dispatcher deleted while their admission was on its way).
                gone = isinstance(plan, (Write, Delete)) and bool(getattr(cmd, "uid", ""))
                current, fresh = (None if gone else await self._read(kind, ns, name)), True
            except Conflict:
                current, fresh = await self._read(kind, ns, name), True
            except (BadRequest, Forbidden) as e:
                return self._outcome(cmd, False, "Rejected" if isinstance(e, BadRequest) else "Forbidden", rv)
            except Throttled as e:
                raise TemporaryError(str(e), delay_s=retry_delay(e, 0.2)) from e
            except KubeError as e:
                raise TemporaryError(str(e)) from e
        raise TemporaryError(f"{kind} {ns}/{name} kept changing under {type(cmd).__name__} {cmd.id}")

    @staticmethod
    def _final_on_cache(cmd: Command, reason: str) -> bool:
        return reason in (STALE_EPOCH, FINISHED) or _DONE_ON_CACHE.get(type(cmd)) == reason

    async def _record_event(self, cmd: RecordEvent) -> CommandOutcome:
        try:
            applied, reason, rv = await self.events.record(cmd)
        except (BadRequest, Forbidden) as e:
            return self._outcome(cmd, False, "Rejected" if isinstance(e, BadRequest) else "Forbidden", "")
        except Throttled as e:
            raise TemporaryError(str(e), delay_s=retry_delay(e, 0.2)) from e
        except KubeError as e:
            raise TemporaryError(str(e)) from e
        return self._outcome(cmd, applied, reason, rv)

    async def _read(self, kind: str, ns: str, name: str) -> Any:
        try:
            return await read(self.client, kind, ns, name)
        except Throttled as e:
            raise TemporaryError(str(e), delay_s=retry_delay(e, 0.2)) from e
        except KubeError as e:
            raise TemporaryError(str(e)) from e
