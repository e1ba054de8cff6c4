"""batch/v1 Job through the adapter: pkg/controller/jobs/job.

The Job's own shape (pod count, partial admission, TAS annotations, template
merging and restoring) lives in core/job_pods.py; this module says it in the
adapter's words. Stopping is three writes, one per ask: suspend (with the stopping
annotation, so a half-stopped Job does not look suspended), reset startTime, restore
the original template and drop the annotation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from msgspec.structs import replace

from kq.api.core import Job, PriorityClass
from kq.api.kueue import PodSet, Workload, WorkloadPriorityClass
from kq.api.meta import ObjectMeta, OwnerReference
from services.watcher.core import job_pods as jp
from services.watcher.core.adapter import Adapter, PodSetCountMismatch
from services.watcher.core.writes import Action, patch_write


class JobAdapter(Adapter[Job]):
    framework: ClassVar[str] = "batch/job"
    kind: ClassVar[str] = "Job"
    api_version: ClassVar[str] = "batch/v1"

    def meta(self, job: Job) -> ObjectMeta:
        return job.metadata

    def queue_name(self, job: Job) -> str:
        return jp.queue_name(job)

    def workload(self, job: Job, classes: Mapping[str, WorkloadPriorityClass],
                 pod_classes: Mapping[str, PriorityClass]) -> Workload:
        return jp.build_workload(job, classes, pod_classes)

    def pod_sets(self, job: Job) -> tuple[PodSet, ...]:
        return (jp.pod_set(job),)

    def workload_name(self, job: Job) -> str:
        return jp.workload_name(job.metadata.name, job.metadata.uid)

    def owner_references(self, job: Job) -> tuple[OwnerReference, ...]:
        meta = job.metadata
        return (OwnerReference(api_version=self.api_version, kind=self.kind, name=meta.name, uid=meta.uid,
                               controller=True, block_owner_deletion=True),)

    def owns(self, wl: Workload, job: Job) -> bool:
        return jp.owned_by(wl, job)

    def equivalent(self, job: Job, wl: Workload) -> bool:
        # A prebuilt Workload's fit is judged once, when it is adopted (OutOfSync), not here.
        return bool(jp.prebuilt_workload_name(job)) or jp.equivalent(job, wl)

    def is_suspended(self, job: Job) -> bool:
        return jp.is_suspended(job)

    def is_active(self, job: Job) -> bool:
        return jp.is_active(job)

    def finished(self, job: Job) -> tuple[bool, bool, str]:
        return jp.finished(job)

    def pods_ready(self, job: Job) -> bool:
        return jp.pods_ready(job)

    def run(self, job: Job, infos: Sequence[jp.PodSetInfo]) -> Action | None:
        if not jp.is_suspended(job):
            return None
        if len(infos) != 1:
            raise PodSetCountMismatch(f"expecting 1 podset, got {len(infos)}")
        started = jp.started_job(job, infos[0])
        return patch_write("job", job, started, status=False, why="start: admitted")

    def stop(self, job: Job, originals: Sequence[jp.PodSetInfo] | None) -> Action | None:
        ann = job.metadata.annotations
        if job.spec.suspend is not True:
            meta = replace(job.metadata, annotations={**ann, jp.STOPPING_ANNOTATION: "true"})
            return patch_write("job", job, replace(job, metadata=meta, spec=replace(job.spec, suspend=True)),
                               status=False, why="stop: suspend")
        if jp.STOPPING_ANNOTATION not in ann:
            return None
        if job.status.start_time is not None:
            return patch_write("job", job, replace(job, status=replace(job.status, start_time=None)),
                               status=True, why="stop: reset start time")
        restored = jp.restored_job(job, originals[0] if originals else None)
        meta = replace(restored.metadata, annotations={a: v for a, v in ann.items() if a != jp.STOPPING_ANNOTATION})
        return patch_write("job", job, replace(restored, metadata=meta), status=False, why="stop: restore template")

