"""Kubeflow Trainer's TrainJob (trainer.kubeflow.org/v1alpha1) through the adapter: pkg/controller/jobs/trainjob.

A TrainJob runs the JobSet its runtime (a ClusterTrainingRuntime, or a TrainingRuntime in its
namespace) describes, with the TrainJob's trainer settings applied: `numNodes` (else the runtime's
`mlPolicy.numNodes`) as parallelism and completions of the replicated Job labelled
`trainer.kubeflow.org/trainjob-ancestor-step: trainer`, and `image`, `command`, `args`,
`resourcesPerNode` on its trainer container (`node`, else its first). Its podsets are that JobSet's
(one per replicated Job). Admission unsuspends it with the podsets' directives written into its
runtime patch managed by Kueue (`kueue.x-k8s.io/manager`, one replicatedJobs patch per podset), which
the Trainer applies to the JobSet; stopping suspends it and empties that patch. Finished on its Complete
or Failed condition; active while a child Job is; pods ready when every replicated Job's replicas are.
The view is the TrainJob with its runtime (None while the runtime is missing: no Workload yet).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import msgspec
from msgspec.structs import replace

from kq.api.constants import MULTIKUEUE_MANAGED_BY
from kq.api.core import JobSet, JobSetSpec, PodTemplateSpec, ReplicatedJob
from kq.api.kueue import PodSet
from kq.api.meta import ObjectMeta, finished_condition
from kq.api.training import (
    JobSetSpecPatch,
    JobSetTemplatePatch,
    JobSpecPatch,
    JobTemplatePatch,
    PodSpecPatch,
    PodTemplatePatch,
    ReplicatedJobPatch,
    RuntimePatch,
    TrainingRuntimeSpec,
    TrainingRuntimeSpecPatch,
    TrainJob,
)
from services.watcher.core import job_pods as jp
from services.watcher.core.adapter import Adapter, PodSetCountMismatch
from services.watcher.core.frameworks.jobset import JobSetAdapter
from services.watcher.core.job_pods import WorkloadBuildError
from services.watcher.core.writes import Action, json_patch_write

KUEUE_MANAGER = "kueue.x-k8s.io/manager"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
_JOBSET = JobSetAdapter()


class TrainJobView(msgspec.Struct, frozen=True, kw_only=True):
    job: TrainJob
    runtime: TrainingRuntimeSpec | None  # None: the runtime it names does not exist (yet)


def _trainer_template(t: PodTemplateSpec, job: TrainJob) -> PodTemplateSpec:
    trainer = job.spec.trainer
    if trainer is None or not t.spec.containers:
        return t
    containers = list(t.spec.containers)
    i = next((n for n, c in enumerate(containers) if c.name == "node"), 0)
    c = containers[i]
    if trainer.image is not None:
        c = replace(c, image=trainer.image)
    if trainer.command is not None:
        c = replace(c, command=trainer.command)
    if trainer.args is not None:
        c = replace(c, args=trainer.args)
    if trainer.resources_per_node is not None:
        c = replace(c, resources=trainer.resources_per_node)
    containers[i] = c
    return replace(t, spec=replace(t.spec, containers=tuple(containers)))


def _patched(t: PodTemplateSpec, patches: Sequence[ReplicatedJobPatch], name: str) -> PodTemplateSpec:
    """The runtime patches' metadata and scheduling directives for replicated Job `name`, in order."""
    for p in patches:
        tp = p.template.spec.template if p.name == name and p.template and p.template.spec else None
        if tp is None:
            continue
        if tp.metadata is not None:
            t = replace(t, metadata=replace(t.metadata, labels={**t.metadata.labels, **tp.metadata.labels},
                                            annotations={**t.metadata.annotations, **tp.metadata.annotations}))
        if (s := tp.spec) is not None:
            t = replace(t, spec=replace(
                t.spec, node_selector={**t.spec.node_selector, **(s.node_selector or {})},
                tolerations=(*t.spec.tolerations, *(s.tolerations or ())),
                scheduling_gates=(*t.spec.scheduling_gates, *(s.scheduling_gates or ()))))
    return t


def child_jobset(view: TrainJobView) -> JobSet:
    """The JobSet the Trainer makes for the TrainJob (WorkloadBuildError without its runtime)."""
    job, runtime = view.job, view.runtime
    if runtime is None:
        raise WorkloadBuildError(f"runtime {job.spec.runtime_ref.name!r} not found")
    nodes = job.spec.trainer.num_nodes if job.spec.trainer is not None else None
    if nodes is None and runtime.ml_policy is not None:
        nodes = runtime.ml_policy.num_nodes
    patches = [rj for p in job.spec.runtime_patches
               if p.training_runtime_spec and p.training_runtime_spec.template and p.training_runtime_spec.template.spec
               for rj in p.training_runtime_spec.template.spec.replicated_jobs or ()]
    rjs: list[ReplicatedJob] = []
    for rj in runtime.template.spec.replicated_jobs:
        spec = rj.template.spec
        t = spec.template
        if rj.template.metadata.labels.get(ANCESTOR_LABEL) == "trainer":
            t = _trainer_template(t, job)
            if nodes is not None:
                spec = replace(spec, parallelism=nodes, completions=nodes)
        spec = replace(spec, template=_patched(t, patches, rj.name))
        rjs.append(replace(rj, template=replace(rj.template, spec=spec)))
    return JobSet(metadata=job.metadata, spec=JobSetSpec(replicated_jobs=tuple(rjs)))


def _kueue_patch(infos: Sequence[jp.PodSetInfo] | None) -> dict[str, Any]:
    rjs = None
    if infos is not None:
        rjs = tuple(ReplicatedJobPatch(name=i.name, template=JobTemplatePatch(spec=JobSpecPatch(
            template=PodTemplatePatch(metadata=ObjectMeta(labels=dict(i.labels), annotations=dict(i.annotations)),
                                      spec=PodSpecPatch(node_selector=dict(i.node_selector), tolerations=i.tolerations,
                                                        scheduling_gates=i.scheduling_gates)))))
                    for i in infos)
    patch = RuntimePatch(manager=KUEUE_MANAGER, training_runtime_spec=TrainingRuntimeSpecPatch(
        template=JobSetTemplatePatch(spec=JobSetSpecPatch(replicated_jobs=rjs))))
    return msgspec.to_builtins(patch)  # type: ignore[no-any-return]


def _replicated_jobs(patch: RuntimePatch) -> Any:
    """A runtime patch's replicatedJobs as JSON (None when it has none)."""
    spec = patch.training_runtime_spec
    rjs = spec.template.spec.replicated_jobs if spec and spec.template and spec.template.spec else None
    return msgspec.to_builtins(rjs) if rjs else None


class TrainJobAdapter(Adapter[TrainJobView]):
    framework: ClassVar[str] = "trainer.kubeflow.org/trainjob"
    kind: ClassVar[str] = "TrainJob"
    api_version: ClassVar[str] = "trainer.kubeflow.org/v1alpha1"

    def meta(self, job: TrainJobView) -> ObjectMeta:
        return job.job.metadata

    def pod_sets(self, job: TrainJobView) -> tuple[PodSet, ...]:
        return _JOBSET.pod_sets(child_jobset(job))

    def waiting_reason(self, job: TrainJobView) -> str | None:
        if job.runtime is None:
            return f"CannotCreateWorkload: runtime {job.job.spec.runtime_ref.name!r} not found"
        return None

    def equivalent(self, job: TrainJobView, wl: Any) -> bool:
        return job.runtime is None or super().equivalent(job, wl)

    def is_suspended(self, job: TrainJobView) -> bool:
        return job.job.spec.suspend is True

    def is_active(self, job: TrainJobView) -> bool:
        return any(s.active > 0 for s in job.job.status.jobs_status)

    def finished(self, job: TrainJobView) -> tuple[bool, bool, str]:
        return finished_condition(job.job.status.conditions, "Complete")

    def pods_ready(self, job: TrainJobView) -> bool:
        if job.runtime is None:
            return False
        want = sum(rj.replicas for rj in child_jobset(job).spec.replicated_jobs)
        return sum(s.ready + s.succeeded for s in job.job.status.jobs_status) >= want

    def _ops(self, job: TrainJob, infos: Sequence[jp.PodSetInfo] | None, suspend: bool) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        value = _kueue_patch(infos)
        want = value["trainingRuntimeSpec"]["template"]["spec"].get("replicatedJobs")
        at = next((i for i, p in enumerate(job.spec.runtime_patches) if p.manager == KUEUE_MANAGER), None)
        if at is None:
            if job.spec.runtime_patches:
                ops.append({"op": "add", "path": "/spec/runtimePatches/-", "value": value})
            else:
                ops.append({"op": "add", "path": "/spec/runtimePatches", "value": [value]})
        elif _replicated_jobs(job.spec.runtime_patches[at]) != want:
            ops.append({"op": "replace", "path": f"/spec/runtimePatches/{at}", "value": value})
        if (job.spec.suspend is True) != suspend:
            ops.append({"op": "add", "path": "/spec/suspend", "value": suspend})
        return ops

    def run(self, job: TrainJobView, infos: Sequence[jp.PodSetInfo]) -> Action | None:
        if not self.is_suspended(job):
            return None
        n = len(child_jobset(job).spec.replicated_jobs)
        if len(infos) != n:
            raise PodSetCountMismatch(f"expecting {n} podsets, got {len(infos)}")
        return json_patch_write("trainjob", job.job, self._ops(job.job, infos, suspend=False), status=False,
                                why="start: admitted")

    def stop(self, job: TrainJobView, originals: Sequence[jp.PodSetInfo] | None) -> Action | None:
        # RestorePodSetsInfo: Kueue's runtime patch loses its replicatedJobs.
        return json_patch_write("trainjob", job.job, self._ops(job.job, None, suspend=True), status=False,
                                why="stop: suspend and clear Kueue's runtime patch")


def managed_elsewhere(job: TrainJob) -> bool:
    return job.spec.managed_by not in (None, "", TRAINER_CONTROLLER, MULTIKUEUE_MANAGED_BY)
