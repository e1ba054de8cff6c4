"""Decoding real-looking Kubernetes/Kueue JSON into kq's Structs, round trips, the registry, helpers."""

from __future__ import annotations

import json

import msgspec
import pytest
import yaml

from kq.api import KINDS, UnknownKindError, core, decode_object, encode_object, kind_for, kind_info, kueue
from kq.api.meta import (
    LabelSelector,
    LabelSelectorRequirement,
    ObjectMeta,
    SelectorError,
    find_condition,
    selector_matches,
)
from kq.api.topology import TopologyDomain, compact_topology_assignment, topology_domains

# Objects as an API server returns them (server-set fields, fields kq does not model),
# modelled on Kueue's site/static/examples and on real kubectl output.
_SERVER_DOCS = yaml.safe_load_all(
    """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cluster-queue
  uid: 0d8f6a0e-1b5e-4a4e-9d0c-2f8c1c3a9b11
  resourceVersion: "1042"
  generation: 3
  creationTimestamp: "2025-05-01T10:00:00Z"
  finalizers: [kueue.x-k8s.io/resource-in-use]
  managedFields:
  - {manager: kubectl, operation: Update, apiVersion: kueue.x-k8s.io/v1beta2}
spec:
  namespaceSelector: {}
  cohortName: team
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: "9", borrowingLimit: "2", lendingLimit: "1"}
      - {name: memory, nominalQuota: 36Gi}
  preemption:
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
    withinClusterQueue: LowerPriority
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, preference: PreemptionOverBorrowing}
  fairSharing: {weight: "2"}
  admissionChecksStrategy:
    admissionChecks:
    - {name: sample-multikueue, onFlavors: [default-flavor]}
  stopPolicy: Hold
status:
  conditions:
  - {type: Active, status: "True", reason: Ready, message: Can admit new workloads,
     lastTransitionTime: "2025-05-01T10:00:01Z", observedGeneration: 3}
  flavorsReservation:
  - name: default-flavor
    resources:
    - {name: cpu, total: "6", borrowed: "0"}
    - {name: memory, total: 600Mi, borrowed: "0"}
  flavorsUsage:
  - name: default-flavor
    resources:
    - {name: cpu, total: "6", borrowed: "0"}
  pendingWorkloads: 1
  reservingWorkloads: 2
  admittedWorkloads: 2
  fairSharing: {weightedShare: 0}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: user-queue, namespace: default, uid: a1, resourceVersion: "7"}
spec: {clusterQueue: cluster-queue, stopPolicy: None}
status:
  conditions: [{type: Active, status: "True", reason: Ready, message: Can submit new workloads to localQueue}]
  pendingWorkloads: 0
  reservingWorkloads: 1
  admittedWorkloads: 1
  flavorsReservation: [{name: default-flavor, resources: [{name: cpu, total: "1"}]}]
  flavorsUsage: [{name: default-flavor, resources: [{name: cpu, total: "1"}]}]
  fairSharing:
    weightedShare: 12
    admissionFairSharingStatus: {consumedResources: {cpu: 1500m}, lastUpdate: "2025-05-01T10:00:00Z"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {node-type: spot}
  nodeTaints: [{key: spot, value: "true", effect: NoSchedule}]
  tolerations: [{key: spot, operator: Equal, value: "true", effect: NoSchedule}]
  topologyName: default
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: team}
spec:
  parentName: org
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default-flavor, resources: [{name: cpu, nominalQuota: "4", lendingLimit: "2"}]}]
  fairSharing: {weight: "0.5"}
status: {fairSharing: {weightedShare: 250}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: default}
spec:
  levels:
  - nodeLabel: cloud.provider.com/topology-block
  - nodeLabel: cloud.provider.com/topology-rack
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: sample-multikueue}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: multikueue-test}
status:
  conditions: [{type: Active, status: "True", reason: Active, message: The admission check is active}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: multikueue-test}
spec: {clusters: [multikueue-test-worker1], quotaManagement: Manual}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: multikueue-test-worker1}
spec:
  clusterSource:
    kubeConfig: {locationType: Secret, location: worker1-secret}
status:
  conditions: [{type: Active, status: "True", reason: Active, message: Connected}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: sample-priority}
value: 10000
description: Sample priority
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: job-sample-job-5bd9c
  namespace: default
  uid: w-1
  resourceVersion: "2211"
  generation: 1
  labels: {kueue.x-k8s.io/job-uid: j-1}
  ownerReferences:
  - {apiVersion: batch/v1, kind: Job, name: sample-job, uid: j-1, controller: true, blockOwnerDeletion: true}
  finalizers: [kueue.x-k8s.io/resource-in-use]
spec:
  queueName: user-queue
  priority: 10000
  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: sample-priority}
  active: true
  maximumExecutionTimeSeconds: 600
  podSets:
  - name: main
    count: 3
    minCount: 1
    topologyRequest: {required: cloud.provider.com/topology-rack, podIndexLabel: batch.kubernetes.io/job-completion-index}
    template:
      metadata: {labels: {app: sample}}
      spec:
        restartPolicy: Never
        terminationGracePeriodSeconds: 30
        dnsPolicy: ClusterFirst
        containers:
        - name: dummy-job
          image: registry.k8s.io/e2e-test-images/agnhost:2.53
          args: [entrypoint-tester, hello, world]
          resources: {requests: {cpu: "1", memory: 200Mi}}
          terminationMessagePolicy: File
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions: [{key: node-type, operator: In, values: [spot]}]
status:
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved, message: Quota reserved in ClusterQueue cluster-queue,
     lastTransitionTime: "2025-05-01T10:01:00Z", observedGeneration: 1}
  - {type: Admitted, status: "True", reason: Admitted, message: The workload is admitted,
     lastTransitionTime: "2025-05-01T10:01:00Z", observedGeneration: 1}
  admission:
    clusterQueue: cluster-queue
    podSetAssignments:
    - name: main
      count: 3
      flavors: {cpu: default-flavor, memory: default-flavor}
      resourceUsage: {cpu: "3", memory: 600Mi}
      topologyAssignment:
        levels: [cloud.provider.com/topology-rack, kubernetes.io/hostname]
        slices:
        - domainCount: 2
          valuesPerLevel:
          - universal: rack-1
          - individual: {prefix: node-, roots: ["1", "2"]}
          podCounts: {individual: [2, 1]}
  requeueState: {count: 2, requeueAt: "2025-05-01T10:05:00Z"}
  admissionChecks:
  - name: sample-multikueue
    state: Ready
    lastTransitionTime: "2025-05-01T10:01:00Z"
    message: The workload got reservation on "worker1"
    podSetUpdates: [{name: main, nodeSelector: {zone: a}, tolerations: [{key: spot, operator: Exists}]}]
  resourceRequests: [{name: main, resources: {cpu: "1", memory: 200Mi}}]
  reclaimablePods: [{name: main, count: 1}]
  accumulatedPastExecutionTimeSeconds: 120
  schedulingStats:
    evictions: [{reason: Preempted, underlyingCause: InClusterQueue, count: 1}]
  clusterName: worker1
  unhealthyNodes: [{name: node-3}]
---
apiVersion: batch/v1
kind: Job
metadata:
  name: sample-job
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: user-queue}
  annotations: {kueue.x-k8s.io/job-min-parallelism: "1"}
spec:
  parallelism: 3
  completions: 3
  suspend: false
  backoffLimit: 6
  completionMode: Indexed
  managedBy: kueue.x-k8s.io/multikueue
  podReplacementPolicy: TerminatingOrFailed
  selector: {matchLabels: {batch.kubernetes.io/controller-uid: j-1}}
  template:
    metadata: {labels: {batch.kubernetes.io/controller-uid: j-1}}
    spec:
      containers:
      - {name: dummy-job, image: busybox, command: [/bin/sh], args: [-c, sleep 60],
         resources: {requests: {cpu: "1", memory: 200Mi}, limits: {memory: 200Mi}}}
      restartPolicy: Never
      nodeSelector: {node-type: spot}
      schedulingGates: [{name: kueue.x-k8s.io/topology}]
status:
  active: 3
  ready: 2
  succeeded: 0
  terminating: 0
  startTime: "2025-05-01T10:01:02Z"
  uncountedTerminatedPods: {}
  conditions:
  - {type: Suspended, status: "False", reason: JobResumed, message: Job resumed,
     lastProbeTime: "2025-05-01T10:01:02Z", lastTransitionTime: "2025-05-01T10:01:02Z"}
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: sleep-job-abc, namespace: default, labels: {kueue.x-k8s.io/queue-name: user-queue}}
spec:
  network: {enableDNSHostnames: false, subdomain: some-subdomain}
  suspend: true
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 1
        completions: 1
        backoffLimit: 0
        template:
          spec:
            containers: [{name: sleep, image: busybox, resources: {requests: {cpu: 1, memory: 200Mi}}}]
status:
  replicatedJobsStatus: [{name: workers, ready: 0, succeeded: 0, failed: 0, active: 0, suspended: 2}]
---
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {kubernetes.io/hostname: node-1, node-type: spot}}
spec:
  podCIDR: 10.244.1.0/24
  providerID: kind://docker/kind/node-1
  taints: [{key: spot, value: "true", effect: NoSchedule}]
status:
  capacity: {cpu: "8", memory: 32Gi, pods: "110", ephemeral-storage: 100Gi}
  allocatable: {cpu: 7800m, memory: 31Gi, pods: "110", nvidia.com/gpu: "4"}
  conditions:
  - {type: Ready, status: "True", reason: KubeletReady, message: kubelet is posting ready status,
     lastHeartbeatTime: "2025-05-01T10:00:00Z", lastTransitionTime: "2025-05-01T09:00:00Z"}
  nodeInfo: {kubeletVersion: v1.33.0}
---
apiVersion: v1
kind: Pod
metadata:
  name: sample-job-0-abcde
  namespace: default
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: sample-job, uid: j-1, controller: true}]
spec:
  nodeName: node-1
  priorityClassName: high
  priority: 1000
  containers: [{name: c, image: busybox, resources: {requests: {cpu: 500m}}}]
  initContainers: [{name: sidecar, image: envoy, restartPolicy: Always, resources: {requests: {cpu: 100m}}}]
  tolerations: [{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}]
  overhead: {cpu: 10m}
status:
  phase: Running
  hostIP: 10.0.0.1
  podIP: 10.244.1.5
  conditions: [{type: Ready, status: "True", lastProbeTime: null, lastTransitionTime: "2025-05-01T10:01:05Z"}]
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {kubernetes.io/metadata.name: team-a}}
spec: {finalizers: [kubernetes]}
status: {phase: Active}
---
apiVersion: v1
kind: Secret
metadata: {name: worker1-secret, namespace: kq-system}
type: Opaque
data: {kubeconfig: YXBpVmVyc2lvbjogdjEK}
"""
)
SERVER_OBJECTS = [d for d in _SERVER_DOCS if d]


@pytest.mark.parametrize("doc", SERVER_OBJECTS, ids=[d["kind"] for d in SERVER_OBJECTS])
def test_decode_and_round_trip(doc):
    raw = json.dumps(doc).encode()
    obj = decode_object(doc["kind"], raw)
    assert type(obj) is kind_info(doc["kind"]).type
    assert obj.metadata.name == doc["metadata"]["name"]
    again = decode_object(doc["kind"], encode_object(obj))
    assert again == obj


def test_decoded_fields():
    by_kind = {d["kind"]: decode_object(d["kind"], json.dumps(d).encode()) for d in SERVER_OBJECTS}
    cq = by_kind["ClusterQueue"]
    assert cq.spec.cohort_name == "team"
    assert cq.spec.resource_groups[0].flavors[0].resources[0].lending_limit == "1"
    assert cq.spec.preemption.borrow_within_cohort.max_priority_threshold == 100
    assert cq.spec.flavor_fungibility.preference == "PreemptionOverBorrowing"
    assert cq.spec.admission_checks_strategy.admission_checks[0].on_flavors == ("default-flavor",)
    assert cq.status.reserving_workloads == 2
    active = find_condition(cq.status.conditions, "Active")
    assert active is not None and active.observed_generation == 3
    lq = by_kind["LocalQueue"]
    assert lq.status.fair_sharing.admission_fair_sharing_status.consumed_resources == {"cpu": "1500m"}
    wl = by_kind["Workload"]
    assert wl.spec.priority_class_ref.kind == "WorkloadPriorityClass"
    assert wl.spec.pod_sets[0].min_count == 1
    assert wl.spec.pod_sets[0].topology_request.required == "cloud.provider.com/topology-rack"
    terms = wl.spec.pod_sets[0].template.spec.affinity.node_affinity
    assert terms.required_during_scheduling_ignored_during_execution.node_selector_terms[0].match_expressions[0].values == (
        "spot",
    )
    assert wl.status.admission.pod_set_assignments[0].flavors == {"cpu": "default-flavor", "memory": "default-flavor"}
    assert wl.status.requeue_state.count == 2
    assert wl.status.accumulated_past_execution_time_seconds == 120
    assert wl.status.scheduling_stats.evictions[0].underlying_cause == "InClusterQueue"
    assert wl.status.admission_checks[0].pod_set_updates[0].node_selector == {"zone": "a"}
    job = by_kind["Job"]
    assert (job.spec.suspend, job.spec.managed_by, job.status.ready) == (False, "kueue.x-k8s.io/multikueue", 2)
    assert job.spec.template.spec.scheduling_gates[0].name == "kueue.x-k8s.io/topology"
    assert by_kind["JobSet"].spec.replicated_jobs[0].template.spec.template.spec.containers[0].resources.requests == {
        "cpu": 1,
        "memory": "200Mi",
    }
    node = by_kind["Node"]
    assert node.status.allocatable["cpu"] == "7800m" and node.spec.taints[0].effect == "NoSchedule"
    pod = by_kind["Pod"]
    assert (pod.spec.node_name, pod.status.host_ip, pod.spec.init_containers[0].restart_policy) == (
        "node-1",
        "10.0.0.1",
        "Always",
    )
    assert by_kind["WorkloadPriorityClass"].value == 10000
    assert by_kind["MultiKueueCluster"].spec.cluster_source.kube_config.location == "worker1-secret"


def test_defaults_are_kueues():
    cq = decode_object("ClusterQueue", b'{"metadata":{"name":"cq"},"spec":{}}')
    assert cq.spec.queueing_strategy == "BestEffortFIFO"
    assert cq.spec.stop_policy == "None"
    assert cq.spec.preemption == kueue.ClusterQueuePreemption(
        reclaim_within_cohort="Never",
        borrow_within_cohort=kueue.BorrowWithinCohort(policy="Never"),
        within_cluster_queue="Never",
    )
    assert (cq.spec.flavor_fungibility.when_can_borrow, cq.spec.flavor_fungibility.when_can_preempt) == (
        "MayStopSearch",
        "TryNextFlavor",
    )
    assert cq.spec.namespace_selector is None
    ps = decode_object("Workload", b'{"metadata":{"name":"w"},"spec":{"podSets":[{"template":{}}]}}').spec.pod_sets[0]
    assert (ps.name, ps.count) == ("main", 1)


def test_kueue_kinds_reject_unknown_fields_core_kinds_ignore_them():
    with pytest.raises(msgspec.ValidationError, match="unknown field `cohort`"):
        decode_object("ClusterQueue", b'{"metadata":{"name":"cq"},"spec":{"cohort":"x"}}')
    pod = decode_object("Pod", b'{"metadata":{"name":"p"},"spec":{"dnsPolicy":"ClusterFirst"}}')
    assert pod.metadata.name == "p"


def test_encode_fills_api_version_and_kind_and_omits_defaults():
    body = json.loads(encode_object(kueue.LocalQueue(metadata=ObjectMeta(name="q", namespace="ns"))))
    assert body == {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "ns"}}
    body = json.loads(encode_object(core.Job(metadata=ObjectMeta(name="j"))))
    assert (body["apiVersion"], body["kind"]) == ("batch/v1", "Job")


def test_whole_status_structs_encode_every_field():
    # SetClusterQueueStatus replaces the status: zero counts must reach the API server.
    enc = json.loads(msgspec.json.encode(kueue.ClusterQueueStatus()))
    assert enc["pendingWorkloads"] == 0 and enc["admittedWorkloads"] == 0 and enc["fairSharing"] is None
    enc = json.loads(msgspec.json.encode(kueue.LocalQueueStatus()))
    assert enc["reservingWorkloads"] == 0 and enc["flavorsUsage"] == []


def test_messages_contract_names_exist():
    import kq.messages  # noqa: F401  (imports them at module level)
    from kq.api.kueue import Admission, ClusterQueueStatus, LocalQueueStatus  # noqa: F401


KIND_LOOKUPS = [
    ("ClusterQueue", "ClusterQueue"),
    ("clusterqueue", "ClusterQueue"),
    ("CLUSTERQUEUES", "ClusterQueue"),
    ("cq", "ClusterQueue"),
    ("workload", "Workload"),
    ("wl", "Workload"),
    ("jobset", "JobSet"),
    ("jobs", "Job"),
    ("ns", "Namespace"),
    ("workloadpriorityclass", "WorkloadPriorityClass"),
    ("rf", "ResourceFlavor"),
    ("lq", "LocalQueue"),
]


@pytest.mark.parametrize(("name", "kind"), KIND_LOOKUPS, ids=[c[0] for c in KIND_LOOKUPS])
def test_kind_info(name, kind):
    assert kind_info(name).kind == kind


def test_registry_covers_every_kind():
    assert {i.kind for i in KINDS} == {
        "Namespace", "Node", "Pod", "Secret", "PriorityClass", "Job", "JobSet", "ResourceFlavor", "ClusterQueue", "LocalQueue",
        "Cohort", "Topology", "AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster", "WorkloadPriorityClass", "Event",
        "Workload", "Deployment", "ReplicaSet", "StatefulSet", "LeaderWorkerSet", "PyTorchJob", "TFJob", "XGBoostJob",
        "PaddleJob", "JAXJob", "MPIJob", "RayJob", "RayCluster", "TrainJob", "TrainingRuntime", "ClusterTrainingRuntime",
        "AppWrapper",
    }  # fmt: skip
    info = kind_for("kueue.x-k8s.io/v1beta2", "LocalQueue")
    assert (info.plural, info.namespaced, info.has_status, info.token, info.strict) == (
        "localqueues",
        True,
        True,
        "localqueue",
        True,
    )
    assert kind_for("v1", "Node").api_version == "v1" and not kind_for("v1", "Node").namespaced
    assert kind_for("jobset.x-k8s.io/v1alpha2", "JobSet").plural == "jobsets"
    assert not kind_for("kueue.x-k8s.io/v1beta2", "Topology").has_status
    with pytest.raises(UnknownKindError):
        kind_for("kueue.x-k8s.io/v1beta1", "ClusterQueue")
    with pytest.raises(UnknownKindError):
        kind_info("DaemonSet")


def _sel(match_labels=None, *exprs):
    return LabelSelector(
        match_labels=match_labels or {},
        match_expressions=tuple(LabelSelectorRequirement(key=k, operator=op, values=tuple(v)) for k, op, v in exprs),
    )


SELECTOR_CASES = [
    ("nil-matches-nothing", None, {"a": "1"}, False),
    ("empty-matches-all", _sel(), {}, True),
    ("labels-match", _sel({"team": "a"}), {"team": "a", "x": "y"}, True),
    ("labels-differ", _sel({"team": "a"}), {"team": "b"}, False),
    ("in", _sel(None, ("env", "In", ["dev", "prod"])), {"env": "prod"}, True),
    ("in-absent", _sel(None, ("env", "In", ["dev"])), {}, False),
    ("notin-absent", _sel(None, ("env", "NotIn", ["dev"])), {}, True),
    ("notin-present", _sel(None, ("env", "NotIn", ["dev"])), {"env": "dev"}, False),
    ("exists", _sel(None, ("env", "Exists", [])), {"env": ""}, True),
    ("doesnotexist", _sel(None, ("env", "DoesNotExist", [])), {"env": "x"}, False),
    ("all-must-hold", _sel({"a": "1"}, ("b", "Exists", [])), {"a": "1"}, False),
]


@pytest.mark.parametrize(("sel", "labels", "expected"), [c[1:] for c in SELECTOR_CASES], ids=[c[0] for c in SELECTOR_CASES])
def test_selector_matches(sel, labels, expected):
    assert selector_matches(sel, labels) is expected


@pytest.mark.parametrize(
    "req", [("env", "In", []), ("env", "Exists", ["x"])], ids=["in-without-values", "exists-with-values"]
)
def test_selector_rejects_malformed_requirements(req):
    with pytest.raises(SelectorError):
        selector_matches(_sel(None, req), {"env": "x"})


TOLERATION_CASES = [
    ("exact", core.Toleration(key="spot", value="true", effect="NoSchedule"), True),
    ("wrong-value", core.Toleration(key="spot", value="false", effect="NoSchedule"), False),
    ("exists-any-value", core.Toleration(key="spot", operator="Exists"), True),
    ("wrong-effect", core.Toleration(key="spot", operator="Exists", effect="NoExecute"), False),
    ("empty-key-exists-matches-all", core.Toleration(operator="Exists"), True),
    ("other-key", core.Toleration(key="gpu", operator="Exists"), False),
]


@pytest.mark.parametrize(("tol", "expected"), [c[1:] for c in TOLERATION_CASES], ids=[c[0] for c in TOLERATION_CASES])
def test_toleration_tolerates(tol, expected):
    assert tol.tolerates(core.Taint(key="spot", value="true", effect="NoSchedule")) is expected


def test_topology_domains_expand_the_compact_form():
    wl = decode_object("Workload", json.dumps(next(d for d in SERVER_OBJECTS if d["kind"] == "Workload")).encode())
    ta = wl.status.admission.pod_set_assignments[0].topology_assignment
    assert topology_domains(ta) == [
        TopologyDomain(("rack-1", "node-1"), 2),
        TopologyDomain(("rack-1", "node-2"), 1),
    ]


COMPACT_CASES = [
    ("empty", ("rack",), []),
    ("one", ("rack", "host"), [TopologyDomain(("r1", "h1"), 4)]),
    ("shared-prefix", ("host",), [TopologyDomain((f"pool-a-node-{i}",), 1) for i in range(5)]),
    ("prefix-and-suffix", ("host",), [TopologyDomain(("a-1-x",), 1), TopologyDomain(("a-22-x",), 3)]),
    ("overlapping-affixes", ("host",), [TopologyDomain(("ababa",), 1), TopologyDomain(("aba",), 2)]),
    ("no-common", ("block", "host"), [TopologyDomain(("b1", "x"), 1), TopologyDomain(("b2", "y"), 1)]),
]


@pytest.mark.parametrize(("levels", "domains"), [c[1:] for c in COMPACT_CASES], ids=[c[0] for c in COMPACT_CASES])
def test_compact_round_trips(levels, domains):
    ta = compact_topology_assignment(levels, domains)
    assert topology_domains(ta) == domains
    assert len(ta.slices) == (1 if domains else 0)


def test_compact_uses_universal_values_and_affixes():
    ta = compact_topology_assignment(
        ("rack", "host"), [TopologyDomain(("r1", f"node-{i}"), 2) for i in range(3)]
    )
    (sl,) = ta.slices
    assert sl.values_per_level[0].universal == "r1"
    individual = sl.values_per_level[1].individual
    assert individual is not None and individual.prefix == "node-" and individual.roots == ("0", "1", "2")
    assert sl.pod_counts.universal == 2


def test_decoded_api_objects_are_not_tracked_by_the_cyclic_collector() -> None:
    """Long-lived caches of API objects must not be walked by every full collection (meta.K8sStruct)."""
    import gc

    from kq.api.kueue import Workload

    raw = msgspec.json.encode({
        "metadata": {"name": "w", "namespace": "ns", "labels": {"a": "b"}},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                   "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
    })
    wl = msgspec.json.decode(raw, type=Workload)
    assert [gc.is_tracked(o) for o in (wl, wl.metadata, wl.spec, wl.spec.pod_sets[0], wl.status,
                                       wl.status.conditions[0])] == [False] * 6
