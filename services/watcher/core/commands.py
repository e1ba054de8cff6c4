"""What a command from the bus means for the object it names: plan_command.

Pure: (command, the object as last read, the writer's newest epoch, now) -> one
conditional Write, Skip (already as wanted: applied) or Refusal (why not). The
shell applies a Write and plans again on the answer until Skip or Refusal, so a
command that needs two writes (DeactivateWorkload: spec.active, then the
Evicted condition) converges the same way, and a 409 is just "plan again on a
fresh read". Semantics follow Kueue's scheduler and workload controller.
"""

from __future__ import annotations

from msgspec.structs import replace

from kq.api import constants as k
from kq.api.kueue import ClusterQueue, LocalQueue, Workload
from kq.api.meta import find_condition
from kq.messages import (
    AdmitWorkload,
    Command,
    DeactivateWorkload,
    EvictWorkload,
    Fence,
    FinishRequeueBackoff,
    RecordEvent,
    SetClusterQueueStatus,
    SetLocalQueueStatus,
    SetWorkloadPending,
)
from services.watcher.core import workload_status as ws
from services.watcher.core.mk_commands import MK_COMMANDS, mk_target, plan_mk
from services.watcher.core.writes import Delete, Refusal, Skip, Write, patch_write

Target = Workload | ClusterQueue | LocalQueue | None
Plan = Write | Delete | Skip | Refusal

# Refusal reasons (CommandOutcome.reason).
STALE_EPOCH = "StaleEpoch"
NOT_FOUND = "NotFound"
UID_MISMATCH = "UidMismatch"
DELETING = "Deleting"
FINISHED = "Finished"
INACTIVE = "Inactive"
ALREADY_ADMITTED = "AlreadyAdmitted"
NOT_ADMITTED = "NotAdmitted"
QUOTA_RESERVED = "QuotaReserved"
EVICTION_IN_PROGRESS = "EvictionInProgress"
WRONG_KIND = "WrongKind"
NOT_IN_BACKOFF = "NotInBackoff"
BACKOFF_NOT_OVER = "BackoffNotOver"


def target_ref(cmd: Command) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of the object a command is about; None for Fence."""
    match cmd:
        case AdmitWorkload() | EvictWorkload() | SetWorkloadPending() | DeactivateWorkload() | FinishRequeueBackoff():
            return "workload", cmd.namespace, cmd.name
        case SetClusterQueueStatus():
            return "clusterqueue", "", cmd.name
        case SetLocalQueueStatus():
            return "localqueue", cmd.namespace, cmd.name
        case RecordEvent():  # one object's events in order (services/watcher/events.py writes them)
            return "event", cmd.involved.namespace, f"{cmd.involved.kind}/{cmd.involved.name}"
        case Fence():
            return None
        case _ if isinstance(cmd, MK_COMMANDS):
            return mk_target(cmd)
    raise TypeError(f"unknown command type {type(cmd).__name__}")


def plan_command(cmd: Command, current: Target, max_epoch: int, now: str) -> Plan:
    if cmd.epoch < max_epoch:
        return Refusal(reason=STALE_EPOCH, message=f"writer {cmd.writer} epoch {cmd.epoch} < {max_epoch}")
    match cmd:
        case Fence():
            return Skip(reason="Fenced")
        case AdmitWorkload() | EvictWorkload() | SetWorkloadPending() | DeactivateWorkload() | FinishRequeueBackoff():
            wl = _workload(cmd, current)
            return wl if isinstance(wl, Refusal) else _plan_workload(cmd, wl, now)
        case SetClusterQueueStatus():
            if current is None:
                return Refusal(reason=NOT_FOUND, message=f"ClusterQueue {cmd.name} not found")
            if not isinstance(current, ClusterQueue):
                return Refusal(reason=WRONG_KIND, message=f"expected a ClusterQueue, got {type(current).__name__}")
            return _set_status("clusterqueue", current, replace(current, status=cmd.status))
        case SetLocalQueueStatus():
            if current is None:
                return Refusal(reason=NOT_FOUND, message=f"LocalQueue {cmd.namespace}/{cmd.name} not found")
            if not isinstance(current, LocalQueue):
                return Refusal(reason=WRONG_KIND, message=f"expected a LocalQueue, got {type(current).__name__}")
            return _set_status("localqueue", current, replace(current, status=cmd.status))
        case _ if isinstance(cmd, MK_COMMANDS):
            return plan_mk(cmd, current, now)
    raise TypeError(f"unknown command type {type(cmd).__name__}")


def _set_status(kind: str, old: ClusterQueue | LocalQueue, new: ClusterQueue | LocalQueue) -> Plan:
    return patch_write(kind, old, new, status=True, why="status from admission") or Skip(reason="Unchanged")


WorkloadCommand = AdmitWorkload | EvictWorkload | SetWorkloadPending | DeactivateWorkload | FinishRequeueBackoff


def _plan_workload(cmd: WorkloadCommand, wl: Workload, now: str) -> Plan:
    match cmd:
        case AdmitWorkload():
            return _admit(cmd, wl, now)
        case EvictWorkload():
            return _evict(cmd, wl, now)
        case SetWorkloadPending():
            return _pending(cmd, wl, now)
        case DeactivateWorkload():
            return _deactivate(cmd, wl, now)
        case FinishRequeueBackoff():
            return _finish_backoff(cmd, wl, now)


def _workload(cmd: WorkloadCommand, current: Target) -> Workload | Refusal:
    """`current` if it is the very Workload the command was decided on, else the refusal."""
    if current is None:
        return Refusal(reason=NOT_FOUND, message=f"Workload {cmd.namespace}/{cmd.name} not found")
    if not isinstance(current, Workload):
        return Refusal(reason=WRONG_KIND, message=f"expected a Workload, got {type(current).__name__}")
    if current.metadata.uid != cmd.uid:
        return Refusal(reason=UID_MISMATCH, message=f"command for uid {cmd.uid}, workload has {current.metadata.uid}")
    return current


def _status_write(wl: Workload, new: Workload, why: str, done: str) -> Plan:
    return patch_write("workload", wl, new, status=True, why=why) or Skip(reason=done)


def _admit(cmd: AdmitWorkload, wl: Workload, now: str) -> Plan:
    """Scheduler.admit: status.admission + QuotaReserved (+ Admitted once every check is ready)."""
    if wl.metadata.deletion_timestamp is not None:
        return Refusal(reason=DELETING, message="workload is being deleted")
    if ws.is_finished(wl):
        return Refusal(reason=FINISHED, message="workload is finished")
    if not wl.spec.is_active:
        return Refusal(reason=INACTIVE, message="workload is deactivated")
    if ws.is_evicted(wl) and ws.has_quota_reservation(wl):
        return Refusal(
            reason=EVICTION_IN_PROGRESS, message="the workload still holds the quota it is being evicted from"
        )
    if ws.has_quota_reservation(wl) or wl.status.admission is not None:
        if cmd.replace_topology and ws.same_quota(wl.status.admission, cmd.admission):
            if wl.status.admission == cmd.admission and not wl.status.unhealthy_nodes:
                return Skip(reason="AlreadyApplied")
            return _status_write(wl, ws.replace_topology(wl, cmd.admission), "replace a failed node", "AlreadyApplied")
        if wl.status.admission != cmd.admission:
            held = wl.status.admission.cluster_queue if wl.status.admission else "?"
            return Refusal(reason=ALREADY_ADMITTED, message=f"quota already reserved in ClusterQueue {held}")
        if cmd.admitted and not ws.is_admitted(wl):
            return _status_write(wl, ws.set_admitted(wl, now), "admission checks ready", "AlreadyApplied")
        return Skip(reason="AlreadyApplied")
    new = ws.set_quota_reservation(wl, cmd.admission, now, admitted=cmd.admitted, message=cmd.message,
                                   checks=cmd.admission_checks)
    return _status_write(wl, new, f"admit to ClusterQueue {cmd.admission.cluster_queue}", "AlreadyApplied")


def _evict(cmd: EvictWorkload, wl: Workload, now: str) -> Plan:
    """evict.Evict (+ Preempted when preempted). Releasing the quota waits for the job to stop."""
    if ws.is_finished(wl):
        return Refusal(reason=FINISHED, message="workload is finished")
    if ws.is_evicted(wl):
        return Skip(reason="AlreadyEvicted")
    if not ws.has_quota_reservation(wl):
        return Refusal(reason=NOT_ADMITTED, message="workload holds no quota")
    new = ws.evict(wl, cmd.reason, cmd.message, now, preemption_reason=cmd.preemption_reason,
                   underlying_cause=cmd.underlying_cause)
    if cmd.requeue_state is not None:
        new = replace(new, status=replace(new.status, requeue_state=cmd.requeue_state))
    return _status_write(wl, new, f"evict: {cmd.reason}", "AlreadyEvicted")


def _pending(cmd: SetWorkloadPending, wl: Workload, now: str) -> Plan:
    """QuotaReserved=False with why it waits; nothing written when it already says so."""
    if ws.is_finished(wl):
        return Refusal(reason=FINISHED, message="workload is finished")
    if ws.has_quota_reservation(wl):
        return Refusal(reason=QUOTA_RESERVED, message="workload holds quota")
    cur = find_condition(wl.status.conditions, k.WORKLOAD_QUOTA_RESERVED)
    if cur is not None and cur.status == "False" and cur.reason == cmd.reason and cur.message == cmd.message:
        return Skip(reason="Unchanged")
    return _status_write(wl, ws.set_pending(wl, cmd.reason, cmd.message, now), f"pending: {cmd.reason}", "Unchanged")


def _deactivate(cmd: DeactivateWorkload, wl: Workload, now: str) -> Plan:
    """spec.active=false, then (the workload controller's part) Evicted with the deactivation reason,
    requeue state and DeactivationTarget cleared."""
    if ws.is_finished(wl):
        return Refusal(reason=FINISHED, message="workload is finished")
    if wl.spec.is_active:
        new = replace(wl, spec=replace(wl.spec, active=False))
        return (
            patch_write("workload", wl, new, status=False, why=f"deactivate: {cmd.reason}")
            or Skip(reason="AlreadyApplied")
        )
    if ws.is_evicted(wl):
        return Skip(reason="AlreadyApplied")
    conds = tuple(c for c in wl.status.conditions if c.type != k.WORKLOAD_DEACTIVATION_TARGET)
    cleared = replace(wl, status=replace(wl.status, conditions=conds, requeue_state=None))
    new = ws.evict(cleared, cmd.reason, cmd.message, now)
    return _status_write(wl, new, f"deactivated: {cmd.reason}", "AlreadyApplied")


def _finish_backoff(cmd: FinishRequeueBackoff, wl: Workload, now: str) -> Plan:
    """The workload controller's end of a PodsReadyTimeout backoff: requeueAt cleared, Requeued=True
    BackoffFinished. Only while the workload waits out exactly the backoff the decision saw."""
    if ws.is_finished(wl):
        return Refusal(reason=FINISHED, message="workload is finished")
    requeued = find_condition(wl.status.conditions, k.WORKLOAD_REQUEUED)
    rs = wl.status.requeue_state
    if requeued is None or requeued.status != "False" or requeued.reason != k.EVICTED_BY_PODS_READY_TIMEOUT:
        return Skip(reason="NotWaiting")
    if rs is not None and rs.requeue_at is not None and rs.requeue_at != cmd.requeue_at:
        return Refusal(
            reason=NOT_IN_BACKOFF, message=f"requeueAt is {rs.requeue_at}, the decision saw {cmd.requeue_at}"
        )
    if rs is not None and rs.requeue_at is not None and rs.requeue_at > now:
        return Refusal(reason=BACKOFF_NOT_OVER, message=f"requeueAt {rs.requeue_at} is after {now}")
    return _status_write(wl, ws.finish_backoff(wl, now), "requeue backoff finished", "AlreadyApplied")
