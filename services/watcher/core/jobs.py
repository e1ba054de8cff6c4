"""Kueue's Job reconciler as one pure decision: given a Job and its Workload, the next write.

`reconcile_job` returns the single next step (or Skip with why nothing is to be
done); the shell applies it conditionally and asks again with what the API
server answered, until Skip. Multi-step flows therefore fall out of re-asking:
stopping a Job is suspend(+stopping annotation) -> reset startTime -> restore
the original template; an eviction is Evicted (by command) -> stop the Job ->
once no pod is active, release the quota (Requeued, QuotaReserved=False).
Follows pkg/controller/jobframework/reconciler.go ReconcileGenericJob: the steps are the
generic reconciler's (core/generic.py) with the Job adapter (core/frameworks/job.py); what
is the Job's own is here: prebuilt Workloads (MultiKueue workers) and Workloads no Job controls.
"""

from __future__ import annotations

from collections.abc import Mapping

from msgspec.structs import replace

from kq.api import constants as k
from kq.api.core import Job, PriorityClass
from kq.api.kueue import ResourceFlavor, Workload, WorkloadPriorityClass
from services.watcher.core import generic
from services.watcher.core import job_pods as jp
from services.watcher.core import workload_status as ws
from services.watcher.core.frameworks.job import JobAdapter
from services.watcher.core.writes import Action, Skip, patch_write

FAILED_TO_START = generic.FAILED_TO_START
JOB = JobAdapter()


def _remove_finalizer(wl: Workload, why: str) -> Action | None:
    if k.RESOURCE_IN_USE_FINALIZER not in wl.metadata.finalizers:
        return None
    kept = tuple(f for f in wl.metadata.finalizers if f != k.RESOURCE_IN_USE_FINALIZER)
    return patch_write(
        "workload", wl, replace(wl, metadata=replace(wl.metadata, finalizers=kept)), status=False, why=why
    )


def _workload_status(wl: Workload, new: Workload, why: str) -> Action | None:
    return patch_write("workload", wl, new, status=True, why=why)


def reconcile_job(
    job: Job,
    wl: Workload | None,
    flavors: dict[str, ResourceFlavor],
    priority_classes: dict[str, WorkloadPriorityClass],
    now: str,
    pod_priority_classes: Mapping[str, PriorityClass] | None = None,
    *,
    wait_for_pods_ready: bool = False,
    manage_unlabelled: bool = False,
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
    return generic.reconcile(JOB, job, wl, flavors, priority_classes, pod_priority_classes or {}, now,
                             wait_for_pods_ready=wait_for_pods_ready, manage_unlabelled=manage_unlabelled)


def _prebuilt(job: Job, wl: Workload | None, now: str) -> Action | Skip | None:
    """ensureOneWorkload for a prebuilt Workload: wait for it (the Job stays stopped), take
    ownership, and finish it as OutOfSync when it does not describe the Job. None: carry on."""
    if wl is not None and (ref := wl.metadata.controller_ref()) is not None and ref.uid != job.metadata.uid:
        wl = None  # controlled by another object: not ours
    if wl is None:
        return JOB.stop(job, None) or Skip(reason="PrebuiltWorkloadNotFound")
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
