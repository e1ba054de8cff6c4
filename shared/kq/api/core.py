"""Core Kubernetes kinds kq reads and writes: Namespace, Node, Pod, Secret, PriorityClass, batch/v1 Job, JobSet.

Lenient on purpose: real objects carry many fields kq does not model, and those
are ignored when decoding. Re-encoding such a Struct therefore drops them; code
that must copy an object faithfully (e.g. a Job to a worker cluster) works from
the raw JSON instead.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from kq.api.meta import Condition, K8sStruct, LabelSelector, ObjectMeta, ResourceList

__all__ = [
    "Taint",
    "Toleration",
    "ResourceRequirements",
    "EnvVar",
    "ContainerPort",
    "Container",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NodeSelector",
    "NodeAffinity",
    "Affinity",
    "PodSchedulingGate",
    "PodSpec",
    "PodTemplateSpec",
    "CoreCondition",
    "PodStatus",
    "Pod",
    "NodeSpec",
    "NodeStatus",
    "Node",
    "NamespaceStatus",
    "Namespace",
    "Secret",
    "JobSpec",
    "JobStatus",
    "Job",
    "JobTemplateSpec",
    "ReplicatedJob",
    "JobSetSpec",
    "ReplicatedJobStatus",
    "JobSetStatus",
    "JobSet",
    "PriorityClass",
]

RawObject = dict[str, Any]  # a sub-object kept as decoded JSON, not interpreted by kq


class Taint(K8sStruct, frozen=True, kw_only=True):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    time_added: str | None = None


class Toleration(K8sStruct, frozen=True, kw_only=True):
    key: str = ""
    operator: Literal["Exists", "Equal", ""] = ""  # "" means Equal
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] = ""  # "" matches every effect
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """corev1 Toleration.ToleratesTaint."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value  # Equal (or empty operator)


class ResourceRequirements(K8sStruct, frozen=True, kw_only=True):
    requests: ResourceList = {}
    limits: ResourceList = {}


class EnvVar(K8sStruct, frozen=True, kw_only=True):
    name: str
    value: str | None = None
    value_from: RawObject | None = None


class ContainerPort(K8sStruct, frozen=True, kw_only=True):
    container_port: int
    name: str = ""
    protocol: str = ""
    host_port: int | None = None


class Container(K8sStruct, frozen=True, kw_only=True):
    name: str
    image: str = ""
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    working_dir: str = ""
    env: tuple[EnvVar, ...] = ()
    ports: tuple[ContainerPort, ...] = ()
    resources: ResourceRequirements = ResourceRequirements()
    image_pull_policy: str = ""
    restart_policy: str | None = None  # "Always" on an init container makes it a sidecar


class NodeSelectorRequirement(K8sStruct, frozen=True, kw_only=True):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] = ()


class NodeSelectorTerm(K8sStruct, frozen=True, kw_only=True):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class NodeSelector(K8sStruct, frozen=True, kw_only=True):
    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class NodeAffinity(K8sStruct, frozen=True, kw_only=True):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: tuple[RawObject, ...] = ()


class Affinity(K8sStruct, frozen=True, kw_only=True):
    """Node affinity is typed (flavor assignment reads the required terms); pod (anti-)affinity is kept raw."""

    node_affinity: NodeAffinity | None = None
    pod_affinity: RawObject | None = None
    pod_anti_affinity: RawObject | None = None


class PodSchedulingGate(K8sStruct, frozen=True, kw_only=True):
    name: str


class PodSpec(K8sStruct, frozen=True, kw_only=True):
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    node_name: str = ""
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    scheduling_gates: tuple[PodSchedulingGate, ...] = ()
    priority_class_name: str = ""
    priority: int | None = None
    overhead: ResourceList = {}
    resources: ResourceRequirements | None = None  # pod-level resources
    restart_policy: str = ""
    termination_grace_period_seconds: int | None = None
    service_account_name: str = ""
    scheduler_name: str = ""
    runtime_class_name: str | None = None
    topology_spread_constraints: tuple[RawObject, ...] = ()
    volumes: tuple[RawObject, ...] = ()


class PodTemplateSpec(K8sStruct, frozen=True, kw_only=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: PodSpec = PodSpec()


class CoreCondition(K8sStruct, frozen=True, kw_only=True):
    """The condition shape of core kinds (Pod, Node, Job): no observedGeneration, extra probe/heartbeat times."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    last_probe_time: str | None = None
    last_heartbeat_time: str | None = None


class PodStatus(K8sStruct, frozen=True, kw_only=True):
    phase: str = ""  # Pending | Running | Succeeded | Failed | Unknown
    conditions: tuple[CoreCondition, ...] = ()
    reason: str = ""
    message: str = ""
    start_time: str | None = None
    host_ip: str = msgspec.field(default="", name="hostIP")
    pod_ip: str = msgspec.field(default="", name="podIP")


class Pod(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


class NodeSpec(K8sStruct, frozen=True, kw_only=True):
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    provider_id: str = msgspec.field(default="", name="providerID")


class NodeStatus(K8sStruct, frozen=True, kw_only=True):
    capacity: ResourceList = {}
    allocatable: ResourceList = {}
    conditions: tuple[CoreCondition, ...] = ()


class Node(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()


class NamespaceStatus(K8sStruct, frozen=True, kw_only=True):
    phase: str = ""


class Namespace(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    status: NamespaceStatus = NamespaceStatus()


class PriorityClass(K8sStruct, frozen=True, kw_only=True):
    """scheduling.k8s.io/v1 PriorityClass (cluster-scoped): a Job whose pods name one gets its value
    as the Workload's priority (Kueue's jobframework)."""

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    value: int = 0
    global_default: bool = False
    description: str = ""
    preemption_policy: str | None = None


class Secret(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    type: str = ""
    data: dict[str, str] = {}  # base64-encoded values
    string_data: dict[str, str] = {}  # write-only plain values (the API server folds them into data)
    immutable: bool | None = None


class JobSpec(K8sStruct, frozen=True, kw_only=True):
    template: PodTemplateSpec = PodTemplateSpec()
    parallelism: int | None = None
    completions: int | None = None
    suspend: bool | None = None
    backoff_limit: int | None = None
    active_deadline_seconds: int | None = None
    managed_by: str | None = None
    completion_mode: str | None = None
    ttl_seconds_after_finished: int | None = None
    selector: LabelSelector | None = None
    manual_selector: bool | None = None
    pod_failure_policy: RawObject | None = None
    success_policy: RawObject | None = None


class JobStatus(K8sStruct, frozen=True, kw_only=True):
    active: int = 0
    ready: int | None = None
    succeeded: int = 0
    failed: int = 0
    terminating: int | None = None
    conditions: tuple[CoreCondition, ...] = ()
    start_time: str | None = None
    completion_time: str | None = None


class Job(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: JobSpec = JobSpec()
    status: JobStatus = JobStatus()


class JobTemplateSpec(K8sStruct, frozen=True, kw_only=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: JobSpec = JobSpec()


class ReplicatedJob(K8sStruct, frozen=True, kw_only=True):
    name: str
    replicas: int = 1
    template: JobTemplateSpec = JobTemplateSpec()


class JobSetSpec(K8sStruct, frozen=True, kw_only=True):
    """jobset.x-k8s.io/v1alpha2, the part kq needs; network/policies kept raw."""

    replicated_jobs: tuple[ReplicatedJob, ...] = ()
    suspend: bool | None = None
    managed_by: str | None = None
    network: RawObject | None = None
    success_policy: RawObject | None = None
    failure_policy: RawObject | None = None
    startup_policy: RawObject | None = None
    ttl_seconds_after_finished: int | None = None


class ReplicatedJobStatus(K8sStruct, frozen=True, kw_only=True):
    name: str
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0
    suspended: int = 0


class JobSetStatus(K8sStruct, frozen=True, kw_only=True):
    conditions: tuple[Condition, ...] = ()
    restarts: int = 0
    terminal_state: str = ""
    replicated_jobs_status: tuple[ReplicatedJobStatus, ...] = ()


class JobSet(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: JobSetSpec = JobSetSpec()
    status: JobSetStatus = JobSetStatus()
