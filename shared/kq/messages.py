"""Typed bus messages: commands to the watcher, their outcomes, and decisions.

Every message is a frozen msgspec Struct in a tagged union, decoded with one
reused Decoder per union. Commands carry a deterministic `id` (used as the
JetStream Nats-Msg-Id) and the writer's lease `epoch`; the watcher refuses a
command whose epoch is older than the newest it has seen for that writer.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from kq import subjects
from kq.api.core import JobSetStatus, JobStatus
from kq.api.events import ObjectReference
from kq.api.kueue import Admission, ClusterQueueStatus, LocalQueueStatus
from kq.api.meta import Condition
from kq.api.workload import RequeueState


class _Command(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    id: str  # deterministic: derived from the decision, so retries are deduplicated
    cluster: str
    writer: str  # the service that decided, e.g. "admission"
    epoch: int = 0  # the writer's lease epoch; 0 means an unfenced writer


class EventNote(msgspec.Struct, frozen=True, kw_only=True):
    """A Kubernetes Event on the command's workload, recorded by the watcher once the command's
    write is done (as Kueue records an event after its status update): one message instead of a
    RecordEvent command and its outcome. Aggregated and rate-limited like RecordEvent."""

    event_type: Literal["Normal", "Warning"]
    reason: str
    message: str
    at: str  # RFC 3339, the decision's time


class _WorkloadCommand(_Command, frozen=True, kw_only=True):
    namespace: str
    name: str
    uid: str  # the command applies to this incarnation only
    events: tuple[EventNote, ...] = ()  # recorded on the workload when the command wrote something


class AdmitWorkload(_WorkloadCommand, frozen=True, kw_only=True, tag="AdmitWorkload"):
    """Reserve quota (status.admission + QuotaReserved); Admitted too when no admission check is pending."""

    admission: Admission
    admitted: bool = True
    message: str = ""
    # Admission checks the workload must pass (status.admissionChecks, each starting Pending), as
    # the ClusterQueue's admissionChecksStrategy selects them for the assigned flavors.
    admission_checks: tuple[str, ...] = ()
    # TAS node failure: the workload already holds this quota; only its pod sets' topology
    # assignments change (the failed node replaced) and status.unhealthyNodes is cleared.
    replace_topology: bool = False


class EvictWorkload(_WorkloadCommand, frozen=True, kw_only=True, tag="EvictWorkload"):
    """Evict: Evicted condition (and Preempted when preempted), stop the job, release the quota."""

    reason: str  # Kueue eviction reason: Preempted, PodsReadyTimeout, AdmissionCheck, ...
    message: str
    preemption_reason: str | None = None  # InClusterQueue, InCohortReclamation, ...
    preemptor: str | None = None  # ns/name of the workload that preempted it
    # PodsReadyTimeout: the requeue state Kueue writes with the eviction (count+1, requeueAt after the backoff),
    # and its underlying cause (WaitForStart, WaitForRecovery), counted in status.schedulingStats.
    requeue_state: RequeueState | None = None
    underlying_cause: str = ""


class SetWorkloadPending(_WorkloadCommand, frozen=True, kw_only=True, tag="SetWorkloadPending"):
    """Record why a workload is pending (QuotaReserved=False with a reason and message)."""

    reason: str
    message: str


class DeactivateWorkload(_WorkloadCommand, frozen=True, kw_only=True, tag="DeactivateWorkload"):
    """spec.active=false with an Evicted(Deactivated) condition."""

    reason: str
    message: str


class FinishRequeueBackoff(_WorkloadCommand, frozen=True, kw_only=True, tag="FinishRequeueBackoff"):
    """The backoff after a PodsReadyTimeout eviction is over: requeueState.requeueAt cleared and
    Requeued=True (BackoffFinished), so admission queues the workload again."""

    requeue_at: str  # the requeueAt the decision was made on (RFC 3339); a different one is not ours to clear


class SetClusterQueueStatus(_Command, frozen=True, kw_only=True, tag="SetClusterQueueStatus"):
    name: str
    status: ClusterQueueStatus


class SetLocalQueueStatus(_Command, frozen=True, kw_only=True, tag="SetLocalQueueStatus"):
    namespace: str
    name: str
    status: LocalQueueStatus


class RecordEvent(_Command, frozen=True, kw_only=True, tag="RecordEvent"):
    """Record a core/v1 Event on an object, as Kueue's recorder.Eventf does. The watcher aggregates
    repeats (count, lastTimestamp) and rate-limits per object; `at` is the decision's time."""

    involved: ObjectReference  # kind, apiVersion, namespace ("" when cluster-scoped), name, uid
    event_type: Literal["Normal", "Warning"]
    reason: str
    action: str = ""
    message: str
    at: str  # RFC 3339


# MultiKueue (written by the dispatcher on the manager cluster).


class SetAdmissionCheckState(_WorkloadCommand, frozen=True, kw_only=True, tag="SetAdmissionCheckState"):
    """One entry of status.admissionChecks. With cluster_name (state Ready): status.clusterName is
    set (immutable once set: a different one is refused) and nominatedClusterNames cleared."""

    check: str
    state: Literal["Pending", "Ready", "Retry", "Rejected"]
    message: str
    cluster_name: str | None = None
    # Pod sets whose delayed topology request (TAS left to the worker) the winner's copy has placed:
    # their delayedTopologyRequest goes Pending -> Ready in the same write (Kueue's MultiKueue controller).
    topology_ready: tuple[str, ...] = ()


class SetNominatedClusters(_WorkloadCommand, frozen=True, kw_only=True, tag="SetNominatedClusters"):
    """status.nominatedClusterNames (refused once status.clusterName is set)."""

    clusters: tuple[str, ...]


class FinishWorkload(_WorkloadCommand, frozen=True, kw_only=True, tag="FinishWorkload"):
    """Finished=True with the reason and message the worker's copy finished with."""

    reason: str
    message: str


class DeleteWorkload(_WorkloadCommand, frozen=True, kw_only=True, tag="DeleteWorkload"):
    """Delete a finished or deactivated Workload (gc's objectRetentionPolicies), preconditioned on its uid."""

    reason: str  # AfterFinished | AfterDeactivatedByKueue


class SyncJobStatus(_Command, frozen=True, kw_only=True, tag="SyncJobStatus"):
    """Copy a worker Job's status onto the manager's Job (managed by MultiKueue, so nobody else writes it)."""

    namespace: str
    name: str
    uid: str
    status: JobStatus


class SyncJobSetStatus(_Command, frozen=True, kw_only=True, tag="SyncJobSetStatus"):
    """Copy a worker JobSet's status onto the manager's JobSet (managed by MultiKueue)."""

    namespace: str
    name: str
    uid: str
    status: JobSetStatus


# The framework kinds MultiKueue runs on a worker besides Jobs and JobSets (their kind tokens).
FrameworkKind = Literal["pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob", "mpijob", "rayjob", "raycluster",
                        "trainjob", "appwrapper"]


class SyncObjectStatus(_Command, frozen=True, kw_only=True, tag="SyncObjectStatus"):
    """Copy a worker object's status onto the manager's object of the same kind (managed by MultiKueue).
    `status` is the kind's status as kq.api types it (msgspec.to_builtins of it); the watcher decodes
    it into that type, so fields kq does not model are neither sent nor overwritten."""

    kind: FrameworkKind
    namespace: str
    name: str
    uid: str
    status: dict[str, Any]


class SetActiveCondition(_Command, frozen=True, kw_only=True, tag="SetActiveCondition"):
    """The Active condition of an AdmissionCheck or MultiKueueCluster (cluster-scoped)."""

    kind: Literal["admissioncheck", "multikueuecluster"]
    name: str
    condition: Condition


class Fence(_Command, frozen=True, kw_only=True, tag="Fence"):
    """A new lease holder's first command: from here on older epochs are refused."""


Command = (
    AdmitWorkload
    | EvictWorkload
    | SetWorkloadPending
    | DeactivateWorkload
    | FinishRequeueBackoff
    | SetClusterQueueStatus
    | SetLocalQueueStatus
    | SetAdmissionCheckState
    | SetNominatedClusters
    | FinishWorkload
    | DeleteWorkload
    | SyncJobStatus
    | SyncJobSetStatus
    | SyncObjectStatus
    | SetActiveCondition
    | RecordEvent
    | Fence
)

CommandKind = Literal[
    "workload", "clusterqueue", "localqueue", "event", "fence", "job", "admissioncheck", "multikueuecluster",
    "jobset", FrameworkKind,
]

COMMAND_KIND: dict[type, CommandKind] = {
    AdmitWorkload: "workload",
    EvictWorkload: "workload",
    SetWorkloadPending: "workload",
    DeactivateWorkload: "workload",
    FinishRequeueBackoff: "workload",
    SetClusterQueueStatus: "clusterqueue",
    SetLocalQueueStatus: "localqueue",
    SetAdmissionCheckState: "workload",
    SetNominatedClusters: "workload",
    FinishWorkload: "workload",
    DeleteWorkload: "workload",
    SyncJobStatus: "job",
    SyncJobSetStatus: "jobset",
    RecordEvent: "event",
    Fence: "fence",
}


# --- typed command outcomes (issue 7): what a command was and why it was refused ---------------
# Shared by the watcher (which writes outcomes) and every writer (which reads them): a reader
# learns what an outcome is about from these fields, never by parsing the command id.

CommandType = Literal[
    "AdmitWorkload",
    "EvictWorkload",
    "SetWorkloadPending",
    "DeactivateWorkload",
    "FinishRequeueBackoff",
    "SetClusterQueueStatus",
    "SetLocalQueueStatus",
    "SetAdmissionCheckState",
    "SetNominatedClusters",
    "FinishWorkload",
    "DeleteWorkload",
    "SyncJobStatus",
    "SyncJobSetStatus",
    "SyncObjectStatus",
    "SetActiveCondition",
    "RecordEvent",
    "Fence",
]
def event_notes(cmd: Command) -> tuple[str, tuple[EventNote, ...]]:
    """(the workload's uid, the events riding on the command); only workload commands carry any."""
    return (cmd.uid, cmd.events) if isinstance(cmd, _WorkloadCommand) else ("", ())


WORKLOAD_COMMANDS: frozenset[CommandType] = frozenset(
    {
        "AdmitWorkload", "EvictWorkload", "SetWorkloadPending", "DeactivateWorkload", "FinishRequeueBackoff",
        "SetAdmissionCheckState", "SetNominatedClusters", "FinishWorkload", "DeleteWorkload",
    }
)

COMMAND_TYPE: dict[type, CommandType] = {
    AdmitWorkload: "AdmitWorkload",
    EvictWorkload: "EvictWorkload",
    SetWorkloadPending: "SetWorkloadPending",
    DeactivateWorkload: "DeactivateWorkload",
    FinishRequeueBackoff: "FinishRequeueBackoff",
    SetClusterQueueStatus: "SetClusterQueueStatus",
    SetLocalQueueStatus: "SetLocalQueueStatus",
    SetAdmissionCheckState: "SetAdmissionCheckState",
    SetNominatedClusters: "SetNominatedClusters",
    FinishWorkload: "FinishWorkload",
    DeleteWorkload: "DeleteWorkload",
    SyncJobStatus: "SyncJobStatus",
    SyncJobSetStatus: "SyncJobSetStatus",
    SyncObjectStatus: "SyncObjectStatus",
    SetActiveCondition: "SetActiveCondition",
    RecordEvent: "RecordEvent",
    Fence: "Fence",
}

# Applied (nothing else to write, the object already says it), then refused.
AppliedReason = Literal[
    "", "AlreadyApplied", "AlreadyEvicted", "Unchanged", "Fenced", "NotWaiting", "Deleted", "AlreadyFinished",
    "Superseded",  # a queue's status command not written: a newer one of its writer replaces the whole status
]
RefusalReason = Literal[
    "StaleEpoch",  # an older epoch of the writer: a newer leader has written
    "NotFound",
    "WrongKind",
    "UidMismatch",  # decided on another incarnation of the object
    "Deleting",
    "Finished",
    "Inactive",
    "AlreadyAdmitted",  # quota already reserved with another admission
    "NotAdmitted",
    "QuotaReserved",
    "EvictionInProgress",  # still holds the quota it is being evicted from
    "Rejected",  # the API server refused the write (400)
    "Forbidden",  # the API server refused the write (403)
    "RateLimited",  # RecordEvent: the object had too many events lately (client-go's spam filter)
    "NotInBackoff",  # the requeue backoff the decision saw is not the workload's any more
    "BackoffNotOver",
    "NotFinished",  # MultiKueue: a remote copy to finish is not finished
    "NoSuchAdmissionCheck",
    "ClusterNameImmutable",
    "NoQuotaReservation",
]
OutcomeReason: TypeAlias = AppliedReason | RefusalReason


class CommandOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What the watcher did with a command, published to the writer's outcome subject."""

    command_id: str
    cluster: str
    writer: str
    epoch: int
    applied: bool
    reason: OutcomeReason = ""
    resource_version: str = ""  # of the object after the write (or the newest seen when refused)
    command: CommandType | None = None  # the command's type, namespace and name: what it was about
    namespace: str = ""
    name: str = ""


def outcome_of(
    cmd: Command, *, cluster: str, applied: bool, reason: OutcomeReason, resource_version: str = ""
) -> CommandOutcome:
    """The outcome of `cmd`, carrying what the command was about."""
    return CommandOutcome(command_id=cmd.id, cluster=cluster, writer=cmd.writer, epoch=cmd.epoch, applied=applied,
                          reason=reason, resource_version=resource_version, command=COMMAND_TYPE[type(cmd)],
                          namespace=getattr(cmd, "namespace", ""), name=getattr(cmd, "name", ""))


# --- end of typed command outcomes ------------------------------------------------------------


# Decisions: what a service decided and why (KQ_EVENTS). `kq describe` shows them.


class _Decision(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    id: str
    cluster: str
    namespace: str
    name: str
    at: str  # RFC 3339 time of the decision (the core's `now`)
    message: str


class WorkloadAdmittedEvent(_Decision, frozen=True, kw_only=True, tag="Admitted"):
    cluster_queue: str
    flavors: dict[str, dict[str, str]]  # podset -> resource -> flavor
    borrowing: bool = False


class WorkloadPendingEvent(_Decision, frozen=True, kw_only=True, tag="Pending"):
    reason: str


class WorkloadPreemptedEvent(_Decision, frozen=True, kw_only=True, tag="Preempted"):
    preemptor: str
    reason: str  # InClusterQueue, InCohortReclamation, InCohortFairSharing, InCohortReclaimWhileBorrowing


class WorkloadEvictedEvent(_Decision, frozen=True, kw_only=True, tag="Evicted"):
    reason: str


Decision = WorkloadAdmittedEvent | WorkloadPendingEvent | WorkloadPreemptedEvent | WorkloadEvictedEvent

# One reused decoder/encoder per union.
command_decoder = msgspec.json.Decoder(Command)
outcome_decoder = msgspec.json.Decoder(CommandOutcome)
decision_decoder = msgspec.json.Decoder(Decision)
encoder = msgspec.json.Encoder()


def command_kind(cmd: Command) -> CommandKind:
    if isinstance(cmd, (SetActiveCondition, SyncObjectStatus)):
        return cmd.kind
    return COMMAND_KIND[type(cmd)]


def command_subject_of(cmd: Command) -> str:
    """Where a writer sends `cmd`: its cluster, kind and the writer's own name (kq.bus_users)."""
    return subjects.command_subject(cmd.cluster, command_kind(cmd), cmd.writer)


def command_msg_id(cmd: Command) -> str:
    """The JetStream message id of `cmd`: deterministic within one term, new with each epoch.

    Without the epoch, a decision refused as StaleEpoch (sent by a term that had just lost its
    lease) and the same decision sent again by the next term share an id: the stream's duplicate
    window drops the second as a repeat, so it is never carried out (kq chaos found a workload
    finished on its worker that the manager never finished)."""
    return f"{cmd.writer}|e{cmd.epoch}|{cmd.cluster}|{cmd.id}"


class TimerMessage(msgspec.Struct, frozen=True, kw_only=True):
    """The body of a service's durable timer (KQ_TIMERS): when it was set for (RFC 3339 with
    milliseconds) and what for, so the firing needs no parsing of subjects."""

    service: str
    at: str
    purpose: str


timer_decoder = msgspec.json.Decoder(TimerMessage)
# MultiKueue's bus door for external dispatchers (stream KQ_MK). The dispatcher publishes each
# quota-reserved workload that starts waiting for a nomination on subjects.mk_pending_subject(ns,
# name), once per wait; anyone may answer on subjects.mk_nominate_subject(ns, name) with an
# MkNomination; the end of the wait goes out on subjects.mk_settled_subject(ns, name).


class MkPodSet(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str
    count: int
    requests: dict[str, str]  # resource -> quantity, per pod


class MkPendingWorkload(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    namespace: str
    name: str
    uid: str
    cluster_queue: str
    admission_check: str
    clusters: tuple[str, ...]  # the worker clusters connected now, in the MultiKueueConfig
    pod_sets: tuple[MkPodSet, ...]
    priority: int | None = None


class MkNomination(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    clusters: tuple[str, ...]
    uid: str = ""  # when given, applies only to this incarnation of the workload


mk_nomination_decoder = msgspec.json.Decoder(MkNomination)


class MkSettledWorkload(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A published wait is over: admitted on `cluster`, or ("") the workload no longer holds quota
    (evicted, finished, deleted). An external dispatcher that widens on a timer stops here."""

    namespace: str
    name: str
    uid: str
    cluster: str = ""


# --- schema version -----------------------------------------------------------------------------
# Every message published through kq.runtime.bus carries `Kq-Schema: <SCHEMA_VERSION>`. Within one
# version changes are additive only: a field added to a message has a default, no field is removed
# or retyped, and readers ignore fields they do not know (msgspec's default). So during a rolling
# upgrade a newer service reads an older one's messages, and an older one a newer one's.
# tests/unit/test_message_schema.py pins each message's required fields; a change that breaks
# older messages must bump the version.
SCHEMA_VERSION = 1
SCHEMA_HEADER = "Kq-Schema"
