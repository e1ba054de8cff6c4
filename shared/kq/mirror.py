"""The object mirror on the bus: one record per Kubernetes object, its latest state.

The watcher publishes each object to subjects.object_subject(cluster, kind, ns, name)
in KQ_OBJECTS (one message kept per subject): the body is the object's raw
Kubernetes JSON, the headers say what it is:

    Kq-Op:  put | delete     a delete is a tombstone whose body is the last known object
    Kq-Rv:  <resourceVersion>
    Kq-Uid: <uid>

After each full list of a kind it publishes a SyncMarker on subjects.sync_subject
(same stream, so it is ordered after the listed objects). Msg ids are deterministic
(mirror_msg_id) so a re-list inside the duplicate window stores nothing new.

MirrorView is the in-memory last-value map a service or the CLI keeps from a replay.
This module does no I/O itself; MirrorView.replay wires it to a bus replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from kq import subjects
from kq.subjects import ObjectKey

if TYPE_CHECKING:
    from kq.runtime.bus import Bus
    from kq.runtime.delivery import Delivery
    from kq.runtime.replay import Replay

OP = "Kq-Op"
RV = "Kq-Rv"
UID = "Kq-Uid"
NATS_TTL = "Nats-TTL"
PUT: Literal["put"] = "put"
DELETE: Literal["delete"] = "delete"


class MirrorRecordError(ValueError):
    pass


class ObjectRecord(msgspec.Struct, frozen=True, kw_only=True):
    cluster: str
    kind: str  # lower-case kind token, as in subjects
    namespace: str  # "" when cluster-scoped
    name: str
    deleted: bool
    resource_version: str
    uid: str
    raw: bytes  # the Kubernetes JSON (the last known object for a tombstone)

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(self.cluster, self.kind, self.namespace, self.name)

    @property
    def subject(self) -> str:
        return subjects.object_subject(self.cluster, self.kind, self.namespace or None, self.name)


class SyncMarker(msgspec.Struct, frozen=True, kw_only=True):
    """Published after each full list: the mirror of (cluster, kind) now reflects this list."""

    cluster: str
    kind: str
    resource_version: str  # of the list
    count: int  # objects in the list


_marker_decoder = msgspec.json.Decoder(SyncMarker)
_encoder = msgspec.json.Encoder()


def record_headers(
    op: Literal["put", "delete"], resource_version: str, uid: str, *, ttl_s: int | None = None
) -> dict[str, str]:
    """Headers of a mirror record. ttl_s (tombstones only, whole seconds) lets the stream drop
    a tombstone later; readers that come after that simply never see the object."""
    if op not in (PUT, DELETE):
        raise MirrorRecordError(f"{OP}: {op!r} is not put or delete")
    if not resource_version:
        raise MirrorRecordError(f"{RV}: empty resourceVersion")
    if not uid:
        raise MirrorRecordError(f"{UID}: empty uid")
    h = {OP: op, RV: resource_version, UID: uid}
    if ttl_s is not None:
        if op != DELETE or ttl_s < 1:
            raise MirrorRecordError(f"{NATS_TTL}: only tombstones take a TTL, of at least 1s (got {ttl_s!r} on {op})")
        h[NATS_TTL] = f"{ttl_s}s"
    return h


def mirror_msg_id(cluster: str, kind: str, namespace: str | None, name: str, resource_version: str, op: str) -> str:
    """Deterministic Nats-Msg-Id of one state of one object."""
    return f"obj:{cluster}/{kind.lower()}/{namespace or '_'}/{name}@{resource_version}:{op}"


def sync_msg_id(cluster: str, kind: str, resource_version: str) -> str:
    return f"sync:{cluster}/{kind.lower()}@{resource_version}"


def encode_marker(marker: SyncMarker) -> bytes:
    return _encoder.encode(marker)


def decode_record(subject: str, headers: Mapping[str, str] | None, data: bytes) -> ObjectRecord:
    """A mirror message back into a record; MirrorRecordError names what is wrong."""
    try:
        key = subjects.parse_object_subject(subject)
    except ValueError as e:
        raise MirrorRecordError(str(e)) from None
    h = headers or {}
    op = h.get(OP)
    if op not in (PUT, DELETE):
        raise MirrorRecordError(f"{subject}: header {OP} is {op!r}, want put or delete")
    rv = h.get(RV)
    if not rv:
        raise MirrorRecordError(f"{subject}: header {RV} missing")
    uid = h.get(UID)
    if not uid:
        raise MirrorRecordError(f"{subject}: header {UID} missing")
    return ObjectRecord(
        cluster=key.cluster, kind=key.kind, namespace=key.namespace, name=key.name,
        deleted=op == DELETE, resource_version=rv, uid=uid, raw=bytes(data),
    )


def decode_marker(subject: str, data: bytes) -> SyncMarker:
    try:
        cluster, kind = subjects.parse_sync_subject(subject)
        marker = _marker_decoder.decode(data)
    except (ValueError, msgspec.DecodeError) as e:
        raise MirrorRecordError(f"{subject}: bad sync marker: {e}") from None
    if (marker.cluster, marker.kind) != (cluster, kind):
        raise MirrorRecordError(f"{subject}: marker says {marker.cluster}/{marker.kind}")
    return marker


def _default_decoder(kind: str, raw: bytes) -> Any:
    from kq.api.registry import decode_object  # the API types are only needed for typed access

    return decode_object(kind, raw)


class MirrorView:
    """Last value per object, from replaying KQ_OBJECTS. Tombstones remove the object."""

    def __init__(self, decoder: Callable[[str, bytes], Any] | None = None,
                 on_invalid: Callable[[ObjectKey, str], None] | None = None) -> None:
        self._by_kind: dict[tuple[str, str], dict[tuple[str, str], ObjectRecord]] = {}
        self._typed: dict[ObjectKey, tuple[str, Any]] = {}
        # Objects the API server stored that do not decode into their type (nothing in front of the
        # cluster checked them): key -> the error naming the field. typed() treats them as absent;
        # on_invalid hears of each once per resourceVersion, so a service can say so.
        self.invalid: dict[ObjectKey, str] = {}
        self._on_invalid = on_invalid
        self.synced: dict[tuple[str, str], SyncMarker] = {}
        self._decode = decoder or _default_decoder

    def apply(self, subject: str, headers: Mapping[str, str] | None, data: bytes) -> ObjectRecord | SyncMarker:
        """Fold one mirror message in; returns what it was."""
        if subject.startswith(f"{subjects.PREFIX}.sync."):
            marker = decode_marker(subject, data)
            self.synced[(marker.cluster, marker.kind)] = marker
            return marker
        rec = decode_record(subject, headers, data)
        objs = self._by_kind.setdefault((rec.cluster, rec.kind), {})
        if rec.deleted:
            objs.pop((rec.namespace, rec.name), None)
            self._typed.pop(rec.key, None)
            self.invalid.pop(rec.key, None)
        else:
            objs[(rec.namespace, rec.name)] = rec
        return rec

    def apply_delivery(self, d: Delivery) -> ObjectRecord | SyncMarker:
        return self.apply(d.subject, d.headers, d.data)

    def get(self, key: ObjectKey) -> ObjectRecord | None:
        return self._by_kind.get((key.cluster, key.kind), {}).get((key.namespace, key.name))

    def items(self, cluster: str, kind: str) -> list[ObjectRecord]:
        """The live objects of a kind in a cluster, sorted by (namespace, name)."""
        objs = self._by_kind.get((cluster, kind.lower()), {})
        return [objs[k] for k in sorted(objs)]

    def kinds(self) -> list[tuple[str, str]]:
        return sorted(k for k, v in self._by_kind.items() if v)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_kind.values())

    def __iter__(self) -> Iterator[ObjectRecord]:
        for ck in sorted(self._by_kind):
            yield from self.items(*ck)

    def is_synced(self, cluster: str, kind: str) -> bool:
        return (cluster, kind.lower()) in self.synced

    def typed(self, key: ObjectKey) -> Any | None:
        """The object decoded into its kq.api Struct (cached per resourceVersion); None when there is
        none, or it does not decode (then `invalid` says why)."""
        rec = self.get(key)
        if rec is None:
            return None
        hit = self._typed.get(key)
        if hit is not None and hit[0] == rec.resource_version:
            return hit[1]
        try:
            obj = self._decode(rec.kind, rec.raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            obj = None
            self.invalid[key] = str(e)
            if self._on_invalid is not None:
                self._on_invalid(key, str(e))
        else:
            self.invalid.pop(key, None)
        self._typed[key] = (rec.resource_version, obj)
        return obj

    def typed_items(self, cluster: str, kind: str) -> list[Any]:
        """Every object of a kind that decodes (see `invalid` for the others)."""
        return [o for o in (self.typed(r.key) for r in self.items(cluster, kind)) if o is not None]

    def replay(self, bus: Bus, cluster: str = "*", kind: str = "*",
               on_change: Callable[[ObjectRecord | SyncMarker], None] | None = None) -> Replay:
        """A replay of the mirror (last value per object) feeding this view; run it or
        `async with` it, then `await r.wait_caught_up()`. on_change sees each applied message."""
        filters = [subjects.object_filter(cluster, kind), subjects.SYNC_ALL]

        async def handle(d: Delivery) -> None:
            if d.subject.startswith(f"{subjects.PREFIX}.sync."):
                c, k = subjects.parse_sync_subject(d.subject)
                if (cluster != "*" and c != cluster) or (kind != "*" and k != kind.lower()):
                    return
            what = self.apply_delivery(d)
            if on_change is not None:
                on_change(what)

        return bus.replay(subjects.OBJECTS_STREAM, filters, handle, deliver="last_per_subject")
