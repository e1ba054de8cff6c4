"""Domain records the admission core consumes: the Kueue API reduced to what scheduling needs.

Every record is a frozen msgspec Struct. Quantities are ints in milli-units (1 cpu = 1000,
1 byte of memory = 1000); resources and flavors are referred to by name. Times are float
seconds on whatever clock the caller uses (the core never reads a clock; `now` is passed in).
Apply them with `SchedulerState.apply(event)`; `Deleted` removes an object of any kind.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from kq.api.workload import PodSetTopologyRequest, TopologyAssignment

QueueingStrategy = Literal["StrictFIFO", "BestEffortFIFO"]
PreemptionPolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"]
BorrowPolicy = Literal["Never", "LowerPriority"]
FungibilityPolicy = Literal["MayStopSearch", "TryNextFlavor"]
FungibilityPreference = Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"]
StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
CheckStateName = Literal["Pending", "Ready", "Retry", "Rejected"]
RequeuingTimestamp = Literal["Eviction", "Creation"]
FairSharingStrategy = Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]


class _Rec(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """gc=False: records are immutable trees, never in a reference cycle, and the scheduler keeps
    every pending workload's: tracked, a full collection walked them all (1.75 s of the scheduler
    stopped on the loaded machine in the baseline, issue 12; kq.api.meta.K8sStruct likewise)."""


# --- selectors, taints ----------------------------------------------------------------------


class LabelSelectorRequirement(_Rec, frozen=True, kw_only=True):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()


class LabelSelector(_Rec, frozen=True, kw_only=True):
    """metav1.LabelSelector; an empty selector matches everything."""

    match_labels: dict[str, str] = {}
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


class NodeSelectorRequirement(_Rec, frozen=True, kw_only=True):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] = ()


class NodeSelectorTerm(_Rec, frozen=True, kw_only=True):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()


class Taint(_Rec, frozen=True, kw_only=True):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(_Rec, frozen=True, kw_only=True):
    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: str = ""  # "" tolerates every effect


# --- cluster-scoped configuration objects ---------------------------------------------------


class ResourceFlavor(_Rec, frozen=True, kw_only=True):
    name: str
    node_labels: dict[str, str] = {}
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None


class ResourceQuota(_Rec, frozen=True, kw_only=True):
    name: str  # the resource
    nominal: int
    borrowing_limit: int | None = None  # None: unlimited
    lending_limit: int | None = None  # None: unlimited


class FlavorQuotas(_Rec, frozen=True, kw_only=True):
    name: str
    resources: tuple[ResourceQuota, ...]


class ResourceGroup(_Rec, frozen=True, kw_only=True):
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


class BorrowWithinCohort(_Rec, frozen=True, kw_only=True):
    policy: BorrowPolicy = "Never"
    max_priority_threshold: int | None = None


class Preemption(_Rec, frozen=True, kw_only=True):
    within_cluster_queue: PreemptionPolicy = "Never"
    reclaim_within_cohort: PreemptionPolicy = "Never"
    borrow_within_cohort: BorrowWithinCohort | None = None


class FlavorFungibility(_Rec, frozen=True, kw_only=True):
    when_can_borrow: FungibilityPolicy = "MayStopSearch"
    when_can_preempt: FungibilityPolicy = "TryNextFlavor"
    preference: FungibilityPreference | None = None


class AdmissionCheckRule(_Rec, frozen=True, kw_only=True):
    """spec.admissionChecksStrategy.admissionChecks[]; no flavors means every flavor of the queue."""

    name: str
    on_flavors: tuple[str, ...] = ()


class ClusterQueue(_Rec, frozen=True, kw_only=True):
    name: str
    cohort: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    namespace_selector: LabelSelector | None = None  # None matches no namespace, as in Kueue
    preemption: Preemption = Preemption()
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    fair_weight: float = 1.0
    admission_checks: tuple[AdmissionCheckRule, ...] = ()
    stop_policy: StopPolicy = "None"


class Cohort(_Rec, frozen=True, kw_only=True):
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: float = 1.0


class LocalQueue(_Rec, frozen=True, kw_only=True):
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: StopPolicy = "None"


class Namespace(_Rec, frozen=True, kw_only=True):
    name: str
    labels: dict[str, str] = {}


class WorkloadPriorityClass(_Rec, frozen=True, kw_only=True):
    name: str
    value: int


class AdmissionCheck(_Rec, frozen=True, kw_only=True):
    name: str
    active: bool = True
    controller_name: str = ""  # spec.controllerName: MultiKueue's leaves topology to the worker


# --- workloads ------------------------------------------------------------------------------


class PodSet(_Rec, frozen=True, kw_only=True):
    name: str
    count: int
    min_count: int | None = None  # partial admission lower bound
    requests: dict[str, int] = {}  # per pod, milli-units
    node_selector: dict[str, str] = {}
    tolerations: tuple[Toleration, ...] = ()
    required_affinity: tuple[NodeSelectorTerm, ...] = ()  # ORed terms
    topology_request: PodSetTopologyRequest | None = None  # TAS: where the pods must / should go


class PodSetAssignment(_Rec, frozen=True, kw_only=True):
    name: str
    flavors: dict[str, str]  # resource -> flavor
    resource_usage: dict[str, int]  # resource -> milli-units for all `count` pods
    count: int
    topology_assignment: TopologyAssignment | None = None  # TAS: the solver's placement
    # TAS left to another cluster (MultiKueue: the worker places it): "Pending", as Kueue writes it
    delayed_topology_request: Literal["Pending", "Ready"] | None = None


class Admission(_Rec, frozen=True, kw_only=True):
    cluster_queue: str
    pod_sets: tuple[PodSetAssignment, ...]


class AdmissionCheckState(_Rec, frozen=True, kw_only=True):
    name: str
    state: CheckStateName = "Pending"
    message: str = ""


class Workload(_Rec, frozen=True, kw_only=True):
    """A Workload as last seen. `admission` is set only while quota is reserved (QuotaReserved=True)."""

    namespace: str
    name: str
    uid: str
    resource_version: str = ""
    queue_name: str
    priority: int | None = None  # spec.priority
    priority_class: str | None = None  # WorkloadPriorityClass name, used when priority is None
    creation_time: float
    pod_sets: tuple[PodSet, ...]
    active: bool = True
    job_uid: str = ""  # label kueue.x-k8s.io/job-uid, quoted in preemption messages
    admission: Admission | None = None
    quota_reserved_time: float | None = None  # QuotaReserved lastTransitionTime
    admitted: bool = False  # Admitted=True
    finished: bool = False
    evicted_reason: str | None = None  # Evicted=True with this reason
    evicted_time: float | None = None
    requeue_at: float | None = None  # status.requeueState.requeueAt: not before this time
    admission_checks: tuple[AdmissionCheckState, ...] = ()
    admitted_time: float | None = None  # Admitted=True lastTransitionTime
    max_execution_s: int | None = None  # spec.maximumExecutionTimeSeconds
    past_execution_s: int = 0  # status.accumulatedPastExecutionTimeSeconds: admitted time of earlier admissions
    pods_ready: bool = False  # PodsReady=True
    unhealthy_nodes: tuple[str, ...] = ()  # TAS: failed nodes its placement uses (status.unhealthyNodes)

    def execution_deadline(self) -> float | None:
        """When an admitted workload has run out of its maximum execution time (Kueue
        reconcileMaxExecutionTime): Admitted's transition time + the limit - earlier admissions."""
        if self.max_execution_s is None or self.admitted_time is None or not self.admitted:
            return None
        return self.admitted_time + self.max_execution_s - self.past_execution_s

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


Kind = Literal[
    "ResourceFlavor",
    "ClusterQueue",
    "Cohort",
    "LocalQueue",
    "Namespace",
    "WorkloadPriorityClass",
    "AdmissionCheck",
    "Workload",
    "Topology",
]


class Topology(_Rec, frozen=True, kw_only=True):
    """Only its existence matters here: a TAS flavor naming a missing one makes its queues inactive."""

    name: str


class PlacementAnswer(_Rec, frozen=True, kw_only=True):
    """The topology solver's answer to a PlacementRequest (see decisions.py)."""

    workload: str  # namespace/name
    uid: str
    request_id: str
    placed: bool
    topology: dict[str, TopologyAssignment] = {}  # pod set -> assignment
    victims: tuple[str, ...] = ()  # namespace/name: placed only once these are preempted
    reason: str = ""
    message: str = ""
    at: float = 0.0  # when it came (the caller's clock): an old placement is asked for again


class Deleted(_Rec, frozen=True, kw_only=True):
    kind: Kind
    name: str
    namespace: str = ""


Event = (
    ResourceFlavor
    | ClusterQueue
    | Cohort
    | LocalQueue
    | Namespace
    | WorkloadPriorityClass
    | AdmissionCheck
    | Workload
    | Topology
    | PlacementAnswer
    | Deleted
)


class FairSharingConfig(_Rec, frozen=True, kw_only=True):
    preemption_strategies: tuple[FairSharingStrategy, ...] = (
        "LessThanOrEqualToFinalShare",
        "LessThanInitialShare",
    )


class SchedulerConfig(_Rec, frozen=True, kw_only=True):
    """Kueue Configuration parts the scheduler reads. fair_sharing present means enabled."""

    fair_sharing: FairSharingConfig | None = None
    requeuing_timestamp: RequeuingTimestamp = "Eviction"
    # waitForPodsReady.enable and .blockAdmission: admit nothing while a workload holding quota
    # does not have PodsReady=True (Kueue cache.PodsReadyForAllAdmittedWorkloads).
    block_admission: bool = False
