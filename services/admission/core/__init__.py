"""The admission scheduler's pure core: Kueue's scheduling semantics as a deterministic library.

    state = SchedulerState(SchedulerConfig(...))     # from_api.scheduler_config(kueue_config)
    state.apply(from_api.event_from_api(obj))         # or Deleted(kind=..., namespace=..., name=...)
    while state.has_work(now):
        publish(state.schedule(now))                  # CycleResult: decisions + changed queue statuses
    state.next_wakeup()                               # when a backoff ends, to schedule a timer

Admissions are assumed inside schedule(); the echo of the Workload confirms them, `forget(key)`
rolls one back, `forget_eviction(key)` lets a refused eviction be issued again. Quantities are ints
in milli-units; `now` is float seconds (Unix time when objects come through from_api).
"""

from .decisions import (
    AdmissionDecision,
    ChecksReadyDecision,
    ClusterQueueStatus,
    CycleResult,
    DeactivationDecision,
    EvictionDecision,
    FlavorUsage,
    LocalQueueStatus,
    PendingDecision,
    PreemptionDecision,
    ResourceUsage,
)
from .model import (
    Admission,
    AdmissionCheck,
    AdmissionCheckRule,
    AdmissionCheckState,
    BorrowWithinCohort,
    ClusterQueue,
    Cohort,
    Deleted,
    Event,
    FairSharingConfig,
    FlavorFungibility,
    FlavorQuotas,
    LabelSelector,
    LabelSelectorRequirement,
    LocalQueue,
    Namespace,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSet,
    PodSetAssignment,
    Preemption,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    SchedulerConfig,
    Taint,
    Toleration,
    Workload,
    WorkloadPriorityClass,
)
from .state import SchedulerState
from .validation import InvalidEvent

__all__ = [
    "Admission",
    "AdmissionCheck",
    "AdmissionCheckRule",
    "AdmissionCheckState",
    "AdmissionDecision",
    "BorrowWithinCohort",
    "ChecksReadyDecision",
    "ClusterQueue",
    "ClusterQueueStatus",
    "Cohort",
    "CycleResult",
    "DeactivationDecision",
    "Deleted",
    "EvictionDecision",
    "Event",
    "FairSharingConfig",
    "FlavorFungibility",
    "FlavorQuotas",
    "FlavorUsage",
    "InvalidEvent",
    "LabelSelector",
    "LabelSelectorRequirement",
    "LocalQueue",
    "LocalQueueStatus",
    "Namespace",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PendingDecision",
    "PodSet",
    "PodSetAssignment",
    "Preemption",
    "PreemptionDecision",
    "ResourceFlavor",
    "ResourceGroup",
    "ResourceQuota",
    "ResourceUsage",
    "SchedulerConfig",
    "SchedulerState",
    "Taint",
    "Toleration",
    "Workload",
    "WorkloadPriorityClass",
]
