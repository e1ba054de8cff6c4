"""Kueue v1beta2 kinds, field for field from apis/kueue/v1beta2/*_types.go.

Strict: an unknown field is an error. Defaults are the CRD's (+kubebuilder:default),
so a decoded object looks as the API server would store it. The Workload types
live in kq.api.workload and are re-exported here, as are the constants.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from kq.api.constants import *  # noqa: F403 - Kueue's names belong to this module's namespace
from kq.api.core import Taint, Toleration
from kq.api.meta import Condition, LabelSelector, ObjectMeta, Quantity, ResourceList
from kq.api.workload import *  # noqa: F403
from kq.api.workload import KueueStruct, NonNegative

PreemptionPolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"]
StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
QueueingStrategy = Literal["StrictFIFO", "BestEffortFIFO"]
FlavorFungibilityPolicy = Literal["MayStopSearch", "TryNextFlavor"]


class FairSharing(KueueStruct, frozen=True, kw_only=True):
    weight: Quantity = "1"


class FairSharingStatus(KueueStruct, frozen=True, kw_only=True):
    weighted_share: int = 0


class AdmissionScope(KueueStruct, frozen=True, kw_only=True):
    admission_mode: Literal["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"]


# --- ResourceFlavor ---


class ResourceFlavorSpec(KueueStruct, frozen=True, kw_only=True):
    node_labels: Annotated[dict[str, str], msgspec.Meta(max_length=8)] = {}
    node_taints: Annotated[tuple[Taint, ...], msgspec.Meta(max_length=8)] = ()
    tolerations: Annotated[tuple[Toleration, ...], msgspec.Meta(max_length=8)] = ()
    topology_name: str | None = None


class ResourceFlavor(KueueStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: ResourceFlavorSpec = ResourceFlavorSpec()


# --- quotas (ClusterQueue and Cohort) ---


class ResourceQuota(KueueStruct, frozen=True, kw_only=True):
    name: str
    nominal_quota: Quantity
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None


class FlavorQuotas(KueueStruct, frozen=True, kw_only=True):
    name: str
    resources: Annotated[tuple[ResourceQuota, ...], msgspec.Meta(min_length=1, max_length=64)]


class ResourceGroup(KueueStruct, frozen=True, kw_only=True):
    covered_resources: Annotated[tuple[str, ...], msgspec.Meta(min_length=1, max_length=64)]
    flavors: Annotated[tuple[FlavorQuotas, ...], msgspec.Meta(min_length=1, max_length=64)]


# --- ClusterQueue ---


class AdmissionCheckStrategyRule(KueueStruct, frozen=True, kw_only=True):
    name: str
    on_flavors: tuple[str, ...] = ()


class AdmissionChecksStrategy(KueueStruct, frozen=True, kw_only=True):
    admission_checks: Annotated[tuple[AdmissionCheckStrategyRule, ...], msgspec.Meta(min_length=1, max_length=64)]


class FlavorFungibility(KueueStruct, frozen=True, kw_only=True):
    when_can_borrow: FlavorFungibilityPolicy = "MayStopSearch"
    when_can_preempt: FlavorFungibilityPolicy = "TryNextFlavor"
    preference: Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"] | None = None


class BorrowWithinCohort(KueueStruct, frozen=True, kw_only=True):
    policy: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: int | None = None


class ClusterQueuePreemption(KueueStruct, frozen=True, kw_only=True):
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Never"
    borrow_within_cohort: BorrowWithinCohort = BorrowWithinCohort()
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "Never"


class ConcurrentAdmissionConstraints(KueueStruct, frozen=True, kw_only=True):
    last_acceptable_flavor_name: str | None = None


class ConcurrentAdmissionMigration(KueueStruct, frozen=True, kw_only=True):
    mode: Literal["TryPreferredFlavors", "RetainFirstAdmission"]
    constraints: ConcurrentAdmissionConstraints | None = None


class ConcurrentAdmissionPolicy(KueueStruct, frozen=True, kw_only=True):
    migration: ConcurrentAdmissionMigration


class ClusterQueueSpec(KueueStruct, frozen=True, kw_only=True):
    resource_groups: Annotated[tuple[ResourceGroup, ...], msgspec.Meta(max_length=16)] = ()
    cohort_name: str = ""
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    namespace_selector: LabelSelector | None = None  # None selects no namespace, {} selects all
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    preemption: ClusterQueuePreemption = ClusterQueuePreemption()
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    stop_policy: StopPolicy = "None"
    fair_sharing: FairSharing | None = None
    admission_scope: AdmissionScope | None = None
    concurrent_admission_policy: ConcurrentAdmissionPolicy | None = None


class ResourceUsage(KueueStruct, frozen=True, kw_only=True):
    name: str
    total: Quantity = "0"
    borrowed: Quantity = "0"


class FlavorUsage(KueueStruct, frozen=True, kw_only=True):
    name: str
    resources: tuple[ResourceUsage, ...] = ()


# The whole-status Structs below are written as a unit (SetClusterQueueStatus,
# SetLocalQueueStatus), so they encode every field: a zero count must reach the
# API server, and None encodes as null, which a merge patch reads as "remove".


class ClusterQueueStatus(KueueStruct, frozen=True, kw_only=True, omit_defaults=False):
    conditions: tuple[Condition, ...] = ()
    flavors_reservation: tuple[FlavorUsage, ...] = ()
    flavors_usage: tuple[FlavorUsage, ...] = ()
    pending_workloads: NonNegative = 0
    reserving_workloads: NonNegative = 0
    admitted_workloads: NonNegative = 0
    fair_sharing: FairSharingStatus | None = None


class ClusterQueue(KueueStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: ClusterQueueSpec = ClusterQueueSpec()
    status: ClusterQueueStatus = ClusterQueueStatus()


# --- LocalQueue ---


class LocalQueueSpec(KueueStruct, frozen=True, kw_only=True):
    cluster_queue: str = ""
    stop_policy: StopPolicy = "None"
    fair_sharing: FairSharing | None = None


class LocalQueueResourceUsage(KueueStruct, frozen=True, kw_only=True):
    name: str
    total: Quantity = "0"


class LocalQueueFlavorUsage(KueueStruct, frozen=True, kw_only=True):
    name: str
    resources: tuple[LocalQueueResourceUsage, ...] = ()


class LocalQueueAdmissionFairSharingStatus(KueueStruct, frozen=True, kw_only=True):
    consumed_resources: ResourceList = {}
    last_update: str | None = None


class LocalQueueFairSharingStatus(KueueStruct, frozen=True, kw_only=True):
    weighted_share: int = 0
    admission_fair_sharing_status: LocalQueueAdmissionFairSharingStatus | None = None


class LocalQueueStatus(KueueStruct, frozen=True, kw_only=True, omit_defaults=False):
    conditions: tuple[Condition, ...] = ()
    pending_workloads: NonNegative = 0
    reserving_workloads: NonNegative = 0
    admitted_workloads: NonNegative = 0
    flavors_reservation: tuple[LocalQueueFlavorUsage, ...] = ()
    flavors_usage: tuple[LocalQueueFlavorUsage, ...] = ()
    fair_sharing: LocalQueueFairSharingStatus | None = None


class LocalQueue(KueueStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: LocalQueueSpec = LocalQueueSpec()
    status: LocalQueueStatus = LocalQueueStatus()


# --- Cohort ---


class CohortSpec(KueueStruct, frozen=True, kw_only=True):
    parent_name: str = ""
    resource_groups: Annotated[tuple[ResourceGroup, ...], msgspec.Meta(max_length=16)] = ()
    fair_sharing: FairSharing | None = None


class CohortStatus(KueueStruct, frozen=True, kw_only=True):
    fair_sharing: FairSharingStatus | None = None


class Cohort(KueueStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: CohortSpec = CohortSpec()
    status: CohortStatus = CohortStatus()


# --- Topology ---


class TopologyLevel(KueueStruct, frozen=True, kw_only=True):
    node_label: Annotated[str, msgspec.Meta(min_length=1, max_length=316)]


class TopologySpec(KueueStruct, frozen=True, kw_only=True):
    levels: Annotated[tuple[TopologyLevel, ...], msgspec.Meta(min_length=1, max_length=16)]


class Topology(KueueStruct, frozen=True, kw_only=True):
    spec: TopologySpec
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()


# --- AdmissionCheck ---


class AdmissionCheckParametersReference(KueueStruct, frozen=True, kw_only=True):
    api_group: str
    kind: str
    name: str


class AdmissionCheckSpec(KueueStruct, frozen=True, kw_only=True):
    controller_name: Annotated[str, msgspec.Meta(min_length=1, max_length=253)]
    parameters: AdmissionCheckParametersReference | None = None


class AdmissionCheckStatus(KueueStruct, frozen=True, kw_only=True):
    conditions: tuple[Condition, ...] = ()


class AdmissionCheck(KueueStruct, frozen=True, kw_only=True):
    spec: AdmissionCheckSpec
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    status: AdmissionCheckStatus = AdmissionCheckStatus()


# --- MultiKueue ---


class KubeConfig(KueueStruct, frozen=True, kw_only=True):
    location: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    location_type: Literal["Secret", "Path"] = "Secret"


class ClusterProfileReference(KueueStruct, frozen=True, kw_only=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class ClusterSource(KueueStruct, frozen=True, kw_only=True):
    kube_config: KubeConfig | None = None
    cluster_profile_ref: ClusterProfileReference | None = None


class MultiKueueClusterSpec(KueueStruct, frozen=True, kw_only=True):
    cluster_source: ClusterSource = ClusterSource()


class MultiKueueClusterStatus(KueueStruct, frozen=True, kw_only=True):
    conditions: tuple[Condition, ...] = ()


class MultiKueueCluster(KueueStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: MultiKueueClusterSpec = MultiKueueClusterSpec()
    status: MultiKueueClusterStatus = MultiKueueClusterStatus()


class MultiKueueConfigSpec(KueueStruct, frozen=True, kw_only=True):
    clusters: Annotated[tuple[str, ...], msgspec.Meta(min_length=1, max_length=20)]
    quota_management: Literal["Manual", "Automated"] | None = None


class MultiKueueConfig(KueueStruct, frozen=True, kw_only=True):
    spec: MultiKueueConfigSpec
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()


# --- WorkloadPriorityClass ---


class WorkloadPriorityClass(KueueStruct, frozen=True, kw_only=True):
    value: int
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    description: Annotated[str, msgspec.Meta(max_length=2048)] = ""
