"""from_api: kq.api objects to the core's domain events."""

from __future__ import annotations

import math

import pytest

from kq.api import load_documents
from services.admission.core import (
    Admission,
    AdmissionCheckState,
    ClusterQueue,
    LabelSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSetAssignment,
    Workload,
)
from services.admission.core.from_api import event_from_api, pod_requests
from services.admission.core.model import (
    AdmissionCheckRule,
    BorrowWithinCohort,
    FlavorFungibility,
    FlavorQuotas,
    Preemption,
    ResourceGroup,
    ResourceQuota,
    Toleration,
)


def load(text: str):
    (obj,) = load_documents(text, "test")
    return obj.obj


def test_cluster_queue() -> None:
    obj = load(
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: co
  queueingStrategy: StrictFIFO
  namespaceSelector: {matchLabels: {team: a}}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: on-demand
      resources:
      - {name: cpu, nominalQuota: "1.5", borrowingLimit: 2, lendingLimit: 500m}
      - {name: memory, nominalQuota: 1Gi}
  preemption:
    withinClusterQueue: LowerPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 5}
  flavorFungibility: {whenCanBorrow: TryNextFlavor}
  fairSharing: {weight: "0.5"}
  admissionChecksStrategy:
    admissionChecks: [{name: prov, onFlavors: [on-demand]}]
  stopPolicy: Hold
"""
    )
    assert event_from_api(obj) == ClusterQueue(
        name="cq",
        cohort="co",
        resource_groups=(
            ResourceGroup(
                covered_resources=("cpu", "memory"),
                flavors=(
                    FlavorQuotas(
                        name="on-demand",
                        resources=(
                            ResourceQuota(name="cpu", nominal=1500, borrowing_limit=2000, lending_limit=500),
                            ResourceQuota(name="memory", nominal=1024**3 * 1000),
                        ),
                    ),
                ),
            ),
        ),
        queueing_strategy="StrictFIFO",
        namespace_selector=LabelSelector(match_labels={"team": "a"}),
        preemption=Preemption(
            within_cluster_queue="LowerPriority",
            reclaim_within_cohort="Any",
            borrow_within_cohort=BorrowWithinCohort(policy="LowerPriority", max_priority_threshold=5),
        ),
        flavor_fungibility=FlavorFungibility(when_can_borrow="TryNextFlavor"),
        fair_weight=0.5,
        admission_checks=(AdmissionCheckRule(name="prov", on_flavors=("on-demand",)),),
        stop_policy="Hold",
    )


def test_cluster_queue_without_selector_selects_nothing() -> None:
    obj = load("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec: {}\n")
    ev = event_from_api(obj)
    assert isinstance(ev, ClusterQueue) and ev.namespace_selector is None, ev


WORKLOAD = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: w
  namespace: ns
  uid: u-1
  resourceVersion: "42"
  creationTimestamp: "2026-01-01T00:00:10Z"
  labels: {kueue.x-k8s.io/job-uid: job-1}
spec:
  queueName: main
  priority: 7
  podSets:
  - name: main
    count: 4
    minCount: 2
    template:
      spec:
        nodeSelector: {zone: a}
        tolerations: [{key: spot, operator: Exists}]
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions: [{key: arch, operator: In, values: [amd64]}]
        initContainers:
        - {name: init, resources: {requests: {cpu: "3"}}}
        - {name: sidecar, restartPolicy: Always, resources: {requests: {cpu: 500m}}}
        containers:
        - {name: a, resources: {requests: {cpu: "1", memory: 1Gi}}}
        - {name: b, resources: {limits: {cpu: 250m}}}
status:
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved, lastTransitionTime: "2026-01-01T00:00:20Z"}
  - {type: Admitted, status: "True", reason: Admitted, lastTransitionTime: "2026-01-01T00:00:20Z"}
  - {type: Evicted, status: "True", reason: Preempted, lastTransitionTime: "2026-01-01T00:00:30Z"}
  admission:
    clusterQueue: cq
    podSetAssignments:
    - name: main
      flavors: {cpu: on-demand}
      resourceUsage: {cpu: "7"}
      count: 2
  admissionChecks:
  - {name: prov, state: Ready, message: ok}
"""


def test_workload() -> None:
    w = event_from_api(load(WORKLOAD))
    assert isinstance(w, Workload)
    t0 = 1767225600.0  # 2026-01-01T00:00:00Z
    assert (w.namespace, w.name, w.uid, w.resource_version, w.queue_name, w.priority, w.job_uid) == (
        "ns", "w", "u-1", "42", "main", 7, "job-1",
    )
    assert w.creation_time == t0 + 10
    ps = w.pod_sets[0]
    # containers 1 + 0.25 (limits stand in) + sidecar 0.5 = 1.75; init peak 3 + 0 sidecars before it = 3
    assert ps.requests == {"cpu": 3000, "memory": 1024**3 * 1000}
    assert (ps.count, ps.min_count, ps.node_selector) == (4, 2, {"zone": "a"})
    assert ps.tolerations == (Toleration(key="spot", operator="Exists"),)
    assert ps.required_affinity == (
        NodeSelectorTerm(match_expressions=(NodeSelectorRequirement(key="arch", operator="In", values=("amd64",)),)),
    )
    assert w.admission == Admission(
        cluster_queue="cq",
        pod_sets=(PodSetAssignment(name="main", flavors={"cpu": "on-demand"}, resource_usage={"cpu": 7000}, count=2),),
    )
    assert (w.quota_reserved_time, w.admitted, w.finished) == (t0 + 20, True, False)
    assert (w.evicted_reason, w.evicted_time) == ("Preempted", t0 + 30)
    assert w.admission_checks == (AdmissionCheckState(name="prov", state="Ready", message="ok"),)


@pytest.mark.parametrize(
    ("status", "want"),
    [
        ({"requeueState": {"requeueAt": "2026-01-01T00:01:00Z"}}, 1767225660.0),
        ({"conditions": [{"type": "Requeued", "status": "False", "reason": "Backoff"}]}, math.inf),
        ({}, None),
    ],
    ids=["requeue-at", "requeued-false-waits", "no-backoff"],
)
def test_workload_backoff(status: dict, want: float | None) -> None:
    import yaml

    doc = yaml.safe_load(WORKLOAD)
    doc["status"] = status
    (obj,) = load_documents(yaml.safe_dump(doc), "test")
    w = event_from_api(obj.obj)
    assert isinstance(w, Workload)
    assert w.requeue_at == want
    assert w.admission is None


def test_pod_requests_overhead_and_pod_level() -> None:
    obj = load(
        """
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  overhead: {cpu: 100m}
  containers: [{name: a, resources: {requests: {cpu: "1"}}}]
"""
    )
    assert pod_requests(obj.spec) == {"cpu": 1100}


def test_scheduler_config_from_kueue_configuration() -> None:
    from kq.config import parse_config
    from services.admission.core import FairSharingConfig, SchedulerConfig
    from services.admission.core.from_api import scheduler_config

    cfg = parse_config(
        "kueue:\n  fairSharing: {preemptionStrategies: [LessThanInitialShare]}\n"
        "  waitForPodsReady: {requeuingStrategy: {timestamp: Creation}}\n"
    )
    assert scheduler_config(cfg.kueue) == SchedulerConfig(
        fair_sharing=FairSharingConfig(preemption_strategies=("LessThanInitialShare",)), requeuing_timestamp="Creation"
    )
    assert scheduler_config(parse_config("{}").kueue) == SchedulerConfig()


@pytest.mark.parametrize("yaml_text, block", [
    ("kueue:\n  waitForPodsReady: {enable: true, blockAdmission: true}\n", True),
    ("kueue:\n  waitForPodsReady: {enable: true}\n", False),
    ("{}", False),
])
def test_block_admission_from_kueue_configuration(yaml_text: str, block: bool) -> None:
    from kq.config import parse_config
    from services.admission.core.from_api import scheduler_config

    assert scheduler_config(parse_config(yaml_text).kueue).block_admission is block


@pytest.mark.parametrize("status, ready", [
    ({"conditions": [{"type": "PodsReady", "status": "True", "reason": "PodsReady",
                      "lastTransitionTime": "2024-01-01T00:00:00Z"}]}, True),
    ({"conditions": [{"type": "PodsReady", "status": "False", "reason": "WaitForStart",
                      "lastTransitionTime": "2024-01-01T00:00:00Z"}]}, False),
    ({}, False),
])
def test_workload_pods_ready(status: dict, ready: bool) -> None:
    import yaml

    doc = yaml.safe_load(WORKLOAD)
    doc["status"] = status
    (obj,) = load_documents(yaml.safe_dump(doc), "test")
    w = event_from_api(obj.obj)
    assert isinstance(w, Workload) and w.pods_ready is ready, w
