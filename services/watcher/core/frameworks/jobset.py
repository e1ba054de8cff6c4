"""JobSet (jobset.x-k8s.io/v1alpha2) through the adapter: pkg/controller/jobs/jobset.

One podset per replicatedJob (named after it, replicas x pods per Job). Admission
unsuspends the JobSet with each podset's directives merged into its replicatedJob's
pod template (the JobSet controller carries them to the child Jobs); stopping
suspends it and restores the templates. Both are JSON patches by list index, so the
parts of each replicated Job kq does not model (volumes, probes, ...) stay untouched. Finished from the Completed/Failed
conditions; active while any child Job is; pods ready when every child Job is ready.
MultiKueue: on the manager a JobSet with spec.managedBy kueue.x-k8s.io/multikueue is queued and
"started" like any other (the JobSet controller leaves it alone; its status comes from the
worker); the copy on a worker carries the prebuilt-workload label and adopts that Workload
(core/generic.prebuilt).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from msgspec.structs import replace

from kq.api.core import JobSet, ReplicatedJob
from kq.api.kueue import PodSet
from kq.api.meta import ObjectMeta, finished_condition
from services.watcher.core import job_pods as jp
from services.watcher.core.adapter import Adapter, template_ops, template_restored, template_with
from services.watcher.core.writes import Action, json_patch_write


def _pods_per_job(rj: ReplicatedJob) -> int:
    spec = rj.template.spec
    parallelism = spec.parallelism if spec.parallelism is not None else 1
    if spec.completions is not None and spec.completions < parallelism:
        return spec.completions
    return parallelism


class JobSetAdapter(Adapter[JobSet]):
    framework: ClassVar[str] = "jobset.x-k8s.io/jobset"
    kind: ClassVar[str] = "JobSet"
    api_version: ClassVar[str] = "jobset.x-k8s.io/v1alpha2"

    def meta(self, job: JobSet) -> ObjectMeta:
        return job.metadata

    def pod_sets(self, job: JobSet) -> tuple[PodSet, ...]:
        return tuple(
            PodSet(name=rj.name, template=rj.template.spec.template, count=rj.replicas * _pods_per_job(rj))
            for rj in job.spec.replicated_jobs
        )

    def is_suspended(self, job: JobSet) -> bool:
        return job.spec.suspend is True

    def is_active(self, job: JobSet) -> bool:
        return any(s.active > 0 for s in job.status.replicated_jobs_status)

    def finished(self, job: JobSet) -> tuple[bool, bool, str]:
        return finished_condition(job.status.conditions, "Completed")

    def pods_ready(self, job: JobSet) -> bool:
        ready = {s.name: s.ready + s.succeeded for s in job.status.replicated_jobs_status}
        return all(ready.get(rj.name, 0) >= rj.replicas for rj in job.spec.replicated_jobs)

    def _with_templates(self, job: JobSet, infos: Sequence[jp.PodSetInfo], *, restore: bool) -> JobSet:
        by_name = {i.name: i for i in infos}
        rjs = []
        for rj in job.spec.replicated_jobs:
            info = by_name.get(rj.name)
            if info is None:
                rjs.append(rj)
                continue
            t = rj.template.spec.template
            t = template_restored(t, info) if restore else template_with(t, info)
            rjs.append(replace(rj, template=replace(rj.template, spec=replace(rj.template.spec, template=t))))
        return replace(job, spec=replace(job.spec, replicated_jobs=tuple(rjs)))

    def run(self, job: JobSet, infos: Sequence[jp.PodSetInfo]) -> Action | None:
        if not self.is_suspended(job):
            return None
        started = self._with_templates(job, infos, restore=False)
        return json_patch_write("jobset", job, _ops(job, started, suspend=False), status=False,
                                why="start: admitted")

    def stop(self, job: JobSet, originals: Sequence[jp.PodSetInfo] | None) -> Action | None:
        stopped = self._with_templates(job, originals, restore=True) if originals is not None else job
        return json_patch_write("jobset", job, _ops(job, stopped, suspend=True), status=False,
                                why="stop: suspend and restore templates")


def _ops(old: JobSet, new: JobSet, *, suspend: bool) -> list[dict[str, Any]]:
    """JSON patch ops for what changed: each replicated Job's pod-template metadata and scheduling
    directives, by index, and spec.suspend; the rest of each entry (fields kq does not model)
    is left as the API server has it."""
    ops: list[dict[str, Any]] = []
    for i, (a, b) in enumerate(zip(old.spec.replicated_jobs, new.spec.replicated_jobs, strict=True)):
        ops += template_ops(f"/spec/replicatedJobs/{i}/template/spec/template", a.template.spec.template,
                            b.template.spec.template)
    if (old.spec.suspend is True) != suspend:
        ops.append({"op": "add", "path": "/spec/suspend", "value": suspend})
    return ops

