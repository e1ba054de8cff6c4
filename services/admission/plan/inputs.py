"""Mirror records -> admission core events. Pure: no I/O, no clock.

A record of the object mirror (kq.mirror.ObjectRecord) is decoded straight into its
kq.api Struct (a Workload into workload_record.WorkloadRecord) and converted by
core/from_api.py; a tombstone becomes `Deleted`.
Besides the event, the decoded object is returned: the shell keeps a few facts the
core does not (a Workload's admission exactly as stored, a queue's Active condition)
to write commands the watcher can compare field for field.
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec

from kq.api.registry import decode_object
from kq.mirror import ObjectRecord
from services.admission.core.from_api import event_from_api
from services.admission.core.model import Deleted, Event, Kind
from services.admission.core.validation import InvalidEvent
from services.admission.plan.workload_record import decode_workload, workload_event

# Mirror kind token -> the core's kind name, for every kind the scheduler reads.
KINDS: dict[str, Kind] = {
    "namespace": "Namespace",
    "resourceflavor": "ResourceFlavor",
    "cohort": "Cohort",
    "clusterqueue": "ClusterQueue",
    "localqueue": "LocalQueue",
    "workloadpriorityclass": "WorkloadPriorityClass",
    "admissioncheck": "AdmissionCheck",
    "workload": "Workload",
    "topology": "Topology",
}
NEEDED_KINDS: tuple[str, ...] = tuple(sorted(KINDS))


class InputError(ValueError):
    """A mirror record the scheduler cannot use; the message names the object and the field."""


class Converted(NamedTuple):
    event: Event
    obj: object | None  # the decoded kq.api object; None for a tombstone


def workload_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def convert(rec: ObjectRecord) -> Converted:
    """One mirror record as a core event (and the decoded object)."""
    kind = KINDS.get(rec.kind)
    where = f"{rec.cluster}/{rec.kind}/{workload_key(rec.namespace, rec.name) if rec.namespace else rec.name}"
    if kind is None:
        raise InputError(f"{where}: kind {rec.kind!r} is not an input of the admission scheduler")
    if rec.deleted:
        return Converted(Deleted(kind=kind, name=rec.name, namespace=rec.namespace), None)
    try:
        if kind == "Workload":  # the bulk of the records: pod sets converted once per shape
            obj = decode_workload(rec.raw)
            event: Event | None = workload_event(obj)
        else:
            obj = decode_object(rec.kind, rec.raw)
            event = event_from_api(obj)
    except (msgspec.DecodeError, msgspec.ValidationError, InvalidEvent) as e:
        raise InputError(f"{where}@{rec.resource_version}: {e}") from None
    if event is None:  # KINDS and from_api disagree: a bug, not bad input
        raise InputError(f"{where}: from_api has no conversion for {type(obj).__name__}")
    return Converted(event, obj)
