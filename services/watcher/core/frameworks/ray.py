"""KubeRay's RayJob and RayCluster (ray.io/v1) through the adapter: pkg/controller/jobs/{rayjob,raycluster}.

Podsets of a Ray cluster spec: `head` (1 pod; with in-tree autoscaling its template also holds the
autoscaler sidecar KubeRay adds) and one per worker group, named after the group in lower case,
`replicas` x `numOfHosts` pods. A RayJob in K8sJobMode (the default) adds `submitter`, the pod that
runs `ray job submit` (its submitterPodTemplate, else KubeRay's default: the head's image, 500m/200Mi);
in SidecarMode the submitter container joins the head podset instead. `spec.suspend` stops and starts
both kinds; admission merges each podset's directives into its template (JSON patches by position).

RayJob: finished when jobDeploymentStatus is Complete or Failed (succeeded when jobStatus is
SUCCEEDED), active unless new or Suspended, pods ready when its cluster is ready; a RayJob on an
existing cluster (clusterSelector) is not Kueue's. RayCluster: never finishes, active and ready when
its state is ready; one its RayJob runs is left to the RayJob.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import msgspec
from msgspec.structs import replace

from kq.api.constants import MULTIKUEUE_MANAGED_BY
from kq.api.core import Container, PodSpec, PodTemplateSpec, ResourceRequirements
from kq.api.kueue import PodSet
from kq.api.meta import ObjectMeta
from kq.api.training import RayCluster, RayClusterSpec, RayJob
from services.watcher.core import job_pods as jp
from services.watcher.core.adapter import (
    Adapter,
    PodSetCountMismatch,
    template_ops,
    template_restored,
    template_with,
)
from services.watcher.core.writes import Action, json_patch_write

HEAD = "head"
SUBMITTER = "submitter"
K8S_JOB_MODE, SIDECAR_MODE = "K8sJobMode", "SidecarMode"
SUBMITTER_CONTAINER = "ray-job-submitter"
KUBERAY_CONTROLLER = "ray.io/kuberay-operator"
_SUBMITTER_RESOURCES = ResourceRequirements(requests={"cpu": "500m", "memory": "200Mi"},
                                            limits={"cpu": "1", "memory": "1Gi"})
_AUTOSCALER_RESOURCES = ResourceRequirements(requests={"cpu": "500m", "memory": "512Mi"},
                                             limits={"cpu": "500m", "memory": "512Mi"})


def cluster_pod_sets(spec: RayClusterSpec) -> list[PodSet]:
    """BuildPodSets: the head, then each worker group."""
    head = spec.head_group_spec.template
    if spec.enable_in_tree_autoscaling:
        opts = spec.autoscaler_options
        res = opts.resources if opts is not None and opts.resources is not None else _AUTOSCALER_RESOURCES
        head = replace(head, spec=replace(head.spec, containers=(*head.spec.containers,
                                                                  Container(name="autoscaler", resources=res))))
    out = [PodSet(name=HEAD, template=head, count=1)]
    for g in spec.worker_group_specs:
        count = (g.replicas if g.replicas is not None else 1) * max(g.num_of_hosts, 1)
        out.append(PodSet(name=g.group_name.lower(), template=g.template, count=count))
    return out


def _cluster_templates(spec: RayClusterSpec) -> list[PodTemplateSpec]:
    return [spec.head_group_spec.template, *(g.template for g in spec.worker_group_specs)]


def _cluster_with(spec: RayClusterSpec, templates: Sequence[PodTemplateSpec]) -> RayClusterSpec:
    head, *workers = templates
    return replace(spec, head_group_spec=replace(spec.head_group_spec, template=head),
                   worker_group_specs=tuple(replace(g, template=t)
                                            for g, t in zip(spec.worker_group_specs, workers, strict=True)))


def _merged(templates: Sequence[PodTemplateSpec], infos: Sequence[jp.PodSetInfo], *,
            restore: bool) -> list[PodTemplateSpec]:
    return [template_restored(t, i) if restore else template_with(t, i) for t, i in zip(templates, infos, strict=True)]


def _cluster_ops(base: str, old: RayClusterSpec, new: RayClusterSpec) -> list[dict[str, Any]]:
    ops = template_ops(f"{base}/headGroupSpec/template", old.head_group_spec.template, new.head_group_spec.template)
    for i, (a, b) in enumerate(zip(old.worker_group_specs, new.worker_group_specs, strict=True)):
        ops += template_ops(f"{base}/workerGroupSpecs/{i}/template", a.template, b.template)
    return ops


class RayJobAdapter(Adapter[RayJob]):
    framework: ClassVar[str] = "ray.io/rayjob"
    kind: ClassVar[str] = "RayJob"
    api_version: ClassVar[str] = "ray.io/v1"

    def meta(self, job: RayJob) -> ObjectMeta:
        return job.metadata

    def skip(self, job: RayJob) -> bool:
        return bool(job.spec.cluster_selector) or job.spec.ray_cluster_spec is None

    @staticmethod
    def _mode(job: RayJob) -> str:
        return job.spec.submission_mode or K8S_JOB_MODE

    @staticmethod
    def submitter_template(job: RayJob) -> PodTemplateSpec:
        """The submitter's pod: its template, else the one KubeRay makes."""
        if job.spec.submitter_pod_template is not None:
            return job.spec.submitter_pod_template
        spec = job.spec.ray_cluster_spec or RayClusterSpec()
        heads = spec.head_group_spec.template.spec.containers
        image = heads[0].image if heads else ""
        return PodTemplateSpec(spec=PodSpec(restart_policy="Never", containers=(
            Container(name=SUBMITTER_CONTAINER, image=image, resources=_SUBMITTER_RESOURCES),)))

    def pod_sets(self, job: RayJob) -> tuple[PodSet, ...]:
        if job.spec.ray_cluster_spec is None:
            return ()
        out = cluster_pod_sets(job.spec.ray_cluster_spec)
        if self._mode(job) == K8S_JOB_MODE:
            out.append(PodSet(name=SUBMITTER, template=self.submitter_template(job), count=1))
        elif self._mode(job) == SIDECAR_MODE:
            head = out[0].template
            sidecar = Container(name=SUBMITTER_CONTAINER, resources=_SUBMITTER_RESOURCES)
            out[0] = replace(out[0], template=replace(head, spec=replace(
                head.spec, containers=(*head.spec.containers, sidecar))))
        return tuple(out)

    def is_suspended(self, job: RayJob) -> bool:
        return job.spec.suspend

    def is_active(self, job: RayJob) -> bool:
        return job.status.job_deployment_status not in ("", "Suspended")

    def finished(self, job: RayJob) -> tuple[bool, bool, str]:
        done = job.status.job_deployment_status in ("Complete", "Failed")
        return done, job.status.job_status == "SUCCEEDED", job.status.message

    def pods_ready(self, job: RayJob) -> bool:
        return job.status.ray_cluster_status.state == "ready"

    def _ops(self, old: RayJob, infos: Sequence[jp.PodSetInfo] | None, *, restore: bool,
             suspend: bool) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        spec = old.spec.ray_cluster_spec
        k8s_job = self._mode(old) == K8S_JOB_MODE
        expected = len(spec.worker_group_specs) + 1 + int(k8s_job) if spec is not None else 0
        if infos is not None and spec is not None:
            if len(infos) != expected:
                if not restore:
                    raise PodSetCountMismatch(f"expecting {expected} podsets, got {len(infos)}")
            else:
                templates = _cluster_templates(spec)
                new = _cluster_with(spec, _merged(templates, infos[:len(templates)], restore=restore))
                ops += _cluster_ops("/spec/rayClusterSpec", spec, new)
                if k8s_job:
                    tmpl = self.submitter_template(old)
                    merged = _merged([tmpl], infos[-1:], restore=restore)[0]
                    if old.spec.submitter_pod_template is None:
                        if not restore:  # RunWithPodSetsInfo sets the defaulted template
                            ops.append({"op": "add", "path": "/spec/submitterPodTemplate",
                                        "value": msgspec.to_builtins(merged)})
                    else:
                        ops += template_ops("/spec/submitterPodTemplate", tmpl, merged)
        if old.spec.suspend != suspend:
            ops.append({"op": "add", "path": "/spec/suspend", "value": suspend})
        return ops

    def run(self, job: RayJob, infos: Sequence[jp.PodSetInfo]) -> Action | None:
        if not self.is_suspended(job):
            return None
        return json_patch_write("rayjob", job, self._ops(job, infos, restore=False, suspend=False), status=False,
                                why="start: admitted")

    def stop(self, job: RayJob, originals: Sequence[jp.PodSetInfo] | None) -> Action | None:
        return json_patch_write("rayjob", job, self._ops(job, originals, restore=True, suspend=True), status=False,
                                why="stop: suspend and restore templates")


class RayClusterAdapter(Adapter[RayCluster]):
    framework: ClassVar[str] = "ray.io/raycluster"
    kind: ClassVar[str] = "RayCluster"
    api_version: ClassVar[str] = "ray.io/v1"

    def meta(self, job: RayCluster) -> ObjectMeta:
        return job.metadata

    def skip(self, job: RayCluster) -> bool:
        ref = job.metadata.controller_ref()
        return ref is not None and ref.kind in ("RayJob", "RayService")

    def pod_sets(self, job: RayCluster) -> tuple[PodSet, ...]:
        return tuple(cluster_pod_sets(job.spec))

    def is_suspended(self, job: RayCluster) -> bool:
        return job.spec.suspend is True

    def is_active(self, job: RayCluster) -> bool:
        return job.status.state == "ready"

    def finished(self, job: RayCluster) -> tuple[bool, bool, str]:
        return False, job.status.state != "failed", job.status.reason

    def pods_ready(self, job: RayCluster) -> bool:
        return job.status.state == "ready"

    def _ops(self, old: RayCluster, infos: Sequence[jp.PodSetInfo] | None, *, restore: bool,
             suspend: bool) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        templates = _cluster_templates(old.spec)
        if infos is not None:
            if len(infos) == len(templates):
                new = _cluster_with(old.spec, _merged(templates, infos, restore=restore))
                ops += _cluster_ops("/spec", old.spec, new)
            elif not restore:
                raise PodSetCountMismatch(f"expecting {len(templates)} podsets, got {len(infos)}")
        if (old.spec.suspend is True) != suspend:
            ops.append({"op": "add", "path": "/spec/suspend", "value": suspend})
        return ops

    def run(self, job: RayCluster, infos: Sequence[jp.PodSetInfo]) -> Action | None:
        if not self.is_suspended(job):
            return None
        return json_patch_write("raycluster", job, self._ops(job, infos, restore=False, suspend=False),
                                status=False, why="start: admitted")

    def stop(self, job: RayCluster, originals: Sequence[jp.PodSetInfo] | None) -> Action | None:
        return json_patch_write("raycluster", job, self._ops(job, originals, restore=True, suspend=True),
                                status=False, why="stop: suspend and restore templates")


def ray_managed_elsewhere(managed_by: str | None) -> bool:
    return managed_by not in (None, "", KUBERAY_CONTROLLER, MULTIKUEUE_MANAGED_BY)
