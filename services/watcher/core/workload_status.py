"""Kueue's Workload status transitions as pure functions (pkg/workload, pkg/workload/evict, .../finish).

Each takes a Workload and `now` (RFC 3339) and returns the new Workload; the
caller diffs old and new into a conditional patch. Condition updates follow
apimeta.SetStatusCondition: the transition time moves only when the status does.
"""

from __future__ import annotations

from typing import Literal

from msgspec.structs import replace

from kq.api import constants as k
from kq.api.kueue import (
    Admission,
    AdmissionCheckState,
    SchedulingStats,
    Workload,
    WorkloadSchedulingStatsEviction,
)
from kq.api.meta import Condition, condition_is_true, find_condition, parse_time

MAX_CONDITION_MESSAGE = 32 * 1024  # api.TruncateConditionMessage
DEACTIVATED_DUE_TO = f"{k.REASON_DEACTIVATED}DueTo"


def _truncate(message: str) -> str:
    if len(message) <= MAX_CONDITION_MESSAGE:
        return message
    return message[: MAX_CONDITION_MESSAGE - 3] + "..."


def set_condition(conditions: tuple[Condition, ...], new: Condition, now: str) -> tuple[Condition, ...]:
    """apimeta.SetStatusCondition: replace the condition of that type, keeping its transition time
    unless the status changes; append it when absent."""
    new = replace(new, message=_truncate(new.message))
    for i, cur in enumerate(conditions):
        if cur.type != new.type:
            continue
        ltt = cur.last_transition_time if cur.status == new.status else (new.last_transition_time or now)
        merged = replace(new, last_transition_time=ltt)
        if merged == cur:
            return conditions
        return (*conditions[:i], merged, *conditions[i + 1:])
    return (*conditions, replace(new, last_transition_time=new.last_transition_time or now))


def _cond(
    wl: Workload, type_: str, status: Literal["True", "False"], reason: str, message: str, *, generation: bool = True
) -> Condition:
    return Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        observed_generation=wl.metadata.generation if generation else None,
    )


def _with_conditions(wl: Workload, conditions: tuple[Condition, ...], **status_fields: object) -> Workload:
    return replace(wl, status=replace(wl.status, conditions=conditions, **status_fields))


def has_quota_reservation(wl: Workload) -> bool:
    return condition_is_true(wl.status.conditions, k.WORKLOAD_QUOTA_RESERVED)


def is_admitted(wl: Workload) -> bool:
    return condition_is_true(wl.status.conditions, k.WORKLOAD_ADMITTED)


def topology_pending(wl: Workload) -> bool:
    """A pod set whose topology request waits for another cluster (delayed, Pending, unplaced):
    not Admitted yet (Kueue's HasTopologyAssignmentsPending)."""
    adm = wl.status.admission
    return adm is not None and any(p.topology_assignment is None and p.delayed_topology_request == "Pending"
                                   for p in adm.pod_set_assignments)


def with_topology_ready(wl: Workload, pod_sets: tuple[str, ...]) -> Workload:
    """The named pod sets' delayed topology requests placed (Pending -> Ready), as Kueue's
    MultiKueue controller writes once the winner's copy has its topology assignment."""
    adm = wl.status.admission
    if adm is None or not pod_sets:
        return wl
    psas = tuple(replace(p, delayed_topology_request="Ready")
                 if p.name in pod_sets and p.delayed_topology_request == "Pending" else p
                 for p in adm.pod_set_assignments)
    return replace(wl, status=replace(wl.status, admission=replace(adm, pod_set_assignments=psas)))


def is_finished(wl: Workload) -> bool:
    return condition_is_true(wl.status.conditions, k.WORKLOAD_FINISHED)


def is_evicted(wl: Workload) -> bool:
    return condition_is_true(wl.status.conditions, k.WORKLOAD_EVICTED)


def _reset_active(
    conditions: tuple[Condition, ...], wl: Workload, type_: str, reason: str, now: str
) -> tuple[Condition, ...]:
    """resetActiveCondition: a True condition of this type turns False, "Previously: <message>"."""
    prev = find_condition(conditions, type_)
    if prev is None or prev.status != "True":
        return conditions
    return set_condition(conditions, _cond(wl, type_, "False", reason, "Previously: " + prev.message), now)


def set_quota_reservation(wl: Workload, admission: Admission, now: str, *, admitted: bool, message: str = "",
                          checks: tuple[str, ...] = ()) -> Workload:
    """workload.SetQuotaReservation, then SyncAdmittedCondition when every admission check is ready.

    Each admission check the ClusterQueue asks for gets a Pending entry (as Kueue's workload
    controller adds them), so the check's controller has a state to move to Ready."""
    conds = set_condition(
        wl.status.conditions,
        _cond(wl, k.WORKLOAD_QUOTA_RESERVED, "True", k.REASON_QUOTA_RESERVED,
              message or f"Quota reserved in ClusterQueue {admission.cluster_queue}"),
        now,
    )
    for type_ in (k.WORKLOAD_EVICTED, k.WORKLOAD_PREEMPTED, k.WORKLOAD_BLOCKED_ON_PREEMPTION_GATES):
        conds = _reset_active(conds, wl, type_, k.REASON_QUOTA_RESERVED, now)
    if admitted:
        conds = set_condition(
            conds, _cond(wl, k.WORKLOAD_ADMITTED, "True", k.REASON_ADMITTED, "The workload is admitted"), now
        )
    have = {c.name for c in wl.status.admission_checks}
    added = tuple(AdmissionCheckState(name=n, state="Pending", last_transition_time=now)
                  for n in sorted(set(checks) - have))
    return _with_conditions(wl, conds, admission=admission, unhealthy_nodes=(),
                            admission_checks=wl.status.admission_checks + added)


def same_quota(a: Admission | None, b: Admission) -> bool:
    """The same reservation (queue, pod sets, flavors, counts), whatever the topology assignments."""
    if a is None or a.cluster_queue != b.cluster_queue or len(a.pod_set_assignments) != len(b.pod_set_assignments):
        return False
    return all((x.name, x.flavors, x.count) == (y.name, y.flavors, y.count)
               for x, y in zip(a.pod_set_assignments, b.pod_set_assignments, strict=True))


def replace_topology(wl: Workload, admission: Admission) -> Workload:
    """TAS node failure replaced: the new topology assignments, status.unhealthyNodes cleared
    (Kueue's admit after a successful replacement)."""
    return _with_conditions(wl, wl.status.conditions, admission=admission, unhealthy_nodes=())


def set_admitted(wl: Workload, now: str) -> Workload:
    conds = set_condition(
        wl.status.conditions, _cond(wl, k.WORKLOAD_ADMITTED, "True", k.REASON_ADMITTED, "The workload is admitted"), now
    )
    return _with_conditions(wl, conds)


def set_pending(wl: Workload, reason: str, message: str, now: str) -> Workload:
    conds = set_condition(wl.status.conditions, _cond(wl, k.WORKLOAD_QUOTA_RESERVED, "False", reason, message), now)
    return _with_conditions(wl, conds)


def _split_deactivation(reason: str) -> tuple[str, str]:
    """"DeactivatedDueToRequeuingLimitExceeded" -> ("Deactivated", "RequeuingLimitExceeded") (ReasonWithCause)."""
    if reason.startswith(DEACTIVATED_DUE_TO):
        return k.REASON_DEACTIVATED, reason[len(DEACTIVATED_DUE_TO) :]
    return reason, ""


def _count_eviction(stats: SchedulingStats | None, reason: str, cause: str) -> SchedulingStats:
    evictions = list((stats or SchedulingStats()).evictions)
    for i, e in enumerate(evictions):
        if e.reason == reason and e.underlying_cause == cause:
            evictions[i] = replace(e, count=e.count + 1)
            break
    else:
        evictions.append(WorkloadSchedulingStatsEviction(reason=reason, underlying_cause=cause, count=1))
    return SchedulingStats(evictions=tuple(evictions))


def _reset_checks(checks: tuple[AdmissionCheckState, ...], now: str) -> tuple[AdmissionCheckState, ...]:
    out = []
    for c in checks:
        if c.state == k.CHECK_PENDING:
            out.append(c)
            continue
        retry = (c.retry_count or 0) + 1 if c.state == k.CHECK_RETRY else None
        out.append(AdmissionCheckState(
            name=c.name,
            state=k.CHECK_PENDING,
            message="Reset to Pending after eviction. Previously: " + c.state,
            last_transition_time=now,
            requeue_after_seconds=c.requeue_after_seconds,
            retry_count=retry,
        ))
    return tuple(out)


def evict(wl: Workload, reason: str, message: str, now: str, *, preemption_reason: str | None = None,
          underlying_cause: str = "") -> Workload:
    """evict.Evict's prepareForEviction (+ the Preempted condition when preempted): Evicted=True,
    nominations and admission checks reset, eviction counted per reason. The quota stays
    reserved until the job has stopped (finish_eviction)."""
    conds = set_condition(wl.status.conditions, _cond(wl, k.WORKLOAD_EVICTED, "True", reason, message), now)
    if preemption_reason:
        conds = set_condition(
            conds, _cond(wl, k.WORKLOAD_PREEMPTED, "True", preemption_reason, message, generation=False), now
        )
    gates = find_condition(conds, k.WORKLOAD_BLOCKED_ON_PREEMPTION_GATES)
    if gates is not None and gates.status == "True":
        conds = set_condition(conds, _cond(wl, k.WORKLOAD_BLOCKED_ON_PREEMPTION_GATES, "False", reason, message), now)
    count_reason, cause = _split_deactivation(reason)
    cause = cause or underlying_cause
    st = wl.status
    return replace(wl, status=replace(
        st,
        conditions=conds,
        cluster_name=None,
        nominated_cluster_names=(),
        admission_checks=_reset_checks(st.admission_checks, now),
        unhealthy_nodes=(),
        preemption_gates=tuple(replace(g, position="Closed", last_transition_time=now) for g in st.preemption_gates),
        scheduling_stats=_count_eviction(st.scheduling_stats, count_reason, cause),
    ))


def _sync_admitted_after_release(conds: tuple[Condition, ...], wl: Workload, now: str) -> tuple[Condition, ...]:
    """SyncAdmittedCondition once the reservation is gone (UnadmittedWorkloadsObservability, on by default)."""
    return set_condition(
        conds, _cond(wl, k.WORKLOAD_ADMITTED, "False", k.REASON_NO_RESERVATION, "The workload has no reservation"), now
    )


def _accumulated_after_release(wl: Workload, now: str) -> int | None:
    """SyncAdmittedCondition: Admitted turning False adds this admission's whole seconds to
    status.accumulatedPastExecutionTimeSeconds (max-exec-time counts every admission)."""
    admitted = find_condition(wl.status.conditions, k.WORKLOAD_ADMITTED)
    past = wl.status.accumulated_past_execution_time_seconds
    if admitted is None or admitted.status != "True" or not admitted.last_transition_time:
        return past
    ran = int((parse_time(now) - parse_time(admitted.last_transition_time)).total_seconds())
    return (past or 0) + ran


def unset_quota_reservation(wl: Workload, reason: str, message: str, now: str) -> Workload:
    """workload.UnsetQuotaReservationWithCondition."""
    conds = set_condition(wl.status.conditions, _cond(wl, k.WORKLOAD_QUOTA_RESERVED, "False", reason, message), now)
    conds = _sync_admitted_after_release(conds, wl, now)
    return _with_conditions(wl, conds, admission=None,
                            accumulated_past_execution_time_seconds=_accumulated_after_release(wl, now))


def finish_eviction(wl: Workload, now: str) -> Workload:
    """The job reconciler's step after the job stopped: Requeued (True only after a preemption or node
    failures), QuotaReserved=False PendingEvaluation with the eviction message, admission cleared."""
    ev = find_condition(wl.status.conditions, k.WORKLOAD_EVICTED)
    reason = ev.reason if ev is not None else ""
    message = ev.message if ev is not None else ""
    requeued = reason in (k.EVICTED_BY_PREEMPTION, k.EVICTED_DUE_TO_NODE_FAILURES)
    # SetRequeuedCondition keeps no transition time of its own beyond SetStatusCondition's.
    conds = set_condition(
        wl.status.conditions,
        _cond(wl, k.WORKLOAD_REQUEUED, "True" if requeued else "False", reason, message),
        now,
    )
    wl = _with_conditions(wl, conds)
    return unset_quota_reservation(wl, k.REASON_PENDING_EVALUATION, message, now)


def finish(wl: Workload, reason: str, message: str, now: str) -> Workload:
    """finish.Finish: Finished=True with Succeeded/Failed (no-op when already finished)."""
    if is_finished(wl):
        return wl
    conds = set_condition(wl.status.conditions, _cond(wl, k.WORKLOAD_FINISHED, "True", reason, message), now)
    return _with_conditions(wl, conds)


def finish_backoff(wl: Workload, now: str) -> Workload:
    """The workload controller after a PodsReadyTimeout backoff: requeueAt cleared (the count stays),
    Requeued=True BackoffFinished."""
    conds = set_condition(wl.status.conditions, _cond(wl, k.WORKLOAD_REQUEUED, "True", k.REASON_BACKOFF_FINISHED,
                                                      "The workload backoff was finished"), now)
    rs = wl.status.requeue_state
    return _with_conditions(wl, conds, requeue_state=replace(rs, requeue_at=None) if rs is not None else None)


PODS_NOT_READY_MESSAGE = "Not all pods are ready or succeeded"
PODS_WAITING_FOR_RECOVERY_MESSAGE = "At least one pod has failed, waiting for recovery"
PODS_READY_MESSAGE = "All pods reached readiness and the workload is running"


def pods_ready_condition(wl: Workload, pods_ready: bool) -> Condition:
    """generatePodsReadyCondition: the PodsReady condition a job's pods imply (status, reason, message)."""
    if not is_admitted(wl):
        return _cond(wl, k.WORKLOAD_PODS_READY, "False", k.REASON_WAIT_FOR_START, PODS_NOT_READY_MESSAGE)
    cur = find_condition(wl.status.conditions, k.WORKLOAD_PODS_READY)
    recovering = cur is not None and cur.reason in (k.REASON_WAIT_FOR_RECOVERY, k.REASON_RECOVERED)
    if pods_ready:
        reason = k.REASON_RECOVERED if recovering else k.REASON_STARTED
        return _cond(wl, k.WORKLOAD_PODS_READY, "True", reason, PODS_READY_MESSAGE)
    if cur is not None and (cur.status == "True" or cur.reason == k.REASON_WAIT_FOR_RECOVERY):
        return _cond(wl, k.WORKLOAD_PODS_READY, "False", k.REASON_WAIT_FOR_RECOVERY, PODS_WAITING_FOR_RECOVERY_MESSAGE)
    return _cond(wl, k.WORKLOAD_PODS_READY, "False", k.REASON_WAIT_FOR_START, PODS_NOT_READY_MESSAGE)


def sync_pods_ready(wl: Workload, pods_ready: bool, now: str) -> Workload:
    """Set the PodsReady condition unless one of that status and reason is there already
    (HasConditionWithTypeAndReason: a changed message alone is not a reason to write)."""
    want = pods_ready_condition(wl, pods_ready)
    cur = find_condition(wl.status.conditions, k.WORKLOAD_PODS_READY)
    if cur is not None and cur.status == want.status and cur.reason == want.reason:
        return wl
    return _with_conditions(wl, set_condition(wl.status.conditions, want, now))
