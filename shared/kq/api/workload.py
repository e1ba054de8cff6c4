"""Kueue v1beta2 Workload, field for field from apis/kueue/v1beta2/workload_types.go.

Strict like every Kueue type (unknown fields rejected); the pod templates inside
are core types and lenient. Defaults are the CRD's (+kubebuilder:default).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from kq.api.core import PodTemplateSpec, Toleration
from kq.api.meta import Condition, K8sStruct, ObjectMeta, ResourceList

__all__ = [
    "KueueStruct",
    "PriorityClassRef",
    "PodsetSliceRequiredTopologyConstraint",
    "PodSetTopologyRequest",
    "PodSet",
    "PreemptionGate",
    "WorkloadSpec",
    "TopologyAssignmentSliceLevelIndividualValues",
    "TopologyAssignmentSliceLevelValues",
    "TopologyAssignmentSlicePodCounts",
    "TopologyAssignmentSlice",
    "TopologyAssignment",
    "PodSetAssignment",
    "Admission",
    "RequeueState",
    "PodSetUpdate",
    "AdmissionCheckState",
    "ReclaimablePod",
    "PodSetRequest",
    "WorkloadSchedulingStatsEviction",
    "SchedulingStats",
    "UnhealthyNode",
    "PreemptionGateState",
    "WorkloadStatus",
    "Workload",
]

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]
CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]


class KueueStruct(K8sStruct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the Kueue API types: unknown fields are an error (user typos are rejected)."""


class PriorityClassRef(KueueStruct, frozen=True, kw_only=True):
    group: Literal["scheduling.k8s.io", "kueue.x-k8s.io"]
    kind: Literal["PriorityClass", "WorkloadPriorityClass"]
    name: str


class PodsetSliceRequiredTopologyConstraint(KueueStruct, frozen=True, kw_only=True):
    topology: Annotated[str, msgspec.Meta(min_length=1, max_length=63)]
    size: Positive


class PodSetTopologyRequest(KueueStruct, frozen=True, kw_only=True):
    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    pod_index_label: Annotated[str, msgspec.Meta(max_length=317)] | None = None
    sub_group_index_label: Annotated[str, msgspec.Meta(max_length=317)] | None = None
    sub_group_count: NonNegative | None = None
    pod_set_group_name: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    pod_set_slice_required_topology: Annotated[str, msgspec.Meta(max_length=63)] | None = None
    pod_set_slice_size: Positive | None = None
    podset_slice_required_topology_constraints: Annotated[
        tuple[PodsetSliceRequiredTopologyConstraint, ...], msgspec.Meta(max_length=3)
    ] = ()


class PodSet(KueueStruct, frozen=True, kw_only=True):
    template: PodTemplateSpec
    name: str = "main"
    count: NonNegative = 1
    min_count: Positive | None = None
    topology_request: PodSetTopologyRequest | None = None


class PreemptionGate(KueueStruct, frozen=True, kw_only=True):
    name: str


class WorkloadSpec(KueueStruct, frozen=True, kw_only=True):
    pod_sets: tuple[PodSet, ...] = ()
    queue_name: str = ""
    priority_class_ref: PriorityClassRef | None = None
    priority: int | None = None
    active: bool | None = None  # None means true (the CRD default)
    maximum_execution_time_seconds: Positive | None = None
    preemption_gates: tuple[PreemptionGate, ...] = ()

    @property
    def is_active(self) -> bool:
        return self.active is not False


class TopologyAssignmentSliceLevelIndividualValues(KueueStruct, frozen=True, kw_only=True):
    roots: Annotated[tuple[str, ...], msgspec.Meta(max_length=100_000)] = ()
    prefix: Annotated[str, msgspec.Meta(max_length=63)] | None = None
    suffix: Annotated[str, msgspec.Meta(max_length=63)] | None = None


class TopologyAssignmentSliceLevelValues(KueueStruct, frozen=True, kw_only=True):
    """Exactly one of universal / individual is set."""

    universal: Annotated[str, msgspec.Meta(max_length=63)] | None = None
    individual: TopologyAssignmentSliceLevelIndividualValues | None = None


class TopologyAssignmentSlicePodCounts(KueueStruct, frozen=True, kw_only=True):
    """Exactly one of universal / individual is set."""

    universal: Positive | None = None
    individual: Annotated[tuple[NonNegative, ...], msgspec.Meta(max_length=100_000)] = ()


class TopologyAssignmentSlice(KueueStruct, frozen=True, kw_only=True):
    domain_count: Positive
    values_per_level: Annotated[tuple[TopologyAssignmentSliceLevelValues, ...], msgspec.Meta(max_length=16)] = ()
    pod_counts: TopologyAssignmentSlicePodCounts = TopologyAssignmentSlicePodCounts()


class TopologyAssignment(KueueStruct, frozen=True, kw_only=True):
    """Compact v1beta2 form; kq.api.topology expands it to (values, count) domains and back."""

    levels: Annotated[tuple[str, ...], msgspec.Meta(min_length=1, max_length=16)]
    slices: Annotated[tuple[TopologyAssignmentSlice, ...], msgspec.Meta(max_length=1000)] = ()


class PodSetAssignment(KueueStruct, frozen=True, kw_only=True):
    name: str = "main"
    flavors: dict[str, str] = {}  # resource -> flavor
    resource_usage: ResourceList = {}
    count: NonNegative | None = None
    topology_assignment: TopologyAssignment | None = None
    delayed_topology_request: Literal["Pending", "Ready"] | None = None


class Admission(KueueStruct, frozen=True, kw_only=True):
    cluster_queue: str
    pod_set_assignments: tuple[PodSetAssignment, ...] = ()


class RequeueState(KueueStruct, frozen=True, kw_only=True):
    count: NonNegative | None = None
    requeue_at: str | None = None


class PodSetUpdate(KueueStruct, frozen=True, kw_only=True):
    name: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    tolerations: tuple[Toleration, ...] = ()


class AdmissionCheckState(KueueStruct, frozen=True, kw_only=True):
    name: str
    state: CheckState
    last_transition_time: str | None = None
    message: str = ""
    requeue_after_seconds: NonNegative | None = None
    retry_count: NonNegative | None = None
    pod_set_updates: tuple[PodSetUpdate, ...] = ()


class ReclaimablePod(KueueStruct, frozen=True, kw_only=True):
    name: str
    count: NonNegative


class PodSetRequest(KueueStruct, frozen=True, kw_only=True):
    name: str
    resources: ResourceList = {}


class WorkloadSchedulingStatsEviction(KueueStruct, frozen=True, kw_only=True):
    reason: str
    underlying_cause: str = ""
    count: NonNegative = 0


class SchedulingStats(KueueStruct, frozen=True, kw_only=True):
    evictions: tuple[WorkloadSchedulingStatsEviction, ...] = ()


class UnhealthyNode(KueueStruct, frozen=True, kw_only=True):
    name: str


class PreemptionGateState(KueueStruct, frozen=True, kw_only=True):
    name: str
    position: Literal["Closed", "Open"]
    last_transition_time: str | None = None


class WorkloadStatus(KueueStruct, frozen=True, kw_only=True):
    conditions: tuple[Condition, ...] = ()
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    reclaimable_pods: tuple[ReclaimablePod, ...] = ()
    admission_checks: tuple[AdmissionCheckState, ...] = ()
    resource_requests: tuple[PodSetRequest, ...] = ()
    accumulated_past_execution_time_seconds: int | None = None
    scheduling_stats: SchedulingStats | None = None
    nominated_cluster_names: tuple[str, ...] = ()
    cluster_name: str | None = None
    unhealthy_nodes: Annotated[tuple[UnhealthyNode, ...], msgspec.Meta(max_length=8)] = ()
    preemption_gates: tuple[PreemptionGateState, ...] = ()


class Workload(KueueStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: WorkloadSpec = WorkloadSpec()
    status: WorkloadStatus = WorkloadStatus()
