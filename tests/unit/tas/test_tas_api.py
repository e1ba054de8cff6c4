"""TAS fields of the API: validation of topologyRequest, and the conversion to the solver's inputs."""

from __future__ import annotations

from typing import Any

import pytest

from kq.api.load import InputError, load_object
from services.tas.core import TaintSpec, TolerationSpec
from services.tas.core.from_api import TopologyRequestError, amounts, amounts_from_milli, node_info, podset_request


def workload(tr: dict[str, Any], count: int = 4) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": count, "topologyRequest": tr, "template": {
                "spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}], "nodeSelector": {"pool": "a"},
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}}


@pytest.mark.parametrize(("tr", "field", "text"), [
    ({"required": "r", "preferred": "r"}, "spec.podSets[0].topologyRequest", "at most one of required"),
    ({"required": "r", "podSetSliceRequiredTopology": "h"}, "spec.podSets[0].topologyRequest.podSetSliceSize",
     "must be set when podSetSliceRequiredTopology"),
    ({"required": "r", "podSetSliceSize": 2}, "spec.podSets[0].topologyRequest.podSetSliceSize", "may not be set"),
])
def test_topology_request_refusals_name_the_field(tr: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(InputError) as e:
        load_object(workload(tr), "test")
    assert field in str(e.value) and text in str(e.value)


def test_assignment_levels_are_bounded() -> None:
    wl = workload({"required": "r"})
    wl["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "topologyAssignment": {"levels": [], "slices": []}}]}}
    with pytest.raises(InputError):
        load_object(wl, "test")


@pytest.mark.parametrize(("tr", "want"), [
    ({"required": "r"}, ("required", "r", None, None)),
    ({"preferred": "r"}, ("preferred", "r", None, None)),
    ({"unconstrained": True}, ("unconstrained", None, None, None)),
    ({"required": "b", "podSetSliceRequiredTopology": "h", "podSetSliceSize": 2}, ("required", "b", "h", 2)),
    ({"podSetSliceRequiredTopology": "h", "podSetSliceSize": 2}, ("slices-only", None, "h", 2)),
    ({"podsetSliceRequiredTopologyConstraints": [{"topology": "h", "size": 2}]}, ("slices-only", None, "h", 2)),
])
def test_podset_request_modes(tr: dict[str, Any], want: tuple[Any, ...]) -> None:
    ps = load_object(workload(tr), "test").obj.spec.pod_sets[0]
    req = podset_request(ps, {"cpu": 1000})
    assert req is not None
    assert (req.mode, req.level, req.slice_level, req.slice_size) == want
    assert req.tolerations == (TolerationSpec(key="gpu", operator="Exists"),)
    assert req.node_selector == {"pool": "a"}


def test_no_request_is_none_unless_implied() -> None:
    ps = load_object(workload({}), "test").obj.spec.pod_sets[0]
    assert podset_request(ps, {"cpu": 1000}) is None
    implied = podset_request(ps, {"cpu": 1000}, implied=True)
    assert implied is not None and implied.mode == "implied"


def test_multi_layer_slices_are_refused_not_ignored() -> None:
    ps = load_object(workload({"required": "b", "podsetSliceRequiredTopologyConstraints": [
        {"topology": "r", "size": 4}, {"topology": "h", "size": 2}]}), "test").obj.spec.pod_sets[0]
    with pytest.raises(TopologyRequestError, match="podsetSliceRequiredTopologyConstraints"):
        podset_request(ps, {"cpu": 1000})


def test_node_info_and_amounts() -> None:
    node = load_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x1", "labels": {"a": "b"}},
                        "spec": {"unschedulable": True, "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
                        "status": {"allocatable": {"cpu": "1500m", "memory": "1Gi", "pods": "10"},
                                   "conditions": [{"type": "Ready", "status": "False"}]}}, "test").obj
    info = node_info(node)
    assert info.allocatable == {"cpu": 1500, "memory": 1 << 30, "pods": 10}
    assert (info.ready, info.unschedulable) == (False, True)
    assert info.taints == (TaintSpec(key="k", value="v", effect="NoSchedule"),)
    assert amounts({"cpu": "2", "nvidia.com/gpu": "1"}) == {"cpu": 2000, "nvidia.com/gpu": 1}
    assert amounts_from_milli({"cpu": 500, "memory": 1_073_741_824_000}) == {"cpu": 500, "memory": 1 << 30}
