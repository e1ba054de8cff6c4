"""Deriving what a check observes from Workload and ClusterQueue objects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

from kq.api.kueue import ClusterQueue, Workload
from kq.scenario.observed import ObservedDomain, observe_cluster_queue, observe_workload, workload_state
from kq.scenario.refs import resolve_workload


def cond(type_: str, status: str, reason: str = "R", message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


ADMISSION = {
    "clusterQueue": "cq",
    "podSetAssignments": [
        {"name": "driver", "flavors": {"cpu": "on-demand"}, "count": 1},
        {"name": "workers", "flavors": {"cpu": "spot", "memory": "spot"}, "count": 4},
    ],
}


def wl(
    conditions: Sequence[dict[str, Any]] = (),
    admission: dict[str, Any] | None = None,
    active: bool | None = None,
    name: str = "w1",
    owner: str | None = None,
    **status: Any,
) -> Workload:
    doc: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {"podSets": [
            {"name": "driver", "count": 1, "template": {"spec": {"containers": []}}},
            {"name": "workers", "count": 8, "template": {"spec": {"containers": []}}},
        ]},
        "status": {"conditions": list(conditions), **status},
    }
    if admission is not None:
        doc["status"]["admission"] = admission
    if active is not None:
        doc["spec"]["active"] = active
    if owner is not None:
        doc["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": "u1", "controller": True}
        ]
    return msgspec.convert(doc, Workload)


STATES = [
    ("new", wl(), "pending"),
    ("pending-with-reason", wl([cond("QuotaReserved", "False", "Pending", "insufficient quota")]), "pending"),
    ("quota-reserved", wl([cond("QuotaReserved", "True")], ADMISSION), "quotaReserved"),
    ("admitted", wl([cond("QuotaReserved", "True"), cond("Admitted", "True")], ADMISSION), "admitted"),
    ("evicted-quota-not-released",
     wl([cond("QuotaReserved", "False"), cond("Admitted", "False"), cond("Evicted", "True", "Preempted")], ADMISSION),
     "quotaReserved"),
    ("evicted-and-released", wl([cond("QuotaReserved", "False"), cond("Evicted", "True", "Preempted")]), "pending"),
    ("finished-beats-everything", wl([cond("Admitted", "True"), cond("Finished", "True", "Succeeded")], ADMISSION, active=False),
     "finished"),
    ("deactivated", wl([cond("QuotaReserved", "False")], active=False), "deactivated"),
    ("deactivated-while-admitted", wl([cond("Admitted", "True")], ADMISSION, active=False), "deactivated"),
    ("finished-false-is-not-finished", wl([cond("Finished", "False")]), "pending"),
]


@pytest.mark.parametrize("workload,state", [(w, s) for _, w, s in STATES], ids=[i for i, _, _ in STATES])
def test_workload_state(workload: Workload, state: str) -> None:
    assert workload_state(workload) == state


def test_observe_admitted_workload() -> None:
    o = observe_workload(
        wl([cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
            cond("Admitted", "True", "Admitted", "The workload is admitted")], ADMISSION)
    )
    assert msgspec.to_builtins(o) == {
        "workload": "w1",
        "state": "admitted",
        "succeeded": None,
        "clusterQueue": "cq",
        "flavors": {"driver": {"cpu": "on-demand"}, "workers": {"cpu": "spot", "memory": "spot"}},
        "topology": None,
        "cluster": None,
        "nominatedClusters": None,
        "preempted": False,
        "preemptionReason": None,
        "evictions": 0,
        "count": {"driver": 1, "workers": 4},
        "message": "The workload is admitted",
        "requeueCount": 0,
    }


def test_observe_pending_workload_after_preemption() -> None:
    o = observe_workload(
        wl(
            [cond("QuotaReserved", "False", "Pending", "couldn't assign flavors: insufficient quota for cpu"),
             cond("Evicted", "True", "Preempted", "Preempted to accommodate a workload"),
             cond("Preempted", "True", "InClusterQueue", "Preempted to accommodate a workload")],
            schedulingStats={"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1},
                                           {"reason": "PodsReadyTimeout", "underlyingCause": "", "count": 2}]},
            requeueState={"count": 2, "requeueAt": "2030-01-01T00:00:00Z"},
        )
    )
    assert (o.state, o.preempted, o.preemption_reason, o.evictions, o.requeue_count) == (
        "pending", True, "InClusterQueue", 3, 2)
    assert o.message == "couldn't assign flavors: insufficient quota for cpu"
    assert (o.cluster_queue, o.flavors, o.count) == (None, None, None)


def test_preempted_once_then_readmitted_still_counts_as_preempted() -> None:
    # Kueue's SetQuotaReservation resets Preempted to False with a "Previously: ..." message.
    o = observe_workload(
        wl([cond("QuotaReserved", "True"), cond("Admitted", "True"),
            cond("Preempted", "False", "QuotaReserved", "Previously: Preempted to accommodate a workload")], ADMISSION)
    )
    assert (o.preempted, o.preemption_reason) == (True, None)


def test_preempted_from_scheduling_stats_alone() -> None:
    o = observe_workload(wl(schedulingStats={"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}))
    assert o.preempted is True


def test_not_preempted_when_only_evicted_for_another_reason() -> None:
    o = observe_workload(wl(schedulingStats={"evictions": [{"reason": "PodsReadyTimeout", "underlyingCause": "", "count": 1}]}))
    assert (o.preempted, o.evictions) == (False, 1)


@pytest.mark.parametrize("reason,succeeded", [("Succeeded", True), ("Failed", False), ("OwnerNotFound", False)])
def test_finished_succeeded_from_the_reason(reason: str, succeeded: bool) -> None:
    o = observe_workload(wl([cond("Finished", "True", reason, "done")]))
    assert (o.state, o.succeeded, o.message) == ("finished", succeeded, "done")


def test_count_falls_back_to_the_pod_set_count() -> None:
    admission = {"clusterQueue": "cq", "podSetAssignments": [{"name": "workers", "flavors": {"cpu": "spot"}}]}
    assert observe_workload(wl([cond("Admitted", "True")], admission)).count == {"workers": 8}


def test_multikueue_fields() -> None:
    o = observe_workload(wl(clusterName="worker-1", nominatedClusterNames=["worker-1", "worker-2"]))
    assert (o.cluster, o.nominated_clusters) == ("worker-1", ("worker-1", "worker-2"))


def test_topology_from_compact_slices() -> None:
    admission = {
        "clusterQueue": "cq",
        "podSetAssignments": [{
            "name": "main", "flavors": {"cpu": "tas"}, "count": 4,
            "topologyAssignment": {
                "levels": ["block", "rack"],
                "slices": [{"domainCount": 2,
                            "valuesPerLevel": [{"universal": "b1"}, {"individual": {"prefix": "r", "roots": ["2", "1"]}}],
                            "podCounts": {"individual": [3, 1]}}],
            },
        }],
    }
    o = observe_workload(wl([cond("Admitted", "True")], admission))
    assert o.topology == {"main": (ObservedDomain(values=("b1", "r1"), count=1), ObservedDomain(values=("b1", "r2"), count=3))}


def cq(status: dict[str, Any]) -> ClusterQueue:
    return msgspec.convert({"metadata": {"name": "cq"}, "status": status}, ClusterQueue)


def test_observe_cluster_queue() -> None:
    o = observe_cluster_queue(cq({
        "pendingWorkloads": 1, "reservingWorkloads": 2, "admittedWorkloads": 2,
        "conditions": [cond("Active", "True")],
        "flavorsReservation": [
            {"name": "on-demand", "resources": [{"name": "cpu", "total": "6", "borrowed": "2000m"},
                                                {"name": "memory", "total": "1024Mi", "borrowed": "0"}]},
        ],
        "flavorsUsage": [{"name": "on-demand", "resources": [{"name": "cpu", "total": "1", "borrowed": "0"}]}],
    }))
    assert msgspec.to_builtins(o) == {
        "admittedWorkloads": 2, "pendingWorkloads": 1, "reservingWorkloads": 2,
        "usage": {"on-demand": {"cpu": "6", "memory": "1Gi"}},
        "borrowed": {"on-demand": {"cpu": "2", "memory": "0"}},
        "active": True,
    }


def test_cluster_queue_without_active_condition() -> None:
    assert observe_cluster_queue(cq({})).active is None
    assert observe_cluster_queue(cq({"conditions": [cond("Active", "False")]})).active is False


RESOLVE = [
    ("by-workload-name", [wl(name="w1"), wl(name="job-w1-abc", owner="w1")], "w1", "w1"),
    ("by-owning-job", [wl(name="job-j1-abc", owner="j1")], "j1", "job-j1-abc"),
    ("missing", [wl(name="job-j1-abc", owner="j1")], "j2", None),
    ("two-owned-picks-first-by-name", [wl(name="job-j1-b", owner="j1"), wl(name="job-j1-a", owner="j1")], "j1", "job-j1-a"),
]


@pytest.mark.parametrize("workloads,name,want", [(w, n, r) for _, w, n, r in RESOLVE], ids=[i for i, *_ in RESOLVE])
def test_resolve_workload(workloads: list[Workload], name: str, want: str | None) -> None:
    got = resolve_workload(workloads, "demo", name)
    assert (got.metadata.name if got is not None else None) == want


def test_resolve_workload_stays_in_its_namespace() -> None:
    assert resolve_workload([wl(name="w1")], "other", "w1") is None
