"""Kubeflow training jobs through the adapter: pkg/controller/jobs/kubeflow (PyTorchJob, TFJob, XGBoostJob,
PaddleJob, JAXJob, kubeflow.org/v1) and pkg/controller/jobs/mpijob (MPIJob, kubeflow.org/v2beta1).

All share one shape: a map of replica specs (`pytorchReplicaSpecs`, `mpiReplicaSpecs`, ...) and
`runPolicy.suspend`. One podset per replica type present, in the kind's fixed order, named after
the type in lower case, `replicas` pods (1 when unset). Admission unsuspends with each podset's
directives merged into its replica template; stopping suspends and restores them (JSON patches by
map key, so what kq does not model stays). Finished on a Succeeded or Failed condition; active while
a replica type has active pods; pods ready once the Running condition is True.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from msgspec.structs import replace

from kq.api.constants import MULTIKUEUE_MANAGED_BY
from kq.api.kueue import PodSet
from kq.api.meta import ObjectMeta
from kq.api.training import KUBEFLOW_REPLICA_FIELDS, KubeflowJob, ReplicaSpec, RunPolicy
from services.watcher.core import job_pods as jp
from services.watcher.core.adapter import (
    Adapter,
    PodSetCountMismatch,
    pointer,
    template_ops,
    template_restored,
    template_with,
)
from services.watcher.core.writes import Action, json_patch_write

KUBEFLOW_CONTROLLER = "kubeflow.org/training-operator"
MPI_CONTROLLER = "kubeflow.org/mpi-operator"


def _replicas(rs: ReplicaSpec) -> int:
    return rs.replicas if rs.replicas is not None else 1


def _condition(job: KubeflowJob, type_: str) -> bool:
    return any(c.type == type_ and c.status == "True" for c in job.status.conditions)


class KubeflowAdapter(Adapter[KubeflowJob]):
    """The shared part; a subclass per kind names it (the kinds differ only in their replica specs field
    and order)."""

    def __init__(self) -> None:
        self._attr, self._field, self._order = KUBEFLOW_REPLICA_FIELDS[self.kind]

    def token(self) -> str:
        return self.kind.lower()

    def specs(self, job: KubeflowJob) -> dict[str, ReplicaSpec]:
        return getattr(job.spec, self._attr) or {}

    def replica_types(self, job: KubeflowJob) -> list[str]:
        """OrderedReplicaTypes: the kind's replica types the job has."""
        specs = self.specs(job)
        return [t for t in self._order if t in specs]

    def meta(self, job: KubeflowJob) -> ObjectMeta:
        return job.metadata

    def pod_sets(self, job: KubeflowJob) -> tuple[PodSet, ...]:
        specs = self.specs(job)
        return tuple(PodSet(name=t.lower(), template=specs[t].template, count=_replicas(specs[t]))
                     for t in self.replica_types(job))

    def pod_priority_class(self, job: KubeflowJob) -> str:
        rp = job.spec.run_policy
        if rp is not None and rp.scheduling_policy is not None and rp.scheduling_policy.priority_class:
            return rp.scheduling_policy.priority_class
        specs = self.specs(job)
        return next((n for t in self.replica_types(job) if (n := specs[t].template.spec.priority_class_name)), "")

    def is_suspended(self, job: KubeflowJob) -> bool:
        return job.spec.run_policy is not None and job.spec.run_policy.suspend is True

    def is_active(self, job: KubeflowJob) -> bool:
        return any(s.active for s in job.status.replica_statuses.values())

    def finished(self, job: KubeflowJob) -> tuple[bool, bool, str]:
        for c in job.status.conditions:
            if c.type in ("Succeeded", "Failed") and c.status == "True":
                return True, c.type == "Succeeded", c.message
        return False, True, ""

    def pods_ready(self, job: KubeflowJob) -> bool:
        return _condition(job, "Running")

    def _templates(self, job: KubeflowJob, infos: Sequence[jp.PodSetInfo], *, restore: bool) -> KubeflowJob:
        types = self.replica_types(job)
        if len(infos) != len(types):
            raise PodSetCountMismatch(f"expecting {len(types)} podsets, got {len(infos)}")
        specs = dict(self.specs(job))
        for t, info in zip(types, infos, strict=True):
            tmpl = specs[t].template
            merged = template_restored(tmpl, info) if restore else template_with(tmpl, info)
            specs[t] = replace(specs[t], template=merged)
        return replace(job, spec=replace(job.spec, **{self._attr: specs}))

    def _ops(self, old: KubeflowJob, new: KubeflowJob, suspend: bool) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        a, b = self.specs(old), self.specs(new)
        for t in self.replica_types(old):
            ops += template_ops(pointer("spec", self._field, t, "template"), a[t].template, b[t].template)
        if self.is_suspended(old) != suspend:
            if old.spec.run_policy is None:
                ops.append({"op": "add", "path": "/spec/runPolicy", "value": {"suspend": suspend}})
            else:
                ops.append({"op": "add", "path": "/spec/runPolicy/suspend", "value": suspend})
        return ops

    def run(self, job: KubeflowJob, infos: Sequence[jp.PodSetInfo]) -> Action | None:
        if not self.is_suspended(job):
            return None
        started = self._templates(job, infos, restore=False)
        return json_patch_write(self.token(), job, self._ops(job, started, suspend=False), status=False,
                                why="start: admitted")

    def stop(self, job: KubeflowJob, originals: Sequence[jp.PodSetInfo] | None) -> Action | None:
        stopped = job
        if originals is not None and len(originals) == len(self.replica_types(job)):
            stopped = self._templates(job, originals, restore=True)  # else RestorePodSetsInfo skips, as Kueue's
        return json_patch_write(self.token(), job, self._ops(job, stopped, suspend=True), status=False,
                                why="stop: suspend and restore templates")


def managed_elsewhere(job: KubeflowJob) -> bool:
    """A job another controller runs is not reconciled here; one MultiKueue manages is queued on
    the manager (the dispatcher runs its copy on a worker)."""
    rp = job.spec.run_policy or RunPolicy()
    return rp.managed_by not in (None, "", KUBEFLOW_CONTROLLER, MPI_CONTROLLER, MULTIKUEUE_MANAGED_BY)


class PyTorchJobAdapter(KubeflowAdapter):
    framework: ClassVar[str] = "kubeflow.org/pytorchjob"
    kind: ClassVar[str] = "PyTorchJob"
    api_version: ClassVar[str] = "kubeflow.org/v1"


class TFJobAdapter(KubeflowAdapter):
    framework: ClassVar[str] = "kubeflow.org/tfjob"
    kind: ClassVar[str] = "TFJob"
    api_version: ClassVar[str] = "kubeflow.org/v1"


class XGBoostJobAdapter(KubeflowAdapter):
    framework: ClassVar[str] = "kubeflow.org/xgboostjob"
    kind: ClassVar[str] = "XGBoostJob"
    api_version: ClassVar[str] = "kubeflow.org/v1"


class PaddleJobAdapter(KubeflowAdapter):
    framework: ClassVar[str] = "kubeflow.org/paddlejob"
    kind: ClassVar[str] = "PaddleJob"
    api_version: ClassVar[str] = "kubeflow.org/v1"


class JAXJobAdapter(KubeflowAdapter):
    framework: ClassVar[str] = "kubeflow.org/jaxjob"
    kind: ClassVar[str] = "JAXJob"
    api_version: ClassVar[str] = "kubeflow.org/v1"


class MPIJobAdapter(KubeflowAdapter):
    framework: ClassVar[str] = "kubeflow.org/mpijob"
    kind: ClassVar[str] = "MPIJob"
    api_version: ClassVar[str] = "kubeflow.org/v2beta1"


KUBEFLOW_ADAPTERS: tuple[KubeflowAdapter, ...] = (PyTorchJobAdapter(), TFJobAdapter(), XGBoostJobAdapter(),
                                                  PaddleJobAdapter(), JAXJobAdapter(), MPIJobAdapter())
