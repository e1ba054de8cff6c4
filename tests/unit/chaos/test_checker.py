"""The journal checker on hand-written histories: each broken promise is found, a clean run has none."""

from __future__ import annotations

from typing import Any

from kq.chaos.check import CQS, JOBS, PODS, WORKLOADS, Checker, Record

CPU = {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
    {"name": "cpu", "nominalQuota": "2"}]}]}]}


class History:
    def __init__(self) -> None:
        self.checker = Checker()
        self.t = 0.0

    def put(self, resource: str, obj: dict[str, Any], cluster: str = "manager", event: str = "MODIFIED") -> None:
        self.t += 1
        self.checker.feed(Record(cluster, int(self.t), self.t, event, resource, obj))


def job(name: str, uid: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "labels": {"kueue.x-k8s.io/queue-name": "lq"}}}


def workload(name: str, uid: str, job_uid: str, *, cpu: str | None = None, finished: bool = False,
             pending_message: str = "", job_name: str | None = None) -> dict:
    wl: dict = {"metadata": {"name": name, "namespace": "ns", "uid": uid,
                             "ownerReferences": [{"kind": "Job", "name": job_name or name, "uid": job_uid}]},
                "spec": {}, "status": {"conditions": []}}
    if cpu is not None:
        wl["status"]["admission"] = {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": cpu}, "count": 1}]}
        wl["status"]["conditions"].append({"type": "QuotaReserved", "status": "True"})
    elif pending_message:
        wl["status"]["conditions"].append({"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                           "message": pending_message})
    if finished:
        wl["status"]["conditions"].append({"type": "Finished", "status": "True"})
    return wl


def pod(name: str, job_name: str, job_uid: str, cpu: str, *, running: bool = True) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"pod-{name}",
                         "ownerReferences": [{"kind": "Job", "name": job_name, "uid": job_uid}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running" if running else "Succeeded"}}


def test_a_clean_history_has_no_violation_and_counts_end_states() -> None:
    h = History()
    h.put(CQS, {"metadata": {"name": "cq"}, "spec": CPU}, event="ADDED")
    for i in (1, 2):
        h.put(JOBS, job(f"j{i}", f"j{i}"), event="ADDED")
        h.put(WORKLOADS, workload(f"j{i}", f"w{i}", f"j{i}", pending_message="waiting"), event="ADDED")
    h.put(WORKLOADS, workload("j1", "w1", "j1", cpu="2"))
    h.put(PODS, pod("p1", "j1", "j1", "2"), event="ADDED")
    h.put(PODS, pod("p1", "j1", "j1", "2", running=False))
    h.put(WORKLOADS, workload("j1", "w1", "j1", cpu="2", finished=True))
    rep = h.checker.finish()
    assert rep.violations == []
    assert (rep.workloads, rep.jobs, dict(rep.ends)) == (2, 2, {"finished": 1, "pending": 1})
    assert rep.progress == [6.0]


def test_over_quota_reserved_and_running_are_both_found() -> None:
    h = History()
    h.put(CQS, {"metadata": {"name": "cq"}, "spec": CPU}, event="ADDED")
    h.put(WORKLOADS, workload("j1", "w1", "j1", cpu="2"), event="ADDED")
    h.put(WORKLOADS, workload("j2", "w2", "j2", cpu="1"), event="ADDED")
    h.put(PODS, pod("p1", "j1", "j1", "2"), event="ADDED")
    h.put(WORKLOADS, workload("j1", "w1", "j1"))  # quota released while its pod still runs
    h.put(PODS, pod("p2", "j2", "j2", "1"), event="ADDED")
    kinds = [v.what for v in h.checker.report.violations]
    assert kinds == ["quota (reserved): ClusterQueue cq default/cpu uses 3000m > nominal 2000m",
                     "quota (running): ClusterQueue cq default/cpu uses 3000m > nominal 2000m"]


def test_two_clusters_duplicates_lost_and_stuck() -> None:
    h = History()
    h.put(CQS, {"metadata": {"name": "cq"}, "spec": CPU}, event="ADDED")
    h.put(JOBS, job("j1", "j1"), event="ADDED")
    h.put(JOBS, job("lost", "j9"), event="ADDED")
    h.put(WORKLOADS, workload("j1", "w1", "j1"), event="ADDED")  # pending, no reason anywhere
    h.put(WORKLOADS, workload("j1-dup", "w2", "j1", job_name="j1"), event="ADDED")
    h.put(PODS, pod("a", "j1", "j1", "1"), cluster="worker-1", event="ADDED")
    h.put(PODS, pod("b", "j1", "j1", "1"), cluster="worker-2", event="ADDED")
    rep = h.checker.finish()
    whats = [v.what for v in rep.violations]
    assert whats[0] == "duplicate workload: job ns/j1 has 2 Workloads"
    assert whats[1] == "two clusters: job ns/j1 runs pods in worker-1, worker-2"
    assert "lost: job ns/lost has no Workload and did not complete" in whats
    assert "stuck: workload ns/j1 pending without a reason" in whats
    # The decision log's Pending reason is a reason too.
    h2 = History()
    h2.put(WORKLOADS, workload("j1", "w1", "j1"), event="ADDED")
    assert h2.checker.finish({("ns", "j1"): "ClusterQueue cq is inactive"}).violations == []
