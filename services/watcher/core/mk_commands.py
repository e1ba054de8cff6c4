"""Planning of the MultiKueue dispatcher's commands on the manager cluster (pure).

Kept apart from core.commands so the MultiKueue writes read as one piece: the admission
check state of a workload (with status.clusterName, immutable once set), its nominated
clusters, finishing it as its worker copy finished, the manager Job's status copied from
the worker, and the Active condition of AdmissionChecks and MultiKueueClusters.
Semantics follow Kueue's multikueue workload reconciler (workload.go).
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec.structs import replace

from kq.api import constants as k
from kq.api.core import Job, JobSet
from kq.api.kueue import AdmissionCheck, AdmissionCheckState, MultiKueueCluster, Workload
from kq.api.meta import finished_condition
from kq.api.registry import kind_info
from kq.messages import (
    DeleteWorkload,
    FinishWorkload,
    SetActiveCondition,
    SetAdmissionCheckState,
    SetNominatedClusters,
    SyncJobSetStatus,
    SyncJobStatus,
    SyncObjectStatus,
)
from services.watcher.core import workload_status as ws
from services.watcher.core.writes import Delete, Refusal, Skip, Write, patch_write

Plan = Write | Delete | Skip | Refusal
MkCommand = (SetAdmissionCheckState | SetNominatedClusters | FinishWorkload | DeleteWorkload | SyncJobStatus
             | SyncJobSetStatus | SyncObjectStatus | SetActiveCondition)
MK_COMMANDS = (SetAdmissionCheckState, SetNominatedClusters, FinishWorkload, DeleteWorkload, SyncJobStatus,
               SyncJobSetStatus, SyncObjectStatus, SetActiveCondition)

NOT_FOUND = "NotFound"
UID_MISMATCH = "UidMismatch"
WRONG_KIND = "WrongKind"
FINISHED = "Finished"
ALREADY_FINISHED = "AlreadyFinished"
NO_SUCH_CHECK = "NoSuchAdmissionCheck"
CLUSTER_NAME_IMMUTABLE = "ClusterNameImmutable"
NOT_RESERVED = "NoQuotaReservation"
BAD_STATUS = "Rejected"


def mk_target(cmd: MkCommand) -> tuple[str, str, str]:
    match cmd:
        case SetAdmissionCheckState() | SetNominatedClusters() | FinishWorkload() | DeleteWorkload():
            return "workload", cmd.namespace, cmd.name
        case SyncJobStatus():
            return "job", cmd.namespace, cmd.name
        case SyncJobSetStatus():
            return "jobset", cmd.namespace, cmd.name
        case SyncObjectStatus():
            return cmd.kind, cmd.namespace, cmd.name
        case SetActiveCondition():
            return cmd.kind, "", cmd.name
    raise TypeError(f"not a MultiKueue command: {type(cmd).__name__}")


def plan_mk(cmd: MkCommand, current: Any, now: str) -> Plan:
    if isinstance(cmd, DeleteWorkload):
        return _delete(cmd, current)
    if current is None:
        kind, ns, name = mk_target(cmd)
        return Refusal(reason=NOT_FOUND, message=f"{kind} {ns}/{name} not found")
    match cmd:
        case SyncJobStatus():
            if not isinstance(current, Job):
                return Refusal(reason=WRONG_KIND, message=f"expected a Job, got {type(current).__name__}")
            if current.metadata.uid != cmd.uid:
                return Refusal(reason=UID_MISMATCH,
                               message=f"command for uid {cmd.uid}, job has {current.metadata.uid}")
            status = cmd.status
            if current.spec.suspend and not finished_condition(status.conditions, "Complete")[0]:
                # Never a startTime onto a suspended Job: stopping an evicted one resets it, then restores
                # the template, which the API server allows only without it; the worker's startTime
                # written back in between (the dispatcher's view a moment old) got that refused, 422.
                status = replace(status, start_time=current.status.start_time)
            new_job = replace(current, status=status)
            return (patch_write("job", current, new_job, status=True, why="status from the worker")
                    or Skip(reason="Unchanged"))
        case SyncJobSetStatus():
            if not isinstance(current, JobSet):
                return Refusal(reason=WRONG_KIND, message=f"expected a JobSet, got {type(current).__name__}")
            if current.metadata.uid != cmd.uid:
                return Refusal(reason=UID_MISMATCH,
                               message=f"command for uid {cmd.uid}, jobset has {current.metadata.uid}")
            new_js = replace(current, status=cmd.status)
            return (patch_write("jobset", current, new_js, status=True, why="status from the worker")
                    or Skip(reason="Unchanged"))
        case SyncObjectStatus():
            return _sync_object_status(cmd, current)
        case SetActiveCondition():
            if not isinstance(current, (AdmissionCheck, MultiKueueCluster)):
                return Refusal(reason=WRONG_KIND, message=f"got {type(current).__name__}")
            conds = ws.set_condition(current.status.conditions, cmd.condition, now)
            new_obj = replace(current, status=replace(current.status, conditions=conds))
            return (patch_write(cmd.kind, current, new_obj, status=True, why="active condition")
                    or Skip(reason="Unchanged"))
    if not isinstance(current, Workload):
        return Refusal(reason=WRONG_KIND, message=f"expected a Workload, got {type(current).__name__}")
    if current.metadata.uid != cmd.uid:
        return Refusal(reason=UID_MISMATCH, message=f"command for uid {cmd.uid}, workload has {current.metadata.uid}")
    if ws.is_finished(current):
        # A Finish finds what it wants (also just after its own write, which the watcher plans again).
        if isinstance(cmd, FinishWorkload):
            return Skip(reason=ALREADY_FINISHED)
        if isinstance(cmd, SetAdmissionCheckState) and cmd.cluster_name and cmd.state == k.CHECK_READY:
            return _record_where_it_ran(cmd, current, now)
        return Refusal(reason=FINISHED, message="workload is finished")
    match cmd:
        case SetAdmissionCheckState():
            return _check_state(cmd, current, now)
        case SetNominatedClusters():
            if current.status.cluster_name:
                return Refusal(reason=CLUSTER_NAME_IMMUTABLE,
                               message=f"already running on {current.status.cluster_name}")
            if not ws.has_quota_reservation(current):
                return Refusal(reason=NOT_RESERVED, message="workload holds no quota")
            new = replace(current, status=replace(current.status, nominated_cluster_names=cmd.clusters))
            return (patch_write("workload", current, new, status=True, why="nominated clusters")
                    or Skip(reason="Unchanged"))
        case FinishWorkload():
            new = ws.finish(current, cmd.reason, cmd.message, now)
            return (patch_write("workload", current, new, status=True, why=f"finished on worker: {cmd.reason}")
                    or Skip(reason=ALREADY_FINISHED))
    raise TypeError(f"unknown command type {type(cmd).__name__}")


def _with_check(cmd: SetAdmissionCheckState, checks: tuple[AdmissionCheckState, ...],
                now: str) -> tuple[AdmissionCheckState, ...] | None:
    """`checks` with the command's entry in place of its check's (None: the workload has no such check)."""
    idx = next((i for i, c in enumerate(checks) if c.name == cmd.check), None)
    if idx is None:
        return None
    cur = checks[idx]
    ltt = cur.last_transition_time if cur.state == cmd.state and cur.last_transition_time else now
    entry = AdmissionCheckState(name=cmd.check, state=cmd.state, message=ws._truncate(cmd.message),
                                last_transition_time=ltt, pod_set_updates=cur.pod_set_updates)
    return (*checks[:idx], entry, *checks[idx + 1:])


def _check_state(cmd: SetAdmissionCheckState, wl: Workload, now: str) -> Plan:
    new_checks = _with_check(cmd, wl.status.admission_checks, now)
    if new_checks is None:
        return Refusal(reason=NO_SUCH_CHECK, message=f"workload has no admission check {cmd.check}")
    if not ws.has_quota_reservation(wl) or ws.is_evicted(wl):
        return Refusal(reason=NOT_RESERVED, message="workload holds no quota (or is being evicted)")
    status = wl.status
    fields: dict[str, Any] = {}
    if cmd.cluster_name is not None:
        if status.cluster_name and status.cluster_name != cmd.cluster_name:
            return Refusal(reason=CLUSTER_NAME_IMMUTABLE,
                           message=f"clusterName is {status.cluster_name}, not {cmd.cluster_name}")
        fields = {"cluster_name": cmd.cluster_name, "nominated_cluster_names": ()}
    new = replace(wl, status=replace(status, admission_checks=new_checks, **fields))
    if cmd.cluster_name is not None and cmd.state == k.CHECK_READY:
        new = ws.with_topology_ready(new, cmd.topology_ready)
    if (not ws.is_admitted(new) and all(c.state == k.CHECK_READY for c in new_checks)
            and not ws.topology_pending(new)):
        # Kueue's workload controller sets Admitted as soon as every check is Ready and no topology
        # waits (SyncAdmittedCondition): in the same write, the manager Workload is written once
        # instead of twice (the admission service sees the transition and records the Admitted
        # Event and metrics, services/admission/core/ledger.py).
        new = ws.set_admitted(new, now)
    return patch_write("workload", wl, new, status=True, why=f"admission check {cmd.check}: {cmd.state}") or Skip(
        reason="Unchanged"
    )


def _record_where_it_ran(cmd: SetAdmissionCheckState, wl: Workload, now: str) -> Plan:
    """The winner's check, Ready with status.clusterName, reaching a Workload that already finished.
    Under load the dispatcher's check waits in KQ_CMD while the job runs on its worker, its status
    comes back, and the manager's own integration finishes the Workload: refused, the Workload never
    said where it ran (57-71 % of them in 2,160-job runs on 20 workers). Kueue writes the check in the
    reconcile that creates the remote job, so there it is always first. Only the record is written:
    the check and clusterName, set once; nothing that admits (Admitted stays as it was)."""
    status = wl.status
    if status.cluster_name:
        if status.cluster_name != cmd.cluster_name:
            return Refusal(reason=CLUSTER_NAME_IMMUTABLE,
                           message=f"clusterName is {status.cluster_name}, not {cmd.cluster_name}")
        return Skip(reason=ALREADY_FINISHED)
    new_checks = _with_check(cmd, status.admission_checks, now)
    if new_checks is None:
        return Refusal(reason=NO_SUCH_CHECK, message=f"workload has no admission check {cmd.check}")
    new = replace(wl, status=replace(status, admission_checks=new_checks, cluster_name=cmd.cluster_name,
                                     nominated_cluster_names=()))
    return (patch_write("workload", wl, new, status=True, why=f"finished on {cmd.cluster_name}: where it ran")
            or Skip(reason=ALREADY_FINISHED))


def _delete(cmd: DeleteWorkload, wl: Any) -> Plan:
    """Retention: only a finished or deactivated Workload, only this incarnation; gone is done."""
    if wl is None:
        return Skip(reason="Deleted")
    if not isinstance(wl, Workload):
        return Refusal(reason=WRONG_KIND, message=f"expected a Workload, got {type(wl).__name__}")
    if wl.metadata.uid != cmd.uid:
        return Skip(reason="Deleted")  # a namesake: ours is gone
    if wl.metadata.deletion_timestamp is not None:
        return Skip(reason="Deleting")
    if not ws.is_finished(wl) and wl.spec.is_active:
        return Refusal(reason="NotFinished", message="workload is neither finished nor deactivated")
    return Delete(kind="workload", namespace=wl.metadata.namespace, name=wl.metadata.name, uid=wl.metadata.uid,
                  resource_version=wl.metadata.resource_version, why=f"retention: {cmd.reason}")


def _sync_object_status(cmd: SyncObjectStatus, current: Any) -> Plan:
    """A framework object's status from its worker copy, decoded into the kind's own status type."""
    want = kind_info(cmd.kind).type
    if not isinstance(current, want):
        return Refusal(reason=WRONG_KIND, message=f"expected a {want.__name__}, got {type(current).__name__}")
    if current.metadata.uid != cmd.uid:
        return Refusal(reason=UID_MISMATCH, message=f"command for uid {cmd.uid}, {cmd.kind} has {current.metadata.uid}")
    try:
        status = msgspec.convert(cmd.status, type(current.status))
    except msgspec.ValidationError as e:
        return Refusal(reason=BAD_STATUS, message=f"status: {e}")
    return (patch_write(cmd.kind, current, replace(current, status=status), status=True, why="status from the worker")
            or Skip(reason="Unchanged"))
