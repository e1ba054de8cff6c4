"""The ungater's pure part: gated pods to domains, by rank when pods carry an index, else greedily."""

from __future__ import annotations

from kq.api.topology import TopologyDomain, compact_topology_assignment
from services.tas.core.ungate import PodToUngate, PodView, RankLabels, group_rank_offsets, pods_to_ungate

HOST = "kubernetes.io/hostname"
RACK = "cloud.com/topology-rack"
TA = compact_topology_assignment((RACK, HOST), [TopologyDomain(("r1", "x1"), 2), TopologyDomain(("r1", "x2"), 1)])
IDX = RankLabels(pod_index_label="batch.kubernetes.io/job-completion-index")


def pod(key: str, index: int | None = None, gated: bool = True, on: str | None = None) -> PodView:
    labels = {} if index is None else {"batch.kubernetes.io/job-completion-index": str(index)}
    selector = {} if on is None else {RACK: "r1", HOST: on}
    return PodView(key=key, gated=gated, labels=labels, node_selector=selector)


def test_pods_with_indexes_go_by_rank() -> None:
    pods = [pod("c", 2), pod("a", 0), pod("b", 1)]
    assert pods_to_ungate(TA, 3, pods, IDX) == [
        PodToUngate(key="a", node_selector={RACK: "r1", HOST: "x1"}),
        PodToUngate(key="b", node_selector={RACK: "r1", HOST: "x1"}),
        PodToUngate(key="c", node_selector={RACK: "r1", HOST: "x2"}),
    ]


def test_without_indexes_gated_pods_fill_what_ungated_pods_left() -> None:
    pods = [pod("p1", gated=False, on="x1"), pod("p3"), pod("p2")]
    assert pods_to_ungate(TA, 3, pods, IDX) == [
        PodToUngate(key="p2", node_selector={RACK: "r1", HOST: "x1"}),
        PodToUngate(key="p3", node_selector={RACK: "r1", HOST: "x2"}),
    ]


def test_ranks_that_disagree_with_running_pods_fall_back_to_greedy() -> None:
    pods = [pod("a", 0, gated=False, on="x2"), pod("b", 1), pod("c", 2)]
    assert [p.key for p in pods_to_ungate(TA, 3, pods, IDX)] == ["b", "c"]
    assert [p.node_selector[HOST] for p in pods_to_ungate(TA, 3, pods, IDX)] == ["x1", "x1"]


def test_pods_for_an_unhealthy_node_stay_gated() -> None:
    pods = [pod("a", 0), pod("b", 1), pod("c", 2)]
    assert [p.key for p in pods_to_ungate(TA, 3, pods, IDX, unhealthy_nodes=frozenset({"x1"}))] == ["c"]


def test_leader_worker_rank_offsets() -> None:
    assert group_rank_offsets({"workers": 4, "leader": 1}) == {"leader": (0, 1), "workers": (1, 5)}
    workers = [pod(f"w{i}", i) for i in range(1, 4)]  # worker indexes continue after the leader's
    ta = compact_topology_assignment((HOST,), [TopologyDomain(("x1",), 1), TopologyDomain(("x2",), 2)])
    out = pods_to_ungate(ta, 3, workers, IDX, offset=1, max_rank=4)
    assert [(p.key, p.node_selector[HOST]) for p in out] == [("w1", "x1"), ("w2", "x2"), ("w3", "x2")]
