"""Evaluating checks: observed + expected -> failures (table-driven)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kq.scenario.checks import evaluate
from kq.scenario.model import (
    Check,
    ClusterQueueExpect,
    ObjectRef,
    RemoteExpect,
    RemoteObject,
    TopologyDomain,
    WorkloadExpect,
)
from kq.scenario.observed import Observed, ObservedClusterQueue, ObservedDomain, ObservedRemote, ObservedWorkload

ADMITTED = ObservedWorkload(
    workload="w1",
    state="admitted",
    succeeded=None,
    cluster_queue="cq",
    flavors={"main": {"cpu": "on-demand", "memory": "spot"}},
    topology={"main": (ObservedDomain(values=("b1", "r1"), count=1), ObservedDomain(values=("b1", "r2"), count=3))},
    cluster="worker-1",
    nominated_clusters=("worker-1", "worker-2"),
    preempted=True,
    preemption_reason="InClusterQueue",
    evictions=1,
    count={"main": 4},
    message="Quota reserved in ClusterQueue cq",
    requeue_count=2,
)
CQ = ObservedClusterQueue(
    admitted_workloads=2,
    pending_workloads=1,
    reserving_workloads=2,
    usage={"on-demand": {"cpu": "6", "memory": "1Gi"}},
    borrowed={"on-demand": {"cpu": "2"}},
    active=True,
)


def observed(**workloads: ObservedWorkload | None) -> Observed:
    return Observed(
        workloads={k.replace("__", "/"): v for k, v in workloads.items()},
        cluster_queues={"cq": CQ},
        remote={"worker-2": ObservedRemote(present=("Job demo/w1",), absent=("Workload demo/w1",))},
    )


def wl_check(**fields: Any) -> Check:
    return Check(index=0, at_ms=None, workloads={"demo/w1": WorkloadExpect(**fields)}, cluster_queues={}, remote={})


def cq_check(**fields: Any) -> Check:
    return Check(index=0, at_ms=None, workloads={}, cluster_queues={"cq": ClusterQueueExpect(**fields)}, remote={})


def remote_check(absent: tuple[str, ...] = (), present: tuple[str, ...] = ()) -> Check:
    def obj(label: str) -> RemoteObject:
        kind, _, key = label.partition(" ")
        ns, _, name = key.partition("/")
        return RemoteObject(kind=kind, ref=ObjectRef(namespace=ns, name=name))

    want = RemoteExpect(absent=tuple(obj(a) for a in absent), present=tuple(obj(p) for p in present))
    return Check(index=0, at_ms=None, workloads={}, cluster_queues={}, remote={"worker-2": want})


CASES = [
    # workloads
    ("state-holds", wl_check(state="admitted"), []),
    ("state-differs", wl_check(state="pending"), ["demo/w1: state admitted, want pending"]),
    ("unset-fields-are-not-checked", wl_check(), []),
    ("cluster-queue", wl_check(cluster_queue="cq-b"), ["demo/w1: clusterQueue cq, want cq-b"]),
    ("succeeded-none", wl_check(succeeded=True), ["demo/w1: succeeded none, want true"]),
    ("preempted", wl_check(preempted=False), ["demo/w1: preempted true, want false"]),
    ("preemption-reason", wl_check(preemption_reason="InCohortReclamation"),
     ["demo/w1: preemptionReason InClusterQueue, want InCohortReclamation"]),
    ("evictions", wl_check(evictions=0), ["demo/w1: evictions 1, want 0"]),
    ("requeue-count", wl_check(requeue_count=2), []),
    ("cluster", wl_check(cluster="worker-2"), ["demo/w1: cluster worker-1, want worker-2"]),
    ("cluster-none-wanted", wl_check(cluster=None), ["demo/w1: cluster worker-1, want none"]),
    ("nominated-any-order", wl_check(nominated_clusters=("worker-2", "worker-1")), []),
    ("nominated-differs", wl_check(nominated_clusters=("worker-1",)),
     ["demo/w1: nominatedClusters [worker-1, worker-2], want [worker-1]"]),
    ("flavors-subset-holds", wl_check(flavors={"main": {"cpu": "on-demand"}}), []),
    ("flavors-differ", wl_check(flavors={"main": {"cpu": "spot"}}), ["demo/w1: flavors main.cpu on-demand, want spot"]),
    ("flavors-missing-podset", wl_check(flavors={"extra": {"cpu": "spot"}}), ["demo/w1: flavors extra.cpu none, want spot"]),
    ("count-holds", wl_check(count={"main": 4}), []),
    ("count-differs", wl_check(count={"main": 8}), ["demo/w1: count main 4, want 8"]),
    ("topology-any-order", wl_check(topology={"main": (TopologyDomain(values=("b1", "r2"), count=3),
                                                        TopologyDomain(values=("b1", "r1"), count=1))}), []),
    ("topology-differs", wl_check(topology={"main": (TopologyDomain(values=("b1", "r2"), count=4),)}),
     ["demo/w1: topology main [b1/r1=1, b1/r2=3], want [b1/r2=4]"]),
    ("message-substring-any-case", wl_check(message="QUOTA RESERVED"), []),
    ("message-missing", wl_check(message="insufficient quota"),
     ["demo/w1: message 'Quota reserved in ClusterQueue cq' does not contain 'insufficient quota'"]),
    ("several-failures-in-order", wl_check(state="pending", evictions=0),
     ["demo/w1: state admitted, want pending", "demo/w1: evictions 1, want 0"]),
    # cluster queues
    ("cq-counts-hold", cq_check(admitted_workloads=2, pending_workloads=1, reserving_workloads=2, active=True), []),
    ("cq-count-differs", cq_check(pending_workloads=0), ["clusterQueue cq: pendingWorkloads 1, want 0"]),
    ("cq-active", cq_check(active=False), ["clusterQueue cq: active true, want false"]),
    ("usage-as-quantities", cq_check(usage={"on-demand": {"cpu": "6000m", "memory": "1024Mi"}}), []),
    ("usage-differs", cq_check(usage={"on-demand": {"cpu": "5"}}), ["clusterQueue cq: usage on-demand.cpu 6, want 5"]),
    ("usage-unreported-is-zero", cq_check(usage={"spot": {"cpu": "0"}}), []),
    ("usage-unreported-not-zero", cq_check(usage={"spot": {"cpu": "1"}}), ["clusterQueue cq: usage spot.cpu 0, want 1"]),
    ("borrowed", cq_check(borrowed={"on-demand": {"cpu": "1"}}), ["clusterQueue cq: borrowed on-demand.cpu 2, want 1"]),
    # remote
    ("remote-holds", remote_check(absent=("Workload demo/w1",), present=("Job demo/w1",)), []),
    ("remote-present-want-absent", remote_check(absent=("Job demo/w1",)), ["worker-2: Job demo/w1 present, want absent"]),
    ("remote-absent-want-present", remote_check(present=("Workload demo/w1",)),
     ["worker-2: Workload demo/w1 absent, want present"]),
]


@pytest.mark.parametrize("check,failures", [(c, f) for _, c, f in CASES], ids=[i for i, _, _ in CASES])
def test_evaluate(check: Check, failures: list[str]) -> None:
    assert evaluate(check, observed(demo__w1=ADMITTED)) == failures


def test_missing_workload_fails_the_check() -> None:
    assert evaluate(wl_check(state="pending"), observed(demo__w1=None)) == [
        "demo/w1: no such workload (neither a Workload nor a Job's Workload of that name)"
    ]


def test_missing_cluster_queue_fails_the_check() -> None:
    obs = msgspec.structs.replace(observed(), cluster_queues={"cq": None})
    assert evaluate(cq_check(active=True), obs) == ["clusterQueue cq: no such ClusterQueue"]


def test_requeue_count_of_a_workload_never_requeued_is_zero() -> None:
    fresh = msgspec.structs.replace(ADMITTED, requeue_count=0, evictions=0)
    assert evaluate(wl_check(requeue_count=0, evictions=0), observed(demo__w1=fresh)) == []
