"""The ungater's plan: which gated pod goes to which domain (services/watcher/core/ungate.py)."""

from __future__ import annotations

import pytest

from kq.api.core import Pod, PodSchedulingGate, PodSpec, PodStatus
from kq.api.meta import ObjectMeta
from kq.api.topology import TopologyDomain, compact_topology_assignment
from services.watcher.core.ungate import plan_ungates

LEVELS = ("block", "rack")
IDX = "batch.kubernetes.io/job-completion-index"
GATE = PodSchedulingGate(name="kueue.x-k8s.io/topology")


def pod(name: str, index: int | None = None, gated: bool = True, selector: dict[str, str] | None = None,
        phase: str = "Pending", created: str = "2026-01-01T00:00:00Z") -> Pod:
    ann = {IDX: str(index)} if index is not None else {}
    return Pod(
        metadata=ObjectMeta(name=name, namespace="ns", resource_version="7", annotations=ann,
                            creation_timestamp=created),
        spec=PodSpec(node_selector=selector or {}, scheduling_gates=(GATE,) if gated else ()),
        status=PodStatus(phase=phase),
    )


def assignment(*domains: tuple[tuple[str, str], int]):
    return compact_topology_assignment(LEVELS, [TopologyDomain(v, c) for v, c in domains])


def plan(a, pods):
    return {u.name: (u.node_selector["block"], u.node_selector["rack"]) for u in plan_ungates(a, pods, IDX)}


@pytest.mark.parametrize(
    "domains,pods,want",
    [
        pytest.param([(("b1", "r1"), 2), (("b1", "r2"), 1)],
                     [pod("p2", 2), pod("p0", 0), pod("p1", 1)],
                     {"p0": ("b1", "r1"), "p1": ("b1", "r1"), "p2": ("b1", "r2")}, id="ranked-by-index"),
        pytest.param([(("b1", "r1"), 1), (("b1", "r2"), 1)],
                     [pod("p0", 0, gated=False, selector={"block": "b1", "rack": "r1"}), pod("p0-again", 0)],
                     {"p0-again": ("b1", "r2")}, id="ranked-domain-full-takes-next-with-room"),
        pytest.param([(("b1", "r1"), 1)],
                     [pod("a"), pod("b")],
                     {"a": ("b1", "r1")}, id="no-room-stays-gated"),
        pytest.param([(("b1", "r1"), 1), (("b2", "r1"), 1)],
                     [pod("old", gated=False, selector={"block": "b1", "rack": "r1"}, phase="Failed"), pod("new")],
                     {"new": ("b1", "r1")}, id="finished-pod-frees-its-domain"),
        pytest.param([(("b1", "r1"), 1), (("b2", "r1"), 1)],
                     [pod("y", created="2026-01-01T00:00:02Z"), pod("x", created="2026-01-01T00:00:01Z")],
                     {"x": ("b1", "r1"), "y": ("b2", "r1")}, id="unindexed-by-creation"),
    ],
)
def test_plan_ungates(domains, pods, want) -> None:
    assert plan(assignment(*domains), pods) == want


def test_ungate_keeps_other_gates_and_selector() -> None:
    p = Pod(metadata=ObjectMeta(name="p", namespace="ns", resource_version="3"),
            spec=PodSpec(node_selector={"pool": "a"}, scheduling_gates=(PodSchedulingGate(name="other"), GATE)))
    [u] = plan_ungates(assignment((("b1", "r1"), 1)), [p], IDX)
    assert u.node_selector == {"pool": "a", "block": "b1", "rack": "r1"}
    assert u.remaining_gates == ("other",)
    assert u.resource_version == "3"
