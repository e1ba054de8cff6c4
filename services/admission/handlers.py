"""Bus deliveries -> partitions, and partition outputs -> bus. No scheduling logic here.

Both inputs are replays (ordered, ack-less consumers): the mirror (KQ_OBJECTS, last value
per object, then live) and our command outcomes (KQ_EVENTS). Nothing is acked because
nothing is consumed for good: a new term rebuilds everything from the mirror. Bad input
raises PermanentError, which the runtime dead-letters loudly; the state is left unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

import msgspec

from kq import subjects
from kq.messages import CommandOutcome, outcome_decoder
from kq.mirror import MirrorRecordError, decode_marker, decode_record
from kq.runtime import Bus, Delivery, OutMsg, PermanentError
from services.admission.core.validation import InvalidEvent
from services.admission.plan.inputs import InputError, workload_key
from services.admission.plan.outputs import Outgoing
from services.admission.plan.partition import LostLeadership, Partition

_SYNC_PREFIX = f"{subjects.PREFIX}.sync."
_OBJECT_PREFIX = f"{subjects.PREFIX}.obj."


class Inputs:
    """The term's two replay handlers. `changed` is set whenever a partition's state may have
    changed (the decide loop waits on it); `synced` once every partition saw every sync marker."""

    def __init__(self, partitions: dict[str, Partition], on_lost: Callable[[LostLeadership], None]) -> None:
        self.partitions = partitions
        self.changed = asyncio.Event()
        self.synced = asyncio.Event()
        self.fences: dict[str, asyncio.Future[CommandOutcome]] = {}  # fence command id -> its outcome
        self._on_lost = on_lost

    def _partition(self, cluster: str, subject: str) -> Partition:
        p = self.partitions.get(cluster)
        if p is None:
            raise PermanentError(f"{subject}: cluster {cluster!r} is not one of ours ({sorted(self.partitions)})")
        return p

    async def on_object(self, d: Delivery) -> None:
        try:
            if d.subject.startswith(_SYNC_PREFIX):
                marker = decode_marker(d.subject, d.data)
                self._partition(marker.cluster, d.subject).apply_marker(marker)
                if not self.synced.is_set() and all(not p.missing_kinds() for p in self.partitions.values()):
                    self.synced.set()
                return
            rec = decode_record(d.subject, d.headers, d.data)
            self._partition(rec.cluster, d.subject).apply_record(rec, d.stream_seq)
        except (MirrorRecordError, InputError, InvalidEvent) as e:
            raise PermanentError(f"{d.subject} (seq {d.stream_seq}): {e}") from None
        self.changed.set()

    def ahead(self, d: Delivery) -> bool:
        """Apply this mirror record out of turn (the replay is far behind)? Yes for a Workload that
        holds quota in a deciding partition: its record frees quota (finished, evicted) or confirms
        it (our admission's echo), and decisions taken meanwhile should see that. The core keeps
        every other input in stream order; per workload the replay keeps the order."""
        if not d.subject.startswith(_OBJECT_PREFIX):
            return False
        try:
            key = subjects.parse_object_subject(d.subject)
        except ValueError:
            return False  # the in-order pass dead-letters it
        p = self.partitions.get(key.cluster)
        return p is not None and key.kind == "workload" and p.holds_quota(workload_key(key.namespace, key.name))

    async def on_outcome(self, d: Delivery) -> None:
        try:
            out = outcome_decoder.decode(d.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise PermanentError(f"{d.subject} (seq {d.stream_seq}): not a command outcome: {e}") from None
        fence = self.fences.get(out.command_id)
        if fence is not None:
            if not fence.done():
                fence.set_result(out)
            return
        p = self.partitions.get(out.cluster)
        if p is None:
            return  # a cluster this instance does not schedule (another configuration)
        try:
            if p.on_outcome(out):
                self.changed.set()
        except LostLeadership as e:
            self._on_lost(e)


def missing_sync(partitions: Iterable[Partition]) -> dict[str, list[str]]:
    return {p.cluster: p.missing_kinds() for p in partitions if p.missing_kinds()}


async def publish(bus: Bus, commands: list[Outgoing], events: list[Outgoing]) -> None:
    """Commands first (what changes the world), then the decisions' audit events; each batch
    at once with its acks awaited (publish_batch: no future per message), so on return both are stored."""
    if commands:
        await bus.publish_batch([OutMsg(o.subject, o.message, o.msg_id, o.headers) for o in commands])
    if events:
        await bus.publish_batch([OutMsg(o.subject, o.message, o.msg_id, o.headers) for o in events])
