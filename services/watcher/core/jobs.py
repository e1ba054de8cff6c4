"""Kueue's Job reconciler as one pure decision: given a Job and its Workload, the next write.

`reconcile_job` returns the single next step (or Skip with why nothing is to be
done); the shell applies it conditionally and asks again with what the API
server answered, until Skip. Multi-step flows therefore fall out of re-asking:
stopping a Job is suspend(+stopping annotation) -> reset startTime -> restore
the original template; an eviction is Evicted (by command) -> stop the Job ->
once no pod is active, release the quota (Requeued, QuotaReserved=False).
Follows pkg/controller/jobframework/reconciler.go ReconcileGenericJob.
"""

from __future__ import annotations

from collections.abc import Mapping

from msgspec.structs import replace

from kq.api import constants as k
from kq.api.core import Job, PriorityClass
from kq.api.kueue import ResourceFlavor, Workload, WorkloadPriorityClass
from services.watcher.core import job_pods as jp
from services.watcher.core import workload_status as ws
from services.watcher.core.writes import Action, Create, Delete, Skip, encode_body, patch_write

FAILED_TO_START = "FailedToStart"


def _remove_finalizer(wl: Workload, why: str) -> Action | None:
    if k.RESOURCE_IN_USE_FINALIZER not in wl.metadata.finalizers:
        return None
    kept = tuple(f for f in wl.metadata.finalizers if f != k.RESOURCE_IN_USE_FINALIZER)
    return patch_write(
        "workload", wl, replace(wl, metadata=replace(wl.metadata, finalizers=kept)), status=False, why=why
    )


def _workload_status(wl: Workload, new: Workload, why: str) -> Action | None:
    return patch_write("workload", wl, new, status=True, why=why)


def _original_info(wl: Workload | None) -> jp.PodSetInfo | None:
    if wl is None or not wl.spec.pod_sets:
        return None
    return jp.info_from_podset(wl.spec.pod_sets[0])


def stop_job(job: Job, wl: Workload | None, why: str) -> Action | None:
    """Job.Stop, one step at a time; None once the Job is suspended with its original template."""
    ann = job.metadata.annotations
    if job.spec.suspend is not True:
        meta = replace(job.metadata, annotations={**ann, jp.STOPPING_ANNOTATION: "true"})
        return patch_write("job", job, replace(job, metadata=meta, spec=replace(job.spec, suspend=True)),
                           status=False, why=f"suspend: {why}")
    if jp.STOPPING_ANNOTATION not in ann:
        return None
    if job.status.start_time is not None:
        return patch_write("job", job, replace(job, status=replace(job.status, start_time=None)),
                           status=True, why=f"reset start time: {why}")
    restored = jp.restored_job(job, _original_info(wl))
    meta = replace(restored.metadata, annotations={a: v for a, v in ann.items() if a != jp.STOPPING_ANNOTATION})
    return patch_write("job", job, replace(restored, metadata=meta), status=False, why=f"restore template: {why}")


def start_job(job: Job, wl: Workload, flavors: dict[str, ResourceFlavor], now: str) -> Action | Skip:
    """startJob: unsuspend with the admission's scheduling directives, or finish the Workload as
    FailedToStart when they cannot apply (Kueue's permanent podset errors)."""
    admission = wl.status.admission
    if admission is None:
        return Skip(reason="AdmittedWithoutAdmission")
    if len(admission.pod_set_assignments) != 1 or len(wl.spec.pod_sets) != 1:
        msg = f"invalid podset infos: expecting 1 podset, got {len(admission.pod_set_assignments)}"
        return (
            _workload_status(wl, ws.finish(wl, FAILED_TO_START, msg, now), FAILED_TO_START)
            or Skip(reason=FAILED_TO_START)
        )
    try:
        info = jp.info_from_assignment(wl, admission.pod_set_assignments[0], wl.spec.pod_sets[0], flavors)
        started = jp.started_job(job, info)
    except jp.MissingFlavor as e:
        return Skip(reason=f"FlavorNotFound: {e}")
    except jp.PodSetConflict as e:
        msg = f"invalid admission check PodSetUpdate: {e}"
        return (
            _workload_status(wl, ws.finish(wl, FAILED_TO_START, msg, now), FAILED_TO_START)
            or Skip(reason=FAILED_TO_START)
        )
    write = patch_write("job", job, started, status=False,
                        why=f"start: admitted by ClusterQueue {admission.cluster_queue}")
    return write or Skip(reason="Started")


def reconcile_job(
    job: Job,
    wl: Workload | None,
    flavors: dict[str, ResourceFlavor],
    priority_classes: dict[str, WorkloadPriorityClass],
    now: str,
    pod_priority_classes: Mapping[str, PriorityClass] | None = None,
    *,
    wait_for_pods_ready: bool = False,
) -> Action | Skip:
    """The next step for a Job and the Workload it controls (None when it has none); for a Job
    labelled with a prebuilt Workload, `wl` is the Workload of that name, whoever controls it.
    With waitForPodsReady the Workload's PodsReady condition follows the Job's pods."""
    if job.metadata.deletion_timestamp is not None:
        return Skip(reason="JobDeleting")
    if jp.prebuilt_workload_name(job):
        step = _prebuilt(job, wl, now)
        if step is not None:
            return step
    elif wl is None and not jp.queue_name(job):
        return Skip(reason="NotQueued")

    # 1. A finished Workload: only its finalizer is left to drop.
    if wl is not None and ws.is_finished(wl):
        return _remove_finalizer(wl, "workload finished") or Skip(reason="Finished")

    # 1.1 A Workload being deleted: stop the Job, then let the Workload go.
    if wl is not None and wl.metadata.deletion_timestamp is not None:
        return (
            stop_job(job, wl, "workload deleted")
            or _remove_finalizer(wl, "workload deleted")
            or Skip(reason="WorkloadDeleting")
        )

    # 3. A finished Job finishes its Workload.
    done, succeeded, message = jp.finished(job)
    if done:
        if wl is None:
            return Skip(reason="JobFinished")
        reason = k.FINISHED_SUCCEEDED if succeeded else k.FINISHED_FAILED
        return (
            _workload_status(wl, ws.finish(wl, reason, message, now), f"job {reason.lower()}")
            or Skip(reason="Finished")
        )

    # 3. No Workload: make sure the Job does not run, then create one.
    if wl is None:
        step = stop_job(job, None, "no matching workload")
        if step is not None:
            return step
        if jp.is_active(job):
            return Skip(reason="WaitingForPodsToStop")
        try:
            new = jp.build_workload(job, priority_classes, pod_priority_classes)
        except jp.WorkloadBuildError as e:
            return Skip(reason=f"CannotCreateWorkload: {e}")
        return Create(kind="workload", namespace=new.metadata.namespace, name=new.metadata.name,
                      body=encode_body(new), why="queued job without a workload")

    # The Job changed shape while waiting: drop the Workload (a new one follows).
    if (
        not jp.prebuilt_workload_name(job)
        and jp.is_suspended(job)
        and not ws.has_quota_reservation(wl)
        and not jp.equivalent(job, wl)
    ):
        return Delete(kind="workload", namespace=wl.metadata.namespace, name=wl.metadata.name,
                      uid=wl.metadata.uid, resource_version=wl.metadata.resource_version,
                      why="job no longer matches its workload")

    # 5. waitForPodsReady: PodsReady from the Job's ready and succeeded pods.
    if wait_for_pods_ready:
        synced = ws.sync_pods_ready(wl, jp.pods_ready(job), now)
        if synced is not wl:
            return _workload_status(wl, synced, "pods ready condition") or Skip(reason="PodsReadyUnchanged")

    # 6. Eviction: stop the Job; once no pod is active, release the quota.
    if ws.is_evicted(wl):
        step = stop_job(job, wl, "workload evicted")
        if step is not None:
            return step
        if ws.has_quota_reservation(wl) and not jp.is_active(job):
            return (
                _workload_status(wl, ws.finish_eviction(wl, now), "job stopped after eviction")
                or Skip(reason="Evicted")
            )
        return Skip(reason="Evicted")

    # 7. Suspended: start once admitted; follow a queue name change while waiting.
    if jp.is_suspended(job):
        if ws.is_admitted(wl):
            return start_job(job, wl, flavors, now)
        if not ws.has_quota_reservation(wl) and wl.spec.queue_name != jp.queue_name(job) and jp.queue_name(job):
            renamed = replace(wl, spec=replace(wl.spec, queue_name=jp.queue_name(job)))
            return (
                patch_write("workload", wl, renamed, status=False, why="queue name changed")
                or Skip(reason="Waiting")
            )
        return Skip(reason="WaitingForAdmission")

    # 8. Running without admission: suspend.
    if not ws.is_admitted(wl):
        return stop_job(job, wl, "not admitted by cluster queue") or Skip(reason="Stopping")
    return Skip(reason="Running")


def _prebuilt(job: Job, wl: Workload | None, now: str) -> Action | Skip | None:
    """ensureOneWorkload for a prebuilt Workload: wait for it (the Job stays stopped), take
    ownership, and finish it as OutOfSync when it does not describe the Job. None: carry on."""
    if wl is not None and (ref := wl.metadata.controller_ref()) is not None and ref.uid != job.metadata.uid:
        wl = None  # controlled by another object: not ours
    if wl is None:
        return stop_job(job, None, "missing prebuilt workload") or Skip(reason="PrebuiltWorkloadNotFound")
    if not jp.owned_by(wl, job):
        return patch_write("workload", wl, jp.with_owner(wl, job), status=False, why="adopt prebuilt workload")
    if not ws.is_finished(wl) and not jp.equivalent(job, wl):
        msg = "The prebuilt workload is out of sync with its user job"
        return _workload_status(wl, ws.finish(wl, k.FINISHED_OUT_OF_SYNC, msg, now), "prebuilt out of sync")
    return None


def reconcile_unowned_workload(wl: Workload, now: str) -> Action | Skip:
    """A Workload no job integration controls (created directly, or its Job is gone): there is
    nothing to stop, so an eviction releases the quota at once and a deletion goes through."""
    if wl.metadata.deletion_timestamp is not None:
        return _remove_finalizer(wl, "workload deleted") or Skip(reason="WorkloadDeleting")
    if ws.is_finished(wl):
        return Skip(reason="Finished")
    if ws.is_evicted(wl) and ws.has_quota_reservation(wl):
        return (
            _workload_status(wl, ws.finish_eviction(wl, now), "evicted workload without a job")
            or Skip(reason="Evicted")
        )
    return Skip(reason="Idle")
