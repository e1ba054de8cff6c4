"""Bus messages across versions (kq.messages SCHEMA_VERSION): within one version changes are additive,
so a newer service reads an older one's messages and the other way round during a rolling upgrade.

The pin below lists each message's required fields as of schema 1. A new message type needs no
entry; a new field on a pinned message needs a default (else an older writer's message, without
it, would no longer decode), and no pinned field may go (an older reader requires it)."""

from __future__ import annotations

import typing
from typing import Any

import msgspec
import pytest

from kq import messages as m
from kq.api.kueue import Admission

PINNED: dict[str, list[str]] = {
    "AdmitWorkload": ["admission", "cluster", "id", "name", "namespace", "uid", "writer"],
    "EvictWorkload": ["cluster", "id", "message", "name", "namespace", "reason", "uid", "writer"],
    "SetWorkloadPending": ["cluster", "id", "message", "name", "namespace", "reason", "uid", "writer"],
    "DeactivateWorkload": ["cluster", "id", "message", "name", "namespace", "reason", "uid", "writer"],
    "FinishRequeueBackoff": ["cluster", "id", "name", "namespace", "requeue_at", "uid", "writer"],
    "SetClusterQueueStatus": ["cluster", "id", "name", "status", "writer"],
    "SetLocalQueueStatus": ["cluster", "id", "name", "namespace", "status", "writer"],
    "SetAdmissionCheckState": ["check", "cluster", "id", "message", "name", "namespace", "state", "uid", "writer"],
    "SetNominatedClusters": ["cluster", "clusters", "id", "name", "namespace", "uid", "writer"],
    "FinishWorkload": ["cluster", "id", "message", "name", "namespace", "reason", "uid", "writer"],
    "DeleteWorkload": ["cluster", "id", "name", "namespace", "reason", "uid", "writer"],
    "SyncJobStatus": ["cluster", "id", "name", "namespace", "status", "uid", "writer"],
    "SetActiveCondition": ["cluster", "condition", "id", "kind", "name", "writer"],
    "RecordEvent": ["at", "cluster", "event_type", "id", "involved", "message", "reason", "writer"],
    "Fence": ["cluster", "id", "writer"],
    "WorkloadAdmittedEvent": ["at", "cluster", "cluster_queue", "flavors", "id", "message", "name", "namespace"],
    "WorkloadPendingEvent": ["at", "cluster", "id", "message", "name", "namespace", "reason"],
    "WorkloadPreemptedEvent": ["at", "cluster", "id", "message", "name", "namespace", "preemptor", "reason"],
    "WorkloadEvictedEvent": ["at", "cluster", "id", "message", "name", "namespace", "reason"],
    "CommandOutcome": ["applied", "cluster", "command_id", "epoch", "writer"],
    "TimerMessage": ["at", "purpose", "service"],
    "MkPendingWorkload": ["admission_check", "cluster_queue", "clusters", "name", "namespace", "pod_sets", "uid"],
    "MkNomination": ["clusters"],
    "MkPodSet": ["count", "name", "requests"],
    "MkSettledWorkload": ["name", "namespace", "uid"],
}


def _types() -> dict[str, type]:
    found = [*typing.get_args(m.Command), *typing.get_args(m.Decision), m.CommandOutcome, m.TimerMessage,
             m.MkPendingWorkload, m.MkNomination, m.MkPodSet, m.MkSettledWorkload]
    return {t.__name__: t for t in found}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_a_pinned_message_keeps_reading_older_and_newer_messages(name: str) -> None:
    info = msgspec.inspect.type_info(_types()[name])
    assert isinstance(info, msgspec.inspect.StructType)
    fields = {f.name: f for f in info.fields}
    required = sorted(n for n, f in fields.items() if f.required)
    added = sorted(set(required) - set(PINNED[name]))
    assert not added, (f"{name}: new required field(s) {added}: give them a default (messages of an older "
                       f"service lack them) or bump kq.messages.SCHEMA_VERSION")
    gone = sorted(set(PINNED[name]) - set(fields))
    assert not gone, f"{name}: field(s) {gone} removed: an older service still requires them; bump SCHEMA_VERSION"


def _admit(**extra: Any) -> m.AdmitWorkload:
    return m.AdmitWorkload(id="a|1", cluster="manager", writer="admission", namespace="ns", name="w", uid="u1",
                           admission=Admission(cluster_queue="cq"), **extra)


def test_an_older_message_without_the_defaulted_fields_decodes_with_the_defaults() -> None:
    newer = _admit()
    doc = msgspec.to_builtins(newer)
    required = {f.encode_name for f in msgspec.inspect.type_info(m.AdmitWorkload).fields  # type: ignore[attr-defined]
                if f.required}
    older = {k: v for k, v in doc.items() if k in required or k == "type"}
    assert older != doc  # something was dropped: the test means something
    assert m.command_decoder.decode(msgspec.json.encode(older)) == newer


def test_a_newer_message_with_a_field_this_version_does_not_know_decodes() -> None:
    doc = msgspec.to_builtins(_admit())
    doc["addedInSchema2"] = {"anything": [1, 2]}
    assert m.command_decoder.decode(msgspec.json.encode(doc)) == _admit()
