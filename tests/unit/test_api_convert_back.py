"""v1beta2 -> v1beta1 (the CRDs' conversion webhook) and the ConversionReview it answers: a round trip
through v1beta1 gives every v1beta2 object back, and a bad v1beta1 write is refused naming the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from unit.test_api_convert import CASES

from kq.api.convert import ConversionError, convert_to_v1beta2
from kq.api.convert_back import V1BETA1, conversion_review, convert_object, convert_to_v1beta1

V1BETA2 = "kueue.x-k8s.io/v1beta2"
FROM_V1BETA1 = [(case_id, yaml.safe_load(old), yaml.safe_load(new)) for case_id, old, new in CASES
                if yaml.safe_load(old)["apiVersion"] == V1BETA1]


@pytest.mark.parametrize(("legacy", "current"), [c[1:] for c in FROM_V1BETA1], ids=[c[0] for c in FROM_V1BETA1])
def test_a_round_trip_through_v1beta1_gives_the_object_back(legacy: dict[str, Any], current: dict[str, Any]) -> None:
    back = convert_to_v1beta1(current)
    assert back["apiVersion"] == V1BETA1
    assert convert_to_v1beta2(back) == current
    assert current["apiVersion"] == V1BETA2  # the input is left alone


def test_v1beta2_names_become_v1beta1_names() -> None:
    cq = {"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": "cq"},
          "spec": {"cohortName": "org", "flavorFungibility": {"whenCanBorrow": "MayStopSearch",
                                                              "whenCanPreempt": "MayStopSearch"}}}
    assert convert_to_v1beta1(cq)["spec"] == {"cohort": "org", "flavorFungibility": {"whenCanBorrow": "Borrow",
                                                                                     "whenCanPreempt": "Preempt"}}
    levels = ["rack", "kubernetes.io/hostname"]
    domains = [{"values": ["r1", "n1"], "count": 2}, {"values": ["r1", "n2"], "count": 1}]
    as_v1beta1 = {"apiVersion": V1BETA1, "kind": "Workload", "metadata": {}, "status": {"admission": {
        "podSetAssignments": [{"topologyAssignment": {"levels": levels, "domains": domains}}]}}}
    slices = convert_to_v1beta2(as_v1beta1)["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    wl = {"apiVersion": V1BETA2, "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
          "spec": {"priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "hi"}},
          "status": {"accumulatedPastExecutionTimeSeconds": 5, "admission": {"clusterQueue": "cq",
                     "podSetAssignments": [{"name": "main", "count": 3, "topologyAssignment": slices}]}}}
    old = convert_to_v1beta1(wl)
    assert old["spec"] == {"priorityClassName": "hi", "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"}
    assert old["status"]["accumulatedPastExexcutionTimeSeconds"] == 5
    assert old["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] == {"levels": levels,
                                                                                          "domains": domains}


def _review(desired: str, *objects: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u-1", "desiredAPIVersion": desired, "objects": list(objects)}}


def test_the_review_converts_every_object_either_way() -> None:
    legacy, current = FROM_V1BETA1[0][1:]
    up = conversion_review(_review(V1BETA2, legacy, copy.deepcopy(current)))
    assert up["response"]["uid"] == "u-1" and up["response"]["result"] == {"status": "Success"}
    assert up["response"]["convertedObjects"] == [current, current]
    down = conversion_review(_review(V1BETA1, current))
    assert down["response"]["convertedObjects"] == [convert_to_v1beta1(current)]


def test_a_bad_v1beta1_write_is_refused_naming_the_field() -> None:
    bad = {"apiVersion": V1BETA1, "kind": "ClusterQueue", "metadata": {"name": "cq"},
           "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
               {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "four"}]}]}]}}
    answer = conversion_review(_review(V1BETA2, bad))["response"]
    assert answer["result"]["status"] == "Failure" and answer["convertedObjects"] == []
    assert "nominalQuota" in answer["result"]["message"]
    unknown = {"apiVersion": V1BETA1, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "ns"},
               "spec": {"clusterQueue": "cq", "colour": "red"}}
    assert "spec.colour" in conversion_review(_review(V1BETA2, unknown))["response"]["result"]["message"]


def test_only_kueue_versions_convert() -> None:
    with pytest.raises(ConversionError, match="desiredAPIVersion"):
        convert_object(FROM_V1BETA1[0][2], "kueue.x-k8s.io/v1alpha1")
    with pytest.raises(ConversionError, match="apiVersion"):
        convert_to_v1beta1({"apiVersion": V1BETA2, "kind": "Job"})
