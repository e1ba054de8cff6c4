"""ReconcileGenericJob for every framework behind an Adapter, as one pure decision: the next write.

Same steps as the Job integration (core/jobs.py), in the words of the adapter:
finished Workload -> drop the finalizer; Workload deleted -> stop, then let it go;
finished object -> finish the Workload; no Workload -> make sure nothing runs,
then create it; shape changed while waiting -> replace the Workload; evicted ->
stop, and once nothing is active release the quota (PodsReady kept before that, with
waitForPodsReady); admitted -> run with the
admission's pod set infos; running without admission -> stop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec.structs import replace

from kq.api import constants as k
from kq.api.core import PriorityClass
from kq.api.kueue import ResourceFlavor, Workload, WorkloadPriorityClass
from kq.api.meta import OwnerReference
from services.watcher.core import job_pods as jp
from services.watcher.core import workload_status as ws
from services.watcher.core.adapter import Adapter, PodSetCountMismatch, admission_infos, original_infos
from services.watcher.core.writes import Action, Create, Delete, Skip, encode_body, patch_write

FAILED_TO_START = "FailedToStart"


def _remove_finalizer(wl: Workload, why: str) -> Action | None:
    if k.RESOURCE_IN_USE_FINALIZER not in wl.metadata.finalizers:
        return None
    kept = tuple(f for f in wl.metadata.finalizers if f != k.RESOURCE_IN_USE_FINALIZER)
    return patch_write("workload", wl, replace(wl, metadata=replace(wl.metadata, finalizers=kept)),
                       status=False, why=why)


def _status(wl: Workload, new: Workload, why: str) -> Action | None:
    return patch_write("workload", wl, new, status=True, why=why)


def _fail_to_start(wl: Workload, message: str, now: str) -> Action | Skip:
    return _status(wl, ws.finish(wl, FAILED_TO_START, message, now), FAILED_TO_START) or Skip(reason=FAILED_TO_START)


def _start(ad: Adapter[Any], job: Any, wl: Workload, flavors: dict[str, ResourceFlavor], now: str) -> Action | Skip:
    if wl.status.admission is None:
        return Skip(reason="AdmittedWithoutAdmission")
    try:
        infos = admission_infos(wl, flavors)
        step = ad.run(job, infos)
    except jp.MissingFlavor as e:
        return Skip(reason=f"FlavorNotFound: {e}")
    except PodSetCountMismatch as e:
        return _fail_to_start(wl, f"invalid podset infos: {e}", now)
    except jp.PodSetConflict as e:
        return _fail_to_start(wl, f"invalid admission check PodSetUpdate: {e}", now)
    return step or Skip(reason="Started")


def reconcile(
    ad: Adapter[Any],
    job: Any,
    wl: Workload | None,
    flavors: dict[str, ResourceFlavor],
    classes: Mapping[str, WorkloadPriorityClass],
    pod_classes: Mapping[str, PriorityClass],
    now: str,
    *,
    wait_for_pods_ready: bool = False,
    manage_unlabelled: bool = False,
) -> Action | Skip:
    """The next step for one object of a framework and the Workload it controls (None: none yet).
    With waitForPodsReady the Workload's PodsReady condition follows the adapter's pods_ready.
    `manage_unlabelled`: Kueue manages the object without a queue name (manageJobsWithoutQueueName)."""
    meta = ad.meta(job)
    if meta.deletion_timestamp is not None:
        return Skip(reason="JobDeleting")
    if wl is None and (ad.skip(job) or not (ad.queue_name(job) or manage_unlabelled)):
        return Skip(reason="NotQueued")

    if wl is not None and ws.is_finished(wl):
        return _remove_finalizer(wl, "workload finished") or Skip(reason="Finished")

    if wl is not None and wl.metadata.deletion_timestamp is not None:
        return (ad.stop(job, original_infos(wl)) or _remove_finalizer(wl, "workload deleted")
                or Skip(reason="WorkloadDeleting"))

    done, succeeded, message = ad.finished(job)
    if done:
        if wl is None:
            return Skip(reason="JobFinished")
        reason = k.FINISHED_SUCCEEDED if succeeded else k.FINISHED_FAILED
        finished = ws.finish(wl, reason, message, now)
        return _status(wl, finished, f"{ad.kind} {reason.lower()}") or Skip(reason="Finished")

    if wl is None:
        step = ad.stop(job, None)
        if step is not None:
            return step
        if ad.is_active(job):
            return Skip(reason="WaitingForPodsToStop")
        if (waiting := ad.waiting_reason(job)) is not None:
            return Skip(reason=waiting)
        try:
            new = ad.workload(job, classes, pod_classes)
        except jp.WorkloadBuildError as e:
            return Skip(reason=f"CannotCreateWorkload: {e}")
        return Create(kind="workload", namespace=new.metadata.namespace, name=new.metadata.name,
                      body=encode_body(new), why=f"queued {ad.kind} without a workload")

    if ad.is_suspended(job) and not ws.has_quota_reservation(wl) and not ad.equivalent(job, wl):
        return Delete(kind="workload", namespace=wl.metadata.namespace, name=wl.metadata.name,
                      uid=wl.metadata.uid, resource_version=wl.metadata.resource_version,
                      why=f"{ad.kind} no longer matches its workload")

    if wait_for_pods_ready:
        synced = ws.sync_pods_ready(wl, ad.pods_ready(job), now)
        if synced is not wl:
            return _status(wl, synced, "pods ready condition") or Skip(reason="PodsReadyUnchanged")

    if ws.is_evicted(wl):
        step = ad.stop(job, original_infos(wl))
        if step is not None:
            return step
        if ws.has_quota_reservation(wl) and not ad.is_active(job):
            released = ws.finish_eviction(wl, now)
            return _status(wl, released, f"{ad.kind} stopped after eviction") or Skip(reason="Evicted")
        return Skip(reason="Evicted")

    if ad.is_suspended(job):
        if ws.is_admitted(wl):
            return _start(ad, job, wl, flavors, now)
        queue = ad.queue_name(job)
        if not ws.has_quota_reservation(wl) and queue and wl.spec.queue_name != queue:
            renamed = replace(wl, spec=replace(wl.spec, queue_name=queue))
            return (patch_write("workload", wl, renamed, status=False, why="queue name changed")
                    or Skip(reason="Waiting"))
        return Skip(reason="WaitingForAdmission")

    if not ws.is_admitted(wl):
        return ad.stop(job, original_infos(wl)) or Skip(reason="Stopping")
    return Skip(reason="Running")


def prebuilt(ad: Adapter[Any], job: Any, wl: Workload | None, now: str) -> Action | Skip | None:
    """ensureOneWorkload for an object labelled with a prebuilt Workload (a MultiKueue copy on a
    worker): wait for the Workload (the object stays stopped), take ownership of it, and finish it
    as OutOfSync when it does not describe the object. None: carry on with `reconcile`.
    `wl` is the Workload of the prebuilt name, whoever controls it."""
    meta = ad.meta(job)
    if wl is not None and (ref := wl.metadata.controller_ref()) is not None and ref.uid != meta.uid:
        wl = None  # controlled by another object: not ours
    if wl is None:
        return ad.stop(job, None) or Skip(reason="PrebuiltWorkloadNotFound")
    if not ad.owns(wl, job):
        owner = OwnerReference(api_version=ad.api_version, kind=ad.kind, name=meta.name, uid=meta.uid,
                               controller=True, block_owner_deletion=True)
        refs = (*(r for r in wl.metadata.owner_references if r.uid != meta.uid), owner)
        labels = {**wl.metadata.labels, k.JOB_UID_LABEL: meta.uid} if meta.uid else wl.metadata.labels
        adopted = replace(wl, metadata=replace(wl.metadata, owner_references=refs, labels=labels))
        return patch_write("workload", wl, adopted, status=False, why="adopt prebuilt workload")
    if not ws.is_finished(wl) and not ad.equivalent(job, wl):
        msg = "The prebuilt workload is out of sync with its user job"
        return _status(wl, ws.finish(wl, k.FINISHED_OUT_OF_SYNC, msg, now), "prebuilt out of sync") or Skip(
            reason="OutOfSync")
    return None


def reconcile_orphan(wl: Workload, now: str) -> Action | Skip:
    """A framework's Workload whose object is gone: nothing to stop, so release and let go."""
    if wl.metadata.deletion_timestamp is not None:
        return _remove_finalizer(wl, "workload deleted") or Skip(reason="WorkloadDeleting")
    if ws.is_finished(wl):
        return _remove_finalizer(wl, "workload finished") or Skip(reason="Finished")
    if ws.is_evicted(wl) and ws.has_quota_reservation(wl):
        released = ws.finish_eviction(wl, now)
        return _status(wl, released, "evicted workload without its object") or Skip(reason="Evicted")
    return Skip(reason="Idle")
