"""AppWrapper (workload.codeflare.dev/v1beta2) through the adapter: pkg/controller/jobs/appwrapper.

Its podsets are its components' podSets (declared, else inferred for the kinds the AppWrapper project
knows: kq.api.appwrapper), in order, named `<appwrapper>-<index>`, each the pod template at its path
with `replicas` pods. Admission writes each component's podSetInfos (the admission's labels,
annotations, node selector, tolerations, scheduling gates, which the AppWrapper controller puts on
the wrapped objects) and unsuspends; stopping suspends and clears them. Active while QuotaReserved is
True (the controller holds resources), finished on phase Succeeded, or Failed once its resources are
gone; pods ready on its PodsReady condition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import msgspec

from kq.api.appwrapper import AppWrapper, AppWrapperPodSetInfo, PodSetPathError, component_pod_sets, value_at
from kq.api.constants import MULTIKUEUE_MANAGED_BY
from kq.api.core import PodTemplateSpec
from kq.api.fields import normalise_quantities
from kq.api.kueue import PodSet
from kq.api.meta import ObjectMeta
from services.watcher.core import job_pods as jp
from services.watcher.core.adapter import Adapter, PodSetCountMismatch
from services.watcher.core.writes import Action, json_patch_write

APPWRAPPER_CONTROLLER = "workload.codeflare.dev/appwrapper-controller"


def _condition(aw: AppWrapper, type_: str) -> bool:
    return any(c.type == type_ and c.status == "True" for c in aw.status.conditions)


def _pod_set_counts(aw: AppWrapper) -> list[int]:
    return [len(component_pod_sets(c)) for c in aw.spec.components]


class AppWrapperAdapter(Adapter[AppWrapper]):
    framework: ClassVar[str] = "workload.codeflare.dev/appwrapper"
    kind: ClassVar[str] = "AppWrapper"
    api_version: ClassVar[str] = "workload.codeflare.dev/v1beta2"

    def meta(self, job: AppWrapper) -> ObjectMeta:
        return job.metadata

    def pod_sets(self, job: AppWrapper) -> tuple[PodSet, ...]:
        out: list[PodSet] = []
        for component in job.spec.components:
            for ps in component_pod_sets(component):
                try:
                    raw = value_at({"template": component.template}, ps.path)
                    # A raw template keeps quantities as written (`cpu: 1`): made strings, as for typed fields.
                    raw, _ = normalise_quantities(raw, PodTemplateSpec) if isinstance(raw, dict) else (raw, [])
                    template = msgspec.convert(raw, PodTemplateSpec)
                except (PodSetPathError, msgspec.ValidationError):
                    continue  # as GetComponentPodSpecs: a path that leads to no pod template is skipped
                out.append(PodSet(name=f"{job.metadata.name}-{len(out)}", template=template,
                                  count=ps.replicas if ps.replicas is not None else 1))
        return tuple(out)

    def is_suspended(self, job: AppWrapper) -> bool:
        return job.spec.suspend

    def is_active(self, job: AppWrapper) -> bool:
        return _condition(job, "QuotaReserved")

    def finished(self, job: AppWrapper) -> tuple[bool, bool, str]:
        if job.status.phase == "Succeeded":
            return True, True, "AppWrapper finished successfully"
        if job.status.phase == "Failed" and not _condition(job, "ResourcesDeployed"):
            return True, False, "AppWrapper failed"
        return False, False, ""

    def pods_ready(self, job: AppWrapper) -> bool:
        return _condition(job, "PodsReady")

    def _ops(self, job: AppWrapper, infos: Sequence[jp.PodSetInfo] | None, suspend: bool) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        counts = _pod_set_counts(job)
        if infos is not None and len(infos) != sum(counts):
            raise PodSetCountMismatch(f"expecting {sum(counts)} podsets, got {len(infos)}")
        at = 0
        for i, (component, n) in enumerate(zip(job.spec.components, counts, strict=True)):
            want: tuple[AppWrapperPodSetInfo, ...] = ()
            if infos is not None:
                want = tuple(AppWrapperPodSetInfo(annotations=dict(x.annotations), labels=dict(x.labels),
                                                  node_selector=dict(x.node_selector), tolerations=x.tolerations,
                                                  scheduling_gates=x.scheduling_gates) for x in infos[at:at + n])
            at += n
            if component.pod_set_infos != want:
                ops.append({"op": "add", "path": f"/spec/components/{i}/podSetInfos",
                            "value": msgspec.to_builtins(want)})
        if job.spec.suspend != suspend:
            ops.append({"op": "add", "path": "/spec/suspend", "value": suspend})
        return ops

    def run(self, job: AppWrapper, infos: Sequence[jp.PodSetInfo]) -> Action | None:
        if not self.is_suspended(job):
            return None
        return json_patch_write("appwrapper", job, self._ops(job, infos, suspend=False), status=False,
                                why="start: admitted")

    def stop(self, job: AppWrapper, originals: Sequence[jp.PodSetInfo] | None) -> Action | None:
        return json_patch_write("appwrapper", job, self._ops(job, None, suspend=True), status=False,
                                why="stop: suspend and clear podSetInfos")


def managed_elsewhere(job: AppWrapper) -> bool:
    return job.spec.managed_by not in (None, "", APPWRAPPER_CONTROLLER, MULTIKUEUE_MANAGED_BY)
