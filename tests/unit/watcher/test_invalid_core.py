"""core/invalid.py: the message names the field; the condition is written once, kept in place with the
rest of the status, and removed (only kq's) when the object decodes again."""

from __future__ import annotations

from typing import Any

import msgspec

from kq.api.registry import decode_object
from services.watcher.core.invalid import decode_or_error, describe, plan_fixed, plan_invalid, spec_seen
from services.watcher.core.writes import Skip, Write

NOW = "2026-11-24T04:00:00Z"


def _cq(resource: dict[str, Any], conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "cq", "resourceVersion": "7", "generation": 2},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [resource]}]}]}}
    if conditions is not None:
        obj["status"] = {"conditions": conditions}
    return obj


def test_the_message_names_the_field_where_msgspec_put_it() -> None:
    assert describe("Expected `int`, got `str` - at `$.spec.podSets[0].count`") == \
        "spec.podSets[0].count: Expected `int`, got `str`"
    assert describe("Object contains unknown field `nominalQouta` - at `$.spec.x[0]`") == \
        "spec.x[0].nominalQouta: Object contains unknown field `nominalQouta`"
    assert describe("Object contains unknown field `spce`") == "spce: Object contains unknown field `spce`"
    assert describe("Object missing required field `value`") == "value: Object missing required field `value`"
    assert describe("Input data was truncated") == "Input data was truncated"
    _, error = decode_or_error("clusterqueue", msgspec.json.encode(_cq({"name": "cpu", "nominalQouta": "4"})))
    assert error is not None and error.startswith("spec.resourceGroups[0].flavors[0].resources[0].nominalQouta: ")


def test_a_quota_that_is_no_quantity_is_named_though_it_decodes_as_a_string() -> None:
    obj, error = decode_or_error("clusterqueue", msgspec.json.encode(_cq({"name": "cpu", "nominalQuota": "lots"})))
    assert obj is None and error is not None
    assert error.startswith("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: ")
    ok, none = decode_or_error("clusterqueue", msgspec.json.encode(_cq({"name": "cpu", "nominalQuota": "4"})))
    assert ok is not None and none is None


def test_quantities_are_checked_again_only_when_the_spec_moved() -> None:
    good = _cq({"name": "cpu", "nominalQuota": "4"})
    good["metadata"]["uid"] = "u1"
    obj, _ = decode_or_error("clusterqueue", msgspec.json.encode(good))
    seen = spec_seen("clusterqueue", obj)
    assert seen == ("u1", 2)
    bad = _cq({"name": "cpu", "nominalQuota": "lots"})
    bad["metadata"]["uid"] = "u1"
    bad["metadata"]["generation"] = 3  # the spec changed: checked
    assert decode_or_error("clusterqueue", msgspec.json.encode(bad), seen)[0] is None
    bad["metadata"]["uid"] = "u2"  # another incarnation at the same generation: checked
    bad["metadata"]["generation"] = 2
    assert decode_or_error("clusterqueue", msgspec.json.encode(bad), seen)[0] is None
    # The same uid and generation is the spec already checked (a status write): not walked again,
    # which this copy, made up with a bad quota at the checked generation, shows.
    bad["metadata"]["uid"] = "u1"
    assert decode_or_error("clusterqueue", msgspec.json.encode(bad), seen)[0] is not None
    assert decode_or_error("clusterqueue", msgspec.json.encode(bad))[0] is None
    assert spec_seen("workload", obj) is None  # only the kinds whose quantities are checked


def test_the_condition_is_set_once_beside_the_rest_of_the_status() -> None:
    other = {"type": "Other", "status": "True", "reason": "R", "message": "", "lastTransitionTime": NOW}
    obj = _cq({"name": "cpu", "nominalQouta": "4"}, [other])
    write = plan_invalid("clusterqueue", obj, "spec.x: bad", NOW)
    assert isinstance(write, Write) and write.subresource == "status" and write.resource_version == "7"
    patch = msgspec.json.decode(write.patch)
    assert patch["metadata"] == {"resourceVersion": "7"}
    other_, active = patch["status"]["conditions"]
    assert other_ == other
    assert (active["type"], active["status"], active["reason"], active["observedGeneration"]) == \
        ("Active", "False", "InvalidSpec", 2)
    assert "spec.x: bad" in active["message"]
    # Written: the next event plans nothing; a different error rewrites the message, not the transition time.
    obj["status"]["conditions"] = patch["status"]["conditions"]
    assert isinstance(plan_invalid("clusterqueue", obj, "spec.x: bad", "2027-01-01T00:00:00Z"), Skip)
    again = plan_invalid("clusterqueue", obj, "spec.y: worse", "2027-01-01T00:00:00Z")
    assert isinstance(again, Write)
    (_, active2) = msgspec.json.decode(again.patch)["status"]["conditions"]
    assert active2["lastTransitionTime"] == NOW and "spec.y: worse" in active2["message"]


def test_a_workload_holding_quota_is_not_unadmitted_by_a_bad_field() -> None:
    wl = {"metadata": {"name": "w", "namespace": "ns", "resourceVersion": "3"},
          "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}]}}
    assert plan_invalid("workload", wl, "spec.podSets[0].count: bad", NOW) is None  # the caller records an Event
    wl["status"] = {}
    write = plan_invalid("workload", wl, "spec.podSets[0].count: bad", NOW)
    assert isinstance(write, Write) and write.namespace == "ns"
    (cond,) = msgspec.json.decode(write.patch)["status"]["conditions"]
    assert (cond["type"], cond["reason"]) == ("QuotaReserved", "Misconfigured")


def test_fixed_removes_only_the_condition_kq_set() -> None:
    other = {"type": "Other", "status": "True", "reason": "R", "message": "", "lastTransitionTime": NOW}
    ours = {"type": "Active", "status": "False", "reason": "InvalidSpec", "message": "m", "lastTransitionTime": NOW}
    fixed = decode_object("clusterqueue", msgspec.json.encode(_cq({"name": "cpu", "nominalQuota": "4"}, [other, ours])))
    write = plan_fixed("clusterqueue", fixed, marked=False)  # found again after a restart: the reason is kq's
    assert isinstance(write, Write)
    assert [c["type"] for c in msgspec.json.decode(write.patch)["status"]["conditions"]] == ["Other"]
    clean = decode_object("clusterqueue", msgspec.json.encode(_cq({"name": "cpu", "nominalQuota": "4"}, [other])))
    assert plan_fixed("clusterqueue", clean, marked=True) is None
    # A Workload's Misconfigured is also admission's: removed only when this watcher set it.
    wl = decode_object("workload", msgspec.json.encode({
        "metadata": {"name": "w", "namespace": "ns", "resourceVersion": "3"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "image": "i"}]}}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Misconfigured",
                                   "message": "LocalQueue lq doesn't exist", "lastTransitionTime": NOW}]}}))
    assert plan_fixed("workload", wl, marked=False) is None
    assert isinstance(plan_fixed("workload", wl, marked=True), Write)
