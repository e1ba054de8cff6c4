"""A Workload mirror record as admission reads it: kq.api's Workload with the pod sets left raw.

Most of a Workload's bytes and nearly all of its conversion cost are in spec.podSets (pod
templates, containers, quantities), and most Workloads share a handful of shapes (one per job
class). So the pod sets are decoded apart, from their own bytes, and converted once per distinct
byte string: a record whose podSets are bytes already seen reuses the core's pod sets (immutable,
so sharing them between Workloads is safe). Every other field decodes exactly as in
kq.api.Workload (same types, unknown fields rejected), and pod sets seen for the first time are
decoded into kq.api.PodSet, so what is refused, and the field named, stay the same.
"""

from __future__ import annotations

import msgspec

from kq.api import kueue as api
from kq.api.meta import ObjectMeta
from kq.api.workload import KueueStruct, Positive
from services.admission.core import from_api
from services.admission.core.model import PodSet, Workload


class WorkloadSpecRecord(KueueStruct, frozen=True, kw_only=True):
    """kq.api.WorkloadSpec with pod_sets as their raw JSON."""

    pod_sets: msgspec.Raw = msgspec.Raw(b"[]")
    queue_name: str = ""
    priority_class_ref: api.PriorityClassRef | None = None
    priority: int | None = None
    active: bool | None = None  # None means true (the CRD default)
    maximum_execution_time_seconds: Positive | None = None
    preemption_gates: tuple[api.PreemptionGate, ...] = ()

    @property
    def is_active(self) -> bool:
        return self.active is not False


class WorkloadRecord(KueueStruct, frozen=True, kw_only=True):
    """kq.api.Workload with a WorkloadSpecRecord."""

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: WorkloadSpecRecord = WorkloadSpecRecord()
    status: api.WorkloadStatus = api.WorkloadStatus()
    block_owner_deletion: bool | None = None


_decoder = msgspec.json.Decoder(WorkloadRecord)
_pod_sets_decoder = msgspec.json.Decoder(tuple[api.PodSet, ...])

# podSets bytes -> the core's pod sets. Bounded: cleared when full (a new shape costs one decode).
_POD_SETS: dict[bytes, tuple[PodSet, ...]] = {}
_POD_SETS_MAX = 1024


def decode_workload(raw: bytes) -> WorkloadRecord:
    """msgspec.DecodeError/ValidationError as for kq.api.Workload (the pod sets are checked in
    workload_event)."""
    return _decoder.decode(raw)


def _pod_sets(raw: bytes, key: str) -> tuple[PodSet, ...]:
    sets = _POD_SETS.get(raw)
    if sets is not None:
        return sets
    try:
        typed = _pod_sets_decoder.decode(raw)
    except msgspec.ValidationError as e:  # the path is relative to the pod sets: say where they are
        text = str(e)
        text = text.replace("`$", "`$.spec.podSets") if " - at `$" in text else f"{text} - at `$.spec.podSets`"
        raise msgspec.ValidationError(text) from None
    sets = from_api.pod_sets(typed, key)  # InvalidEvent names the field
    if len(_POD_SETS) >= _POD_SETS_MAX:
        _POD_SETS.clear()
    _POD_SETS[raw] = sets
    return sets


def workload_event(obj: WorkloadRecord) -> Workload:
    """The core's Workload (msgspec.ValidationError for pod sets of the wrong shape, InvalidEvent
    for a bad quantity, both naming the field)."""
    sets = _pod_sets(bytes(obj.spec.pod_sets), from_api.workload_key(obj.metadata))
    return from_api.workload_of(obj.metadata, obj.spec, obj.status, sets)

