"""plan/workload_record.py: a Workload record read with its pod sets apart gives the same event as
the whole kq.api.Workload, shares the pod sets of identical shapes, and refuses what kq.api refuses."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
import yaml
from test_admission_from_api import WORKLOAD

from kq.api.registry import decode_object
from services.admission.core.from_api import event_from_api
from services.admission.core.validation import InvalidEvent
from services.admission.plan.workload_record import decode_workload, workload_event

BASE: dict[str, Any] = yaml.safe_load(WORKLOAD)


def _variant(change: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    for path, value in change.items():
        *parents, last = path.split(".")
        node = doc
        for p in parents:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return doc


VARIANTS = {
    "rich": {},
    "no-status": {"status": None},
    "inactive-with-class": {"spec.active": False, "spec.priorityClassRef": {
        "group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}, "spec.priority": None},
    "overhead-and-pod-level": {"spec.podSets": [{"name": "a", "count": 2, "template": {"spec": {
        "overhead": {"cpu": "100m"}, "resources": {"requests": {"memory": "2Gi"}},
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}]},
    "no-pod-sets": {"spec.podSets": None},
    "backoff": {"status": {"requeueState": {"requeueAt": "2026-01-01T00:01:00Z"},
                           "conditions": [{"type": "Requeued", "status": "False", "reason": "Backoff"}]}},
}


@pytest.mark.parametrize("change", VARIANTS.values(), ids=VARIANTS.keys())
def test_same_event_as_the_whole_workload(change: dict[str, Any]) -> None:
    raw = msgspec.json.encode(_variant(change))
    assert workload_event(decode_workload(raw)) == event_from_api(decode_object("workload", raw))


def test_identical_pod_sets_are_converted_once_and_shared() -> None:
    a = workload_event(decode_workload(msgspec.json.encode(_variant({"metadata.name": "a", "spec.priority": 1}))))
    b = workload_event(decode_workload(msgspec.json.encode(_variant({"metadata.name": "b", "spec.priority": 2}))))
    assert (a.name, b.name, a.priority, b.priority) == ("a", "b", 1, 2)
    assert a.pod_sets is b.pod_sets


@pytest.mark.parametrize(("change", "error", "fragment"), [
    pytest.param({"spec.podSets": "x"}, msgspec.ValidationError, "$.spec.podSets`", id="pod-sets-not-a-list"),
    pytest.param({"spec.podSets": [{"count": "two", "template": {}}]}, msgspec.ValidationError,
                 "$.spec.podSets[0].count`", id="field-inside-a-pod-set"),
    pytest.param({"spec.podSets": [{"template": {}, "sise": 1}]}, msgspec.ValidationError, "sise", id="unknown-field"),
    pytest.param({"spec.podSets": [{"name": "m", "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}}]}, InvalidEvent,
        "Workload ns/w: spec.podSets[0].template.spec.containers[0].resources.requests[cpu]", id="bad-quantity"),
    pytest.param({"spec.queueNme": "x"}, msgspec.ValidationError, "queueNme", id="unknown-spec-field"),
    pytest.param({"status.conditions": [{"type": "Admitted"}]}, msgspec.ValidationError, "status",
                 id="status-field"),
])
def test_refuses_what_kq_api_refuses_naming_the_field(change: dict[str, Any], error: type[Exception],
                                                       fragment: str) -> None:
    raw = msgspec.json.encode(_variant(change))
    with pytest.raises(error):  # the whole kq.api.Workload refuses it too
        event_from_api(decode_object("workload", raw))
    with pytest.raises(error) as got:
        workload_event(decode_workload(raw))
    assert fragment in str(got.value)
