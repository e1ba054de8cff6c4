"""Names Kueue gives to labels, annotations, condition types and reasons (v1beta2 and its controllers)."""

from __future__ import annotations

from typing import Final

KUEUE_GROUP: Final = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
KUEUE_API_VERSION = f"{KUEUE_GROUP}/{KUEUE_VERSION}"

# Labels and annotations (pkg/controller/constants, apis/kueue/v1beta2).
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
MAX_EXEC_TIME_SECONDS_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
JOB_MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
MULTIKUEUE_ORIGIN_UID_ANNOTATION = "kueue.x-k8s.io/multikueue-origin-uid"
PODSET_REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PODSET_PREFERRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-unconstrained-topology"
PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-slice-required-topology"
PODSET_SLICE_SIZE_ANNOTATION = "kueue.x-k8s.io/podset-slice-size"
POD_INDEX_OFFSET_ANNOTATION = "kueue.x-k8s.io/pod-index-offset"
TOPOLOGY_SCHEDULING_GATE = "kueue.x-k8s.io/topology"
ELASTIC_JOB_SCHEDULING_GATE = "kueue.x-k8s.io/elastic-job"
RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
DEFAULT_POD_SET_NAME = "main"
DEFAULT_LOCAL_QUEUE_NAME = "default"
DEFAULT_WORKLOAD_PRIORITY_CLASS_NAME = "default"

# MultiKueue.
MULTIKUEUE_CONTROLLER_NAME = "kueue.x-k8s.io/multikueue"
MULTIKUEUE_MANAGED_BY = "kueue.x-k8s.io/multikueue"  # Job/JobSet spec.managedBy on the manager
MULTIKUEUE_CONFIG_SECRET_KEY = "kubeconfig"
MULTIKUEUE_PREEMPTION_GATE = "kueue.x-k8s.io/multikueue"
# The kinds (lower-case tokens) MultiKueue copies to a worker, as Kueue's adapters do; Jobs and
# JobSets always, the others while their integration is enabled (multikueue_job_kinds).
MULTIKUEUE_JOB_KINDS = ("job", "jobset", "pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob", "mpijob",
                        "rayjob", "raycluster", "trainjob", "appwrapper")


def multikueue_job_kinds(frameworks: frozenset[str]) -> tuple[str, ...]:
    """MULTIKUEUE_JOB_KINDS of the enabled integrations (a framework's name ends with its kind:
    "kubeflow.org/pytorchjob"); Jobs and JobSets always."""
    enabled = {name.rpartition("/")[2] for name in frameworks}
    return tuple(t for t in MULTIKUEUE_JOB_KINDS if t in ("job", "jobset") or t in enabled)

# Workload condition types.
WORKLOAD_QUOTA_RESERVED = "QuotaReserved"
WORKLOAD_ADMITTED = "Admitted"
WORKLOAD_FINISHED = "Finished"
WORKLOAD_PODS_READY = "PodsReady"
WORKLOAD_EVICTED = "Evicted"
WORKLOAD_PREEMPTED = "Preempted"
WORKLOAD_REQUEUED = "Requeued"
WORKLOAD_DEACTIVATION_TARGET = "DeactivationTarget"
WORKLOAD_WAITING_FOR_REPLACEMENT_PODS = "WaitingForReplacementPods"
WORKLOAD_BLOCKED_ON_PREEMPTION_GATES = "BlockedOnPreemptionGates"

# QuotaReserved / Admitted reasons.
REASON_NO_MATCHING_FLAVOR = "NoMatchingFlavor"
REASON_WAITING_FOR_QUOTA = "WaitingForQuota"
REASON_EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
REASON_TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"
REASON_WAITING_FOR_PREEMPTED_WORKLOADS = "WaitingForPreemptedWorkloads"
REASON_MISCONFIGURED = "Misconfigured"
REASON_SUSPENDED = "Suspended"
REASON_PENDING_EVALUATION = "PendingEvaluation"
REASON_WAITING_FOR_PODS_READY = "WaitingForPodsReady"
REASON_NO_RESERVATION = "NoReservation"
REASON_UNSATISFIED_ADMISSION_CHECKS = "UnsatisfiedAdmissionChecks"
REASON_PENDING_DELAYED_TOPOLOGY_REQUESTS = "PendingDelayedTopologyRequests"
REASON_QUOTA_RESERVED = "QuotaReserved"
REASON_ADMITTED = "Admitted"

# Preemption reasons (the Preempted condition).
PREEMPTION_IN_CLUSTER_QUEUE = "InClusterQueue"
PREEMPTION_IN_COHORT_RECLAMATION = "InCohortReclamation"
PREEMPTION_IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
PREEMPTION_IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

# Pending / eviction / requeue reasons.
REASON_INADMISSIBLE = "Inadmissible"
REASON_ON_HOLD = "OnHold"
REASON_PENDING = "Pending"
REASON_WAITING = "Waiting"
REASON_ADMISSION_GATED = "AdmissionGated"
EVICTED_BY_PREEMPTION = "Preempted"
EVICTED_BY_FLAVOR_MIGRATION = "FlavorMigration"
EVICTED_BY_PODS_READY_TIMEOUT = "PodsReadyTimeout"
EVICTED_BY_ADMISSION_CHECK = "AdmissionCheck"
EVICTED_BY_CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
EVICTED_BY_LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
EVICTED_DUE_TO_NODE_FAILURES = "NodeFailures"
EVICTED_ON_MANAGER_CLUSTER = "EvictedOnManagerCluster"
EVICTED_BY_DEACTIVATION = "Deactivated"
REASON_DEACTIVATED = "Deactivated"
REASON_REACTIVATED = "Reactivated"
REASON_BACKOFF_FINISHED = "BackoffFinished"
REASON_CLUSTER_QUEUE_RESTARTED = "ClusterQueueRestarted"
REASON_LOCAL_QUEUE_RESTARTED = "LocalQueueRestarted"
REASON_REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
REASON_MAXIMUM_EXECUTION_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"
REASON_WAIT_FOR_START = "WaitForStart"
REASON_WAIT_FOR_RECOVERY = "WaitForRecovery"
REASON_STARTED = "Started"
REASON_RECOVERED = "Recovered"

# Finished reasons.
FINISHED_SUCCEEDED = "Succeeded"
FINISHED_FAILED = "Failed"
FINISHED_OUT_OF_SYNC = "OutOfSync"
FINISHED_OWNER_NOT_FOUND = "OwnerNotFound"

# ClusterQueue / LocalQueue / AdmissionCheck / MultiKueueCluster condition types and reasons.
ACTIVE = "Active"
CQ_REASON_TERMINATING = "Terminating"
CQ_REASON_STOPPED = "Stopped"
CQ_REASON_FLAVOR_NOT_FOUND = "FlavorNotFound"
CQ_REASON_ADMISSION_CHECK_NOT_FOUND = "AdmissionCheckNotFound"
CQ_REASON_ADMISSION_CHECK_INACTIVE = "AdmissionCheckInactive"
CQ_REASON_MULTIPLE_MULTIKUEUE_ADMISSION_CHECKS = "MultipleMultiKueueAdmissionChecks"
CQ_REASON_MULTIKUEUE_ADMISSION_CHECK_APPLIED_PER_FLAVOR = "MultiKueueAdmissionCheckAppliedPerFlavor"
CQ_REASON_TOPOLOGY_NOT_FOUND = "TopologyNotFound"
CQ_REASON_UNKNOWN = "Unknown"
CQ_REASON_READY = "Ready"

# Admission check states.
CHECK_PENDING: Final = "Pending"
CHECK_READY: Final = "Ready"
CHECK_RETRY: Final = "Retry"
CHECK_REJECTED: Final = "Rejected"

# kq's own: the trace context a Workload carries (kq.obs: one trace per workload).
TRACEPARENT_ANNOTATION: Final = "kq.dev/traceparent"

__all__ = [name for name in dir() if name.isupper()]
