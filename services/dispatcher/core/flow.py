"""One manager Workload against its copies on the workers: Kueue's MultiKueue workload
reconciler (pkg/controller/admissionchecks/multikueue/workload.go reconcileGroup) as one pure step.

Order of the rules, as in Kueue: (1) a finished, evicted or unreserved manager workload has no
copies; (2) a finished copy finishes the manager workload; (3) a copy evicted on its worker
sends the check to Retry; (4) an admitted copy wins: the others go, the Job is created there,
the check goes Ready with status.clusterName; (5) a lost winner is waited for until
workerLostTimeout, then Retry; (6) otherwise nominate workers and keep one copy on each.

kq's one strengthening: the Job is only ever created on the cluster named by status.clusterName,
or, before that is set, on the single winner after the other copies were deleted; a cluster that
already has our Job is preferred as the winner, so a restart mid-way never starts a second Job.
"""

from __future__ import annotations

from typing import Any

from kq.api import constants as k
from kq.api.kueue import Workload
from kq.api.meta import Condition, find_condition, parse_time

from .kinds import ADAPTERS, ADAPTERS_BY_TOKEN, RemoteJob, token_of
from .model import (
    FINISH_HOLD_S,
    FINISH_UNSYNCED_S,
    LEASE_ANNOTATION,
    ClusterView,
    Finish,
    Inputs,
    ManagerIntent,
    Nominate,
    Plan,
    SetCheck,
    Settings,
    SyncJob,
)


def _true(wl: Workload, type_: str) -> Condition | None:
    c = find_condition(wl.status.conditions, type_)
    return c if c is not None and c.status == "True" else None


def is_copy_of(remote: Workload, local: Workload) -> bool:
    """A copy made for this incarnation of the manager workload (not a namesake's leftover)."""
    origin_uid = remote.metadata.annotations.get(k.MULTIKUEUE_ORIGIN_UID_ANNOTATION)
    return origin_uid in (None, local.metadata.uid)


def check_state(local: Workload, check: str) -> tuple[str, str] | None:
    for c in local.status.admission_checks:
        if c.name == check:
            return c.state, c.message
    return None


def _job_stopped_status(job: RemoteJob) -> Any | None:
    """The manager object's status with nothing running (its pods ran on a worker that no longer
    has them), so its integration can finish the eviction; None when already so."""
    return ADAPTERS_BY_TOKEN[token_of(job)].stopped_status(job)


def _job_status_wanted(local_job: RemoteJob, remote_job: RemoteJob) -> Any | None:
    """The worker object's status for the manager's, when it differs (Kueue's Job adapter defers
    the copy while the manager's object is still suspended, unless the worker's has finished:
    determineStatusUpdate)."""
    adapter = ADAPTERS_BY_TOKEN[token_of(local_job)]
    if not adapter.sync_while_suspended and adapter.suspended(local_job) and adapter.finish(remote_job) is None:
        return None
    if local_job.status == remote_job.status:
        return None
    return remote_job.status


def _no_adapter(inp: Inputs, s: Settings) -> str | None:
    """Kueue rejects what it cannot run remotely: no owner, an owner kind without a MultiKueue
    adapter (core/kinds.py), or a job not managed by MultiKueue."""
    if inp.owner is None:
        return "No multikueue adapter found"
    api_version, kind = inp.owner
    if ADAPTERS.get((api_version, kind)) not in s.kinds:
        group, _, version = api_version.rpartition("/")
        return f'No multikueue adapter found for owner kind "{group}/{version}, Kind={kind}"'
    job = inp.local_job
    if job is not None and (managed_by := ADAPTERS_BY_TOKEN[token_of(job)].managed_by(job)) != k.MULTIKUEUE_MANAGED_BY:
        return ("The owner is not managed by Kueue: Expecting spec.managedBy to be "
                f'"{k.MULTIKUEUE_MANAGED_BY}" not "{managed_by or ""}"')
    return None


def reconcile(inp: Inputs, s: Settings) -> Plan:
    local = inp.local
    present = sorted(c for c, wl in inp.remotes.items() if wl.metadata.deletion_timestamp is None)
    stale = tuple(c for c in present if not is_copy_of(inp.remotes[c], local))
    copies = {c: inp.remotes[c] for c in present if c not in stale}

    # 1. No copies for a finished workload, one being deleted, evicted or holding no quota.
    finished = _true(local, k.WORKLOAD_FINISHED)
    evicted = _true(local, k.WORKLOAD_EVICTED)
    reserved = _true(local, k.WORKLOAD_QUOTA_RESERVED)
    if finished or evicted or reserved is None or local.metadata.deletion_timestamp is not None:
        stopped: tuple[ManagerIntent, ...] = ()
        if not finished and inp.local_job is not None and (st := _job_stopped_status(inp.local_job)) is not None:
            stopped = (SyncJob(status=st),)
        return Plan(delete=tuple(sorted(copies)) + stale, manager=stopped, reset_round=True, why="no copies wanted")
    cs = check_state(local, inp.check)
    if cs is None or cs[0] == k.CHECK_REJECTED:
        return Plan(delete=stale, why="no MultiKueue check to serve")
    state, message = cs
    winner_name = local.status.cluster_name
    if (why := _no_adapter(inp, s)) is not None:
        return Plan(delete=stale, manager=(SetCheck(state=k.CHECK_REJECTED, message=why),), why="no adapter")
    if inp.local_job is None:
        return Plan(delete=stale, why="waiting for the Job in the mirror")

    # 2. A finished copy finishes the manager workload (OutOfSync means re-dispatch, not done).
    done = [(c, cond) for c, wl in copies.items() if (cond := _true(wl, k.WORKLOAD_FINISHED))]
    if done:
        done.sort(key=lambda d: (d[0] != winner_name, d[1].last_transition_time or "", d[0]))
        c, cond = done[0]
        if cond.reason == k.FINISHED_OUT_OF_SYNC:
            if state != k.CHECK_READY:
                return Plan(delete=stale, why="remote out of sync, check not ready")
            msg = f"Remote workload on worker cluster {c!r} is out of sync with its user job, resetting for re-dispatch"
            return Plan(delete=stale, manager=(SetCheck(state=k.CHECK_RETRY, message=msg),), why="remote out of sync")
        manager: list[ManagerIntent] = []
        rjob = inp.remote_jobs.get(c)
        if not winner_name and rjob is not None and state not in (k.CHECK_RETRY, k.CHECK_REJECTED):
            # It ran and finished before its cluster was recorded (a dispatcher restart in between):
            # record where, so the manager says where it ran.
            manager.append(SetCheck(state=k.CHECK_READY, message=f'The workload was admitted on "{c}"', cluster_name=c))
        synced = inp.local_job is None or rjob is None or inp.local_job.status == rjob.status
        if not synced and rjob is not None:
            manager.append(SyncJob(status=rjob.status))
        if rjob is not None:
            # The manager's integration finishes the Workload from the synced status (suspended or
            # not); the Finish is the fallback, FINISH_HOLD_S after the status shows on the manager
            # (FINISH_UNSYNCED_S after the copy finished, should it never show).
            if synced:
                since = inp.finish_synced_since if inp.finish_synced_since is not None else inp.now
                left = FINISH_HOLD_S - (inp.now - since)
            else:
                since = inp.finish_held_since if inp.finish_held_since is not None else inp.now
                left = FINISH_UNSYNCED_S - (inp.now - since)
            if left > 0:
                return Plan(delete=stale, manager=tuple(manager), hold_finish=True, finish_synced=synced,
                            wake_in=left, why=f"finished on {c}: the manager's job finishes it")
        manager.append(Finish(reason=cond.reason, message=cond.message))
        return Plan(delete=stale, manager=tuple(manager), why=f"finished on {c}")

    # 3. Evicted on its worker while Ready: reset for re-admission.
    if winner_name and (wl := copies.get(winner_name)) is not None and _true(wl, k.WORKLOAD_EVICTED):
        if state == k.CHECK_READY:
            msg = f'Workload evicted on worker cluster: "{winner_name}", resetting for re-admission'
            return Plan(delete=stale, manager=(SetCheck(state=k.CHECK_RETRY, message=msg),), why="evicted on worker")
        return Plan(delete=stale, why="evicted on worker, check not ready")

    # 4. The winner: status.clusterName; else a cluster already running our Job; else the
    #    earliest admitted copy.
    admitted = {c: cond for c, wl in copies.items() if (cond := _true(wl, k.WORKLOAD_ADMITTED))}
    winner = None
    if winner_name:
        winner = winner_name if winner_name in admitted else None
    else:
        with_job = sorted(c for c in admitted if c in inp.remote_jobs)
        if with_job:
            winner = with_job[0]
        elif admitted:
            winner = min(admitted, key=lambda c: (admitted[c].last_transition_time or "", c))
    if winner is not None:
        return _converge(inp, s, winner, copies, stale, state)

    # 5. No admitted copy while Ready: the winner is lost or gone.
    if state == k.CHECK_READY:
        view = next((c for c in inp.clusters if c.name == winner_name), None)
        if winner_name and (view is None or not view.available):
            since = view.lost_since if view is not None and view.lost_since is not None else inp.now
            left = s.worker_lost_timeout_s - (inp.now - since)
            if left > 0:
                return Plan(delete=stale, wake_in=left, why=f"admitting worker {winner_name} unreachable")
            return Plan(delete=stale, manager=(SetCheck(state=k.CHECK_RETRY, message="Admitting remote lost"),),
                        why="admitting worker lost")
        if not winner_name:
            msg = "Admission check is Ready but no admitting cluster is recorded"
            return Plan(delete=stale, manager=(SetCheck(state=k.CHECK_RETRY, message=msg),),
                        why="ready without cluster")
        return Plan(delete=stale, manager=(SetCheck(state=k.CHECK_RETRY, message="Admitting remote no longer exists"),),
                    why="admitting copy gone")

    # 6. Nominate and keep one copy on each nominated, reachable worker.
    if state != k.CHECK_PENDING:
        return Plan(delete=stale, why=f"check {state}: no nomination")
    return _nominate(inp, s, copies, stale, message)


def topology_placed(local: Workload, remote: Workload) -> tuple[str, ...]:
    """The manager's pod sets whose topology request waits for the worker (delayed, Pending) and that
    the winner's copy has a topology assignment for (Kueue's needsDelayedTopologyUpdate)."""
    mine, theirs = local.status.admission, remote.status.admission
    if mine is None or theirs is None:
        return ()
    placed = {p.name for p in theirs.pod_set_assignments if p.topology_assignment is not None}
    return tuple(p.name for p in mine.pod_set_assignments
                 if p.name in placed and p.delayed_topology_request == "Pending")


def lease_until(wl: Workload) -> float | None:
    text = wl.metadata.annotations.get(LEASE_ANNOTATION)
    if not text:
        return None
    try:
        return parse_time(text).timestamp()
    except ValueError:
        return None


def _converge(inp: Inputs, s: Settings, winner: str, copies: dict[str, Workload], stale: tuple[str, ...],
              state: str) -> Plan:
    local = inp.local
    held = lease_until(copies[winner])
    renew = None
    if s.lease_enabled and (held is None or held - inp.now < s.lease_s - s.renew_every_s):
        renew = inp.now + s.lease_s
    others = tuple(c for c in sorted(copies) if c != winner)
    manager: list[ManagerIntent] = []
    create_job = None
    rjob = inp.remote_jobs.get(winner)
    if inp.local_job is not None:
        if rjob is None:
            create_job = winner
        elif (st := _job_status_wanted(inp.local_job, rjob)) is not None:
            manager.append(SyncJob(status=st))
            # A finished status finishes the Workload in the same turn, as Kueue's controller does once
            # the copy finished: left to the manager's integration, it waited for that write's echo
            # and a turn of the integration (p50 0.4 s, p90 1.6 s of quota held under load).
            done = ADAPTERS_BY_TOKEN[token_of(rjob)].finish(rjob)
            if done is not None and state == k.CHECK_READY and local.status.cluster_name == winner:
                manager.append(Finish(reason=done[0], message=done[1]))
    placed = topology_placed(local, copies[winner])
    if state not in (k.CHECK_RETRY, k.CHECK_REJECTED) and (
            state != k.CHECK_READY or local.status.cluster_name != winner or placed):
        manager.insert(0, SetCheck(state=k.CHECK_READY, message=f'The workload was admitted on "{winner}"',
                                   cluster_name=winner, topology_ready=placed))
    return Plan(delete=others + stale, create_job=create_job, manager=tuple(manager),
                renew_lease=(winner, renew) if renew is not None else None,
                wake_in=s.renew_every_s if s.lease_enabled else None, why=f"admitted on {winner}")


def _nominate(inp: Inputs, s: Settings, copies: dict[str, Workload], stale: tuple[str, ...], message: str) -> Plan:
    local = inp.local
    # A worker without the API of the job's kind (no CRD) can never run it: no copy goes there.
    token = token_of(inp.local_job) if inp.local_job is not None else None
    lacking = sorted(c.name for c in inp.clusters
                     if c.available and token is not None and c.kinds is not None and token not in c.kinds)
    available = [c.name for c in inp.clusters if c.available and c.name not in lacking]
    current = tuple(local.status.nominated_cluster_names)
    manager: list[ManagerIntent] = []
    wake = None
    round_started = None
    awaiting = False
    if s.mode == "AllAtOnce":
        nominated = tuple(sorted(available))
        if set(nominated) != set(current):
            manager.append(Nominate(clusters=nominated))
    elif s.mode == "Incremental":
        # Our own nomination may not be visible yet: never shrink below it.
        current = current + tuple(c for c in inp.round_nominated if c not in current)
        nominated = current
        started = inp.round_started
        if started is None or inp.now - started >= s.round_timeout_s:
            rest = sorted(c for c in available if c not in current)[: s.step_size]
            if rest:
                nominated = current + tuple(rest)
                manager.append(Nominate(clusters=nominated))
                round_started = inp.now
                wake = s.round_timeout_s
        else:
            wake = s.round_timeout_s - (inp.now - started)
    else:
        nominated = current
        awaiting = not nominated
    want = set(nominated) & set(available)
    create = tuple(sorted(c for c in want if c not in copies))
    delete = tuple(sorted(c for c in copies if c not in nominated)) + stale
    pending = _pending_message(copies, want)
    if lacking and token is not None:
        kind = ADAPTERS_BY_TOKEN[token].kind
        parts = [f"{c}: the worker does not serve {kind}" for c in lacking]
        pending = "; ".join([*parts, pending] if pending else parts)
    if pending and pending != message:
        manager.append(SetCheck(state=k.CHECK_PENDING, message=pending))
    return Plan(delete=delete, create=create, manager=tuple(manager), wake_in=wake, round_started=round_started,
                round_nominated=nominated if round_started is not None else (), awaiting_nomination=awaiting,
                why=f"nominated {', '.join(sorted(nominated)) or 'none'}")


def _pending_message(copies: dict[str, Workload], nominated: set[str]) -> str:
    """Why the copies wait, as each worker says (QuotaReserved=False message), for the manager to show."""
    parts = []
    for c in sorted(nominated):
        wl = copies.get(c)
        if wl is None:
            continue
        cond = find_condition(wl.status.conditions, k.WORKLOAD_QUOTA_RESERVED)
        if cond is not None and cond.status == "False" and cond.message:
            parts.append(f"{c}: {cond.message}")
    return "; ".join(parts)


def lost_clusters(clusters: tuple[ClusterView, ...]) -> list[str]:
    return [c.name for c in clusters if not c.available]
