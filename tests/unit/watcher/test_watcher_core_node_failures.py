"""Which admitted TAS workloads a failed node affects, and the unhealthyNodes patch."""

from __future__ import annotations

from kq.api.core import CoreCondition, Node, NodeStatus
from kq.api.meta import Condition, ObjectMeta
from kq.api.topology import TopologyDomain, compact_topology_assignment
from kq.api.workload import Admission, PodSetAssignment, UnhealthyNode, Workload, WorkloadStatus
from services.watcher.core.node_failures import node_failed, unhealthy_patch, uses_node


def _wl(hosts: list[str], finished: bool = False, unhealthy: tuple[str, ...] = ()) -> Workload:
    ta = compact_topology_assignment(("kubernetes.io/hostname",), [TopologyDomain((h,), 1) for h in hosts])
    conds = (Condition(type="Finished", status="True", reason="Succeeded", message="",
                       last_transition_time="2026-01-01T00:00:00Z"),) if finished else ()
    return Workload(metadata=ObjectMeta(name="w", namespace="ns", resource_version="5"),
                    status=WorkloadStatus(conditions=conds, unhealthy_nodes=tuple(UnhealthyNode(name=n) for n in unhealthy),
                                          admission=Admission(cluster_queue="cq", pod_set_assignments=(
                                              PodSetAssignment(name="main", topology_assignment=ta),))))


def _node(ready: str | None) -> Node:
    conds = (CoreCondition(type="Ready", status=ready),) if ready else ()  # type: ignore[arg-type]  # cases pass "True"/"False"/"Unknown"
    return Node(metadata=ObjectMeta(name="x1"), status=NodeStatus(conditions=conds))


def test_node_failed() -> None:
    assert node_failed(None) and node_failed(_node("False")) and node_failed(_node("Unknown")) and node_failed(_node(None))
    assert not node_failed(_node("True"))


def test_uses_node_by_name_or_hostname_and_not_when_finished() -> None:
    assert uses_node(_wl(["x1", "x2"]), "x1", "x1")
    assert uses_node(_wl(["host-a"]), "x1", "host-a")
    assert not uses_node(_wl(["x2"]), "x1", "x1")
    assert not uses_node(_wl(["x1"], finished=True), "x1", "x1")


def test_unhealthy_patch_appends_once_with_the_resource_version() -> None:
    assert unhealthy_patch(_wl(["x1"]), "x1") == {"metadata": {"resourceVersion": "5"},
                                                  "status": {"unhealthyNodes": [{"name": "x1"}]}}
    assert unhealthy_patch(_wl(["x1"], unhealthy=("x0",)), "x1") == {
        "metadata": {"resourceVersion": "5"}, "status": {"unhealthyNodes": [{"name": "x0"}, {"name": "x1"}]}}
    assert unhealthy_patch(_wl(["x1"], unhealthy=("x1",)), "x1") is None
