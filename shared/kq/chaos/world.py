"""The chaos run's world: queues in a cohort tree, priorities, a MultiKueue worker, and the Jobs.

Manager: cohort `org` (root) over `team-a` and `team-b`; `cq-a1` may borrow, `cq-a2` lends at
most part of its quota (the rest is guaranteed to it), `team-b` may borrow at most a little
from `org`; every queue preempts lower priorities within itself and reclaims within its cohort.
`cq-mk` admits through the MultiKueue check onto `worker-1`, whose own `cq-w` admits the copies.
Jobs ask for 1 or 2 cpu on one or two pods, run 0.5-2.5 s, one in five at high priority.
"""

from __future__ import annotations

import random
from typing import Any

KUEUE = "kueue.x-k8s.io/v1beta2"
NS = "chaos"
WORKER = "worker-1"
MK = "kueue.x-k8s.io/multikueue"
PREEMPTION = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
# (ClusterQueue, cohort, nominal, borrowingLimit, lendingLimit) in cpu; cq-mk has no cohort.
QUEUES = (("cq-a1", "team-a", "6", "4", None), ("cq-a2", "team-a", "4", None, "2"),
          ("cq-b1", "team-b", "6", None, None), ("cq-mk", None, "8", None, None))
# How jobs spread over the LocalQueues.
WEIGHTS = (("lq-a1", 4), ("lq-a2", 2), ("lq-b1", 3), ("lq-mk", 1))


def _resources(nominal: str, borrowing: str | None = None, lending: str | None = None) -> list[dict[str, Any]]:
    r: dict[str, Any] = {"name": "cpu", "nominalQuota": nominal}
    if borrowing is not None:
        r["borrowingLimit"] = borrowing
    if lending is not None:
        r["lendingLimit"] = lending
    return [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [r]}]}]


def _base() -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
            {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}}]


def manager_objects() -> list[dict[str, Any]]:
    objs = _base()
    objs += [{"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
             for name, value in (("low", 100), ("high", 1000))]
    objs.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "org"}, "spec": {}})
    objs.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "team-a"}, "spec": {"parentName": "org"}})
    objs.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "team-b"},
                 "spec": {"parentName": "org", "resourceGroups": _resources("0", borrowing="2")}})
    objs += [
        {"apiVersion": KUEUE, "kind": "MultiKueueCluster", "metadata": {"name": WORKER}, "spec": {
            "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": f"{WORKER}-kubeconfig"}}}},
        {"apiVersion": KUEUE, "kind": "MultiKueueConfig", "metadata": {"name": "mk"}, "spec": {"clusters": [WORKER]}},
        {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": "mk"}, "spec": {
            "controllerName": MK,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mk"}}},
    ]
    for name, cohort, nominal, borrowing, lending in QUEUES:
        spec: dict[str, Any] = {"namespaceSelector": {}, "preemption": PREEMPTION,
                                "resourceGroups": _resources(nominal, borrowing, lending)}
        if cohort:
            spec["cohortName"] = cohort
        if name == "cq-mk":
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": "mk"}]}
        objs.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
        objs.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq" + name[2:], "namespace": NS},
                     "spec": {"clusterQueue": name}})
    return objs


def worker_objects() -> list[dict[str, Any]]:
    return [*_base(),
            {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq-w"},
             "spec": {"namespaceSelector": {}, "resourceGroups": _resources("6")}},
            {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq-mk", "namespace": NS},
             "spec": {"clusterQueue": "cq-w"}}]


def job(i: int, rng: random.Random) -> dict[str, Any]:
    queue = rng.choices([q for q, _ in WEIGHTS], [w for _, w in WEIGHTS])[0]
    pods = 2 if rng.random() < 0.25 else 1
    cpu = "2" if rng.random() < 0.3 else "1"
    labels = {"kueue.x-k8s.io/queue-name": queue}
    labels["kueue.x-k8s.io/priority-class"] = "high" if rng.random() < 0.2 else "low"
    spec: dict[str, Any] = {
        "suspend": True, "parallelism": pods, "completions": pods,
        "template": {"metadata": {"annotations": {"kq.dev/runtime": f"{rng.uniform(0.5, 2.5):.1f}s"}}, "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}}
    if queue == "lq-mk":
        spec["managedBy"] = MK
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"job-{i:05d}", "namespace": NS,
                                                                  "labels": labels}, "spec": spec}
