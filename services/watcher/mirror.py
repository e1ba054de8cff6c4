"""Publishing the mirror: each object's latest state into KQ_OBJECTS, batched, in order.

`MirrorIndex` is what this watcher has handed over for publication, per object
(uid, resourceVersion). It is rebuilt on start by replaying the mirror itself,
so a restarted watcher re-publishes only what changed while it was away and
tombstones only what vanished: nothing lost, nothing stored twice.

`MirrorPublisher` owns the one queue to the bus. Records are coalesced per
object within a round (the latest wins, so order per subject is kept) and
published together; a SyncMarker is published only after everything queued
before it. A failed round is retried in place: records are never dropped.

Rounds are pipelined: up to `rounds` of them await their acks at once, so a
record (a finish that frees quota) does not wait out the previous round's round
trip before it is even sent. The newer state of an object whose older state is
still unacknowledged is held back until that one is stored (the rest of its round
goes on): a retried older state never lands after a newer one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import msgspec
from nats.js.errors import NotFoundError

from kq import subjects
from kq.mirror import (
    DELETE,
    PUT,
    SyncMarker,
    decode_record,
    encode_marker,
    mirror_msg_id,
    record_headers,
    sync_msg_id,
)
from kq.obs import get_logger
from kq.runtime import Bus, OutMsg

Key = tuple[str, str, str]  # (kind token, namespace, name)


class _HeadMeta(msgspec.Struct, frozen=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""


class ObjectHead(msgspec.Struct, frozen=True):
    """Just enough of any object to key and version it (fast to decode)."""

    metadata: _HeadMeta = _HeadMeta()


head_decoder = msgspec.json.Decoder(ObjectHead)
_minimal_encoder = msgspec.json.Encoder()


@dataclass(slots=True)
class Record:
    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    deleted: bool
    raw: bytes

    @property
    def key(self) -> Key:
        return (self.kind, self.namespace, self.name)


class MirrorIndex:
    """(kind, namespace, name) -> (uid, resourceVersion) of what is (or is about to be) in the mirror."""

    def __init__(self) -> None:
        self._by_kind: dict[str, dict[tuple[str, str], tuple[str, str]]] = {}

    def get(self, key: Key) -> tuple[str, str] | None:
        return self._by_kind.get(key[0], {}).get((key[1], key[2]))

    def set(self, key: Key, uid: str, rv: str) -> None:
        self._by_kind.setdefault(key[0], {})[(key[1], key[2])] = (uid, rv)

    def remove(self, key: Key) -> None:
        self._by_kind.get(key[0], {}).pop((key[1], key[2]), None)

    def keys(self, kind: str) -> list[tuple[str, str]]:
        return sorted(self._by_kind.get(kind, {}))

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_kind.values())

    async def rebuild(self, bus: Bus, cluster: str, timeout_s: float = 120.0) -> None:
        """Replay this cluster's part of the mirror (last value per subject) into the index."""

        async def handle(d) -> None:
            rec = decode_record(d.subject, d.headers, d.data)
            key = (rec.kind, rec.namespace, rec.name)
            if rec.deleted:
                self.remove(key)
            else:
                self.set(key, rec.uid, rec.resource_version)

        replay = bus.replay(
            subjects.OBJECTS_STREAM, subjects.object_filter(cluster), handle, deliver="last_per_subject"
        )
        async with replay:
            await replay.wait_caught_up(timeout=timeout_s)


class MirrorPublisher:
    def __init__(self, bus: Bus, cluster: str, *, batch: int, queue_size: int, rounds: int = 1) -> None:
        if rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {rounds}")
        self._bus = bus
        self.cluster = cluster
        self._batch = batch
        self._rounds = rounds
        self._queue: asyncio.Queue[Record | SyncMarker] = asyncio.Queue(maxsize=queue_size)
        self._in_flight: dict[asyncio.Task[None], set[Key]] = {}  # rounds awaiting their acks -> their objects
        self._busy: set[Key] = set()  # the objects of those rounds
        self._held: dict[Key, Record] = {}  # newer states of busy objects, in arrival order
        self.published = 0  # records acknowledged by the stream (for tests and logs)
        self.synced: set[str] = set()  # kinds whose SyncMarker (hence whole list) is stored
        self.progress = asyncio.Event()  # set after each stored marker; waiters clear it
        self.log = get_logger("kq.watcher.mirror", cluster=cluster)

    async def put(self, item: Record | SyncMarker) -> None:
        await self._queue.put(item)

    def pending(self) -> int:
        return self._queue.qsize()

    async def run(self) -> None:
        """Drain the queue forever: records in rounds, a marker after what precedes it."""
        q = self._queue
        try:
            while True:
                items: list[Record | SyncMarker] = []
                if not q.empty() or not self._held:
                    items.append(await q.get())
                elif all(key in self._busy for key in self._held) and not any(t.done() for t in self._in_flight):
                    # a held state goes once its object's round is stored, or with what comes next
                    getter = asyncio.ensure_future(q.get())
                    try:
                        await asyncio.wait({getter, *self._in_flight}, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        if not getter.done():
                            # Not awaited: a CancelledError there could be this task's own cancel,
                            # and swallowing it left the watcher unstoppable. (A cancelled
                            # Queue.get leaves its item in the queue.)
                            getter.cancel()
                    if getter.done() and not getter.cancelled():
                        items.append(getter.result())
                while len(items) < self._batch and not q.empty():
                    items.append(q.get_nowait())
                await self._publish_items(items)
        finally:
            for task in self._in_flight:
                task.cancel()

    async def _publish_items(self, items: list[Record | SyncMarker]) -> None:
        run: dict[Key, Record] = {}
        for item in items:
            if isinstance(item, SyncMarker):
                await self._send_round(run)
                run = {}
                while self._held or self._in_flight:  # every record before it is stored first
                    if self._in_flight:
                        await asyncio.wait(self._in_flight, return_when=asyncio.FIRST_COMPLETED)
                    await self._send_round({})
                await self._retrying(lambda m=item: self._publish_marker(m))
            else:
                run.pop(item.key, None)  # re-insert so the latest state keeps its place last
                run[item.key] = item
        await self._send_round(run)

    async def _send_round(self, run: dict[Key, Record]) -> None:
        """Start publishing, once a round slot is free, the records of `run` and the held ones
        whose objects have no state awaiting acks any more; its acks are awaited in the background.
        A record of an object that has is held (the newest state of each object) until that is stored."""
        self._reap()
        out: dict[Key, Record] = {key: self._held.pop(key) for key in [k for k in self._held if k not in self._busy]}
        for key, r in run.items():
            if key in self._busy:
                self._held.pop(key, None)
                self._held[key] = r
            else:
                out.pop(key, None)  # newer than a held state of the same object
                out[key] = r
        if not out:
            return
        while len(self._in_flight) >= self._rounds:
            await asyncio.wait(self._in_flight, return_when=asyncio.FIRST_COMPLETED)
            self._reap()  # (the objects of `out` were not busy, and only this loop makes them so)
        task = asyncio.create_task(self._publish_records(out), name=f"mirror:{self.cluster}")
        self._in_flight[task] = set(out)
        self._busy.update(out)

    def _reap(self) -> None:
        """Forget stored rounds; a round that failed for good fails the publisher."""
        for task in [t for t in self._in_flight if t.done()]:
            self._busy.difference_update(self._in_flight.pop(task))
            task.result()

    async def _publish_records(self, run: dict[Key, Record]) -> None:
        if not run:
            return
        msgs = [self._out(r) for r in run.values()]
        await self._retrying(lambda: self._bus.publish_batch(msgs))
        self.published += len(msgs)

    def _out(self, r: Record) -> OutMsg:
        op = DELETE if r.deleted else PUT
        return OutMsg(
            subjects.object_subject(self.cluster, r.kind, r.namespace or None, r.name),
            r.raw,
            mirror_msg_id(self.cluster, r.kind, r.namespace or None, r.name, r.resource_version, op),
            record_headers(op, r.resource_version, r.uid),
        )

    async def _publish_marker(self, m: SyncMarker) -> None:
        await self._bus.publish(subjects.sync_subject(m.cluster, m.kind), encode_marker(m),
                                msg_id=sync_msg_id(m.cluster, m.kind, m.resource_version))
        self.synced.add(m.kind)
        self.progress.set()

    async def wait_synced(self, kinds: list[str]) -> None:
        """Until every kind's first full list is stored in the mirror."""
        while not all(kind in self.synced for kind in kinds):
            self.progress.clear()
            await self.progress.wait()

    async def _retrying(self, fn) -> None:
        delay = 0.2
        while True:
            try:
                await fn()
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the bus is down or slow: keep the records, try again
                self.log.warning("mirror publish failed; retrying", error=repr(e), delay_s=delay)
                await self._bus.clock.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def last_known(self, kind: str, namespace: str, name: str, uid: str, rv: str) -> bytes:
        """The body for a tombstone of an object that vanished while we were not watching:
        its last mirrored state, or a minimal object naming it."""
        subject = subjects.object_subject(self.cluster, kind, namespace or None, name)
        try:
            msg = await self._bus.js.get_msg(subjects.OBJECTS_STREAM, subject=subject, direct=True)
            if msg.data:
                return bytes(msg.data)
        except NotFoundError:
            pass
        except Exception as e:
            self.log.warning("cannot read last mirrored state", subject=subject, error=repr(e))
        meta: dict[str, str] = {"name": name, "uid": uid, "resourceVersion": rv}
        if namespace:
            meta["namespace"] = namespace
        return _minimal_encoder.encode({"metadata": meta})
