"""The dashboard's pure view (kq.dashboard.view): what the page shows, from typed objects."""

from __future__ import annotations

from typing import Any

import msgspec

from kq.api.kueue import ClusterQueue, Cohort, LocalQueue, Workload
from kq.dashboard.view import cohort_tree, dashboard_state, recent_decisions, resource_bars
from kq.messages import (
    Decision,
    WorkloadAdmittedEvent,
    WorkloadEvictedEvent,
    WorkloadPendingEvent,
    WorkloadPreemptedEvent,
)
from kq.visibility import PendingWorkload, PendingWorkloadMeta, PendingWorkloadsSummary


def cq(name: str, cohort: str = "", quotas: dict[str, str] | None = None, usage: dict[str, str] | None = None,
       reserved: dict[str, str] | None = None) -> ClusterQueue:
    doc: dict[str, Any] = {"metadata": {"name": name}, "spec": {"cohortName": cohort, "resourceGroups": [
        {"coveredResources": sorted(quotas or {"cpu": "1"}), "flavors": [{"name": "f", "resources": [
            {"name": r, "nominalQuota": q} for r, q in (quotas or {"cpu": "1"}).items()]}]}]},
        "status": {"flavorsUsage": [{"name": "f", "resources": [{"name": r, "total": q}
                                                                 for r, q in (usage or {}).items()]}],
                   "flavorsReservation": [{"name": "f", "resources": [{"name": r, "total": q, "borrowed": "0"}
                                                                       for r, q in (reserved or {}).items()]}]}}
    return msgspec.convert(doc, ClusterQueue)


def test_bars_show_usage_and_reservation_against_the_nominal_quota_past_100_when_borrowing() -> None:
    bars = resource_bars(cq("a", quotas={"cpu": "4", "memory": "8Gi"}, usage={"cpu": "6", "memory": "2Gi"},
                            reserved={"cpu": "6500m", "memory": "4Gi"}))
    assert [(b.resource, b.nominal, b.used, b.reserved, b.used_pct, b.reserved_pct) for b in bars] == [
        ("cpu", "4", "6", "6500m", 150.0, 162.5), ("memory", "8Gi", "2Gi", "4Gi", 25.0, 50.0)]
    (zero,) = resource_bars(cq("z", quotas={"cpu": "0"}, usage={"cpu": "1"}))
    assert zero.used_pct == 100.0  # anything on a zero quota is all borrowed


def test_the_cohort_tree_lists_roots_first_with_their_members() -> None:
    cohorts = [msgspec.convert({"metadata": {"name": n}, "spec": {"parentName": p}}, Cohort)
               for n, p in (("research", "org"), ("org", ""), ("loop-a", "loop-b"), ("loop-b", "loop-a"))]
    tree = cohort_tree(cohorts, [cq("b", "research"), cq("a", "research"), cq("x", "solo"), cq("y")])
    assert [(n.name, n.depth, n.cluster_queues) for n in tree] == [
        ("org", 0, ()), ("research", 1, ("a", "b")), ("solo", 0, ("x",)), ("loop-a", 0, ()), ("loop-b", 1, ())]


def test_recent_decisions_are_newest_first_without_pending_rounds() -> None:
    c, ns, m = "c", "ns", "m"
    decisions: list[Decision] = [
        WorkloadAdmittedEvent(id="1", cluster=c, namespace=ns, message=m, name="a", at="2026-01-01T00:00:01Z",
                              cluster_queue="cq", flavors={}),
        WorkloadPendingEvent(id="2", cluster=c, namespace=ns, message=m, name="b", at="2026-01-01T00:00:03Z",
                             reason="Pending"),
        WorkloadPreemptedEvent(id="3", cluster=c, namespace=ns, message=m, name="a", at="2026-01-01T00:00:02Z",
                               preemptor="ns/c", reason="InClusterQueue"),
        WorkloadEvictedEvent(id="4", cluster=c, namespace=ns, message=m, name="a", at="2026-01-01T00:00:04Z",
                             reason="PodsReadyTimeout"),
    ]
    assert [(r.kind, r.detail) for r in recent_decisions(decisions)] == [
        ("Evicted", "PodsReadyTimeout"), ("Preempted", "InClusterQueue by ns/c"), ("Admitted", "cq")]
    assert len(recent_decisions(decisions * 20, limit=5)) == 5


def test_pending_rows_take_positions_from_visibility_and_reasons_from_the_workload() -> None:
    wl = msgspec.convert({"metadata": {"name": "w", "namespace": "ns"}, "status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "insufficient quota for cpu"}]}},
        Workload)
    lq = msgspec.convert({"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "a"},
                          "status": {"pendingWorkloads": 1}}, LocalQueue)
    summary = PendingWorkloadsSummary(items=(PendingWorkload(
        metadata=PendingWorkloadMeta(name="w", namespace="ns"), priority=3, local_queue_name="lq",
        position_in_cluster_queue=0, position_in_local_queue=0),))
    state = dashboard_state("c", cluster_queues=[cq("b"), cq("a")], local_queues=[lq], cohorts=[], workloads=[wl],
                            pending={"a": summary, "b": None}, decisions=[])
    a, b = state.cluster_queues
    assert (a.name, a.positions_known, b.name, b.positions_known) == ("a", True, "b", False)
    (row,) = a.pending_workloads
    assert (row.name, row.position_in_cluster_queue, row.reason, row.message) == (
        "w", 0, "Pending", "insufficient quota for cpu")
    assert [q.name for q in a.local_queues] == ["lq"] and b.local_queues == ()
