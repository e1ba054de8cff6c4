"""Plain Pods and pod groups through the adapter: pkg/controller/jobs/pod.

A queued pod is created with the `kueue.x-k8s.io/admission` scheduling gate (Kueue's
pod webhook; kubesim applies it, as the cluster's admission would). A pod alone is
one Workload with one podset "main"; pods sharing `kueue.x-k8s.io/pod-group-name`
are one Workload named after the group, created once all
`kueue.x-k8s.io/pod-group-total-count` members exist, with one podset per role
(pods whose specs are alike). Admission removes the gate and adds the flavor's node
selector and tolerations, one pod per write; stopping deletes the pods that run
(Kueue's Stop). A group whose pods carry `kueue.x-k8s.io/pod-group-serving: "true"`
(a StatefulSet's, a LeaderWorkerSet group) never finishes; others finish once every member has
ended. With `kueue.x-k8s.io/pod-group-fast-admission: "true"` (a StatefulSet's, whose pods come one
by one) the group is queued whole from its first pod.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import ClassVar

import msgspec
from msgspec.structs import replace

from kq.api.core import Pod, PodTemplateSpec
from kq.api.kueue import PodSet
from kq.api.meta import ObjectMeta, OwnerReference
from services.watcher.core import job_pods as jp
from services.watcher.core.adapter import Adapter, PodSetCountMismatch, template_with, workload_name_for
from services.watcher.core.writes import Action, Delete, patch_write

ADMISSION_GATE = "kueue.x-k8s.io/admission"
GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
GROUP_SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving"
GROUP_FAST_ADMISSION_ANNOTATION = "kueue.x-k8s.io/pod-group-fast-admission"
# Pods these controllers own are queued through their owner's integration, not as pods.
OWNED_ELSEWHERE = frozenset({"Job", "JobSet", "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob",
                             "RayJob", "RayCluster", "TrainJob", "AppWrapper"})
_TERMINAL = ("Succeeded", "Failed")


class PodGroup(msgspec.Struct, frozen=True, kw_only=True):
    """What the watcher hands the adapter: one queued pod, or the members of one pod group."""

    namespace: str
    name: str  # the pod's name, or the group's
    group: bool
    pods: tuple[Pod, ...]  # sorted by name


def group_name(pod: Pod) -> str:
    return pod.metadata.labels.get(GROUP_NAME_LABEL, "")


def is_queued_pod(pod: Pod) -> bool:
    """Managed by the pod integration: gated by Kueue at creation, or labelled and owned by nobody
    that has its own integration."""
    ref = pod.metadata.controller_ref()
    if ref is not None and ref.kind in OWNED_ELSEWHERE:
        return False
    return is_gated(pod) or bool(pod.metadata.labels.get("kueue.x-k8s.io/queue-name"))


def is_gated(pod: Pod) -> bool:
    return any(g.name == ADMISSION_GATE for g in pod.spec.scheduling_gates)


def _terminal(pod: Pod) -> bool:
    return pod.status.phase in _TERMINAL


def _serving(job: PodGroup) -> bool:
    return job.group and bool(job.pods) and job.pods[0].metadata.annotations.get(GROUP_SERVING_ANNOTATION) == "true"


def _fast(job: PodGroup) -> bool:
    """Kueue's fast admission: the group is queued whole from its first pod (a StatefulSet's)."""
    first = job.pods[0].metadata.annotations if job.pods else {}
    return job.group and first.get(GROUP_FAST_ADMISSION_ANNOTATION) == "true"


def _role(pod: Pod) -> str:
    """Kueue's role hash: pods with the same shape share a podset."""
    spec = pod.spec
    shape = msgspec.json.encode([
        [(c.name, c.image, msgspec.to_builtins(c.resources)) for c in spec.init_containers],
        [(c.name, c.image, msgspec.to_builtins(c.resources)) for c in spec.containers],
        sorted(spec.node_selector.items()), msgspec.to_builtins(spec.tolerations), spec.priority_class_name,
    ])
    return hashlib.sha256(shape).hexdigest()[:8]


def _template(pod: Pod) -> PodTemplateSpec:
    gates = tuple(g for g in pod.spec.scheduling_gates if g.name != ADMISSION_GATE)
    meta = ObjectMeta(labels=dict(pod.metadata.labels), annotations=dict(pod.metadata.annotations))
    return PodTemplateSpec(metadata=meta, spec=replace(pod.spec, node_name="", scheduling_gates=gates))


class PodAdapter(Adapter[PodGroup]):
    framework: ClassVar[str] = "pod"
    kind: ClassVar[str] = "Pod"
    api_version: ClassVar[str] = "v1"

    def meta(self, job: PodGroup) -> ObjectMeta:
        first = job.pods[0].metadata if job.pods else ObjectMeta()
        deleting = first.deletion_timestamp if not job.group else None
        return ObjectMeta(name=job.name, namespace=job.namespace, uid="" if job.group else first.uid,
                          labels=dict(first.labels), annotations=dict(first.annotations),
                          deletion_timestamp=deleting)

    def total_count(self, job: PodGroup) -> int | str:
        """The group's declared size, or why it has none."""
        values = {p.metadata.annotations.get(GROUP_TOTAL_COUNT_ANNOTATION) for p in job.pods}
        if len(values) != 1:
            shown = ", ".join(sorted(repr(v) for v in values))
            return (f"PodGroupTotalCountMismatch: members of group {job.name!r} disagree on "
                    f"{GROUP_TOTAL_COUNT_ANNOTATION}: {shown}")
        raw = values.pop()
        try:
            total = int(raw or "")
        except ValueError:
            return f"InvalidPodGroupTotalCount: {GROUP_TOTAL_COUNT_ANNOTATION} must be an integer, got {raw!r}"
        if total < 1:
            return f"InvalidPodGroupTotalCount: {GROUP_TOTAL_COUNT_ANNOTATION} must be at least 1, got {total}"
        return total

    def waiting_reason(self, job: PodGroup) -> str | None:
        if not job.pods:
            return "NoPods"
        if not job.group:
            return None
        total = self.total_count(job)
        if isinstance(total, str):
            return total
        live = [p for p in job.pods if p.metadata.deletion_timestamp is None]
        if len(live) < total and not (live and _fast(job)):
            return f"WaitingForPodGroup: {len(live)} of {total} pods of group {job.name!r} exist"
        if len(live) > total:
            return f"PodGroupTooBig: {len(live)} pods in group {job.name!r}, {GROUP_TOTAL_COUNT_ANNOTATION} is {total}"
        return None

    def workload_name(self, job: PodGroup) -> str:
        if job.group:
            return job.name
        return workload_name_for("Pod", "v1", job.name, job.pods[0].metadata.uid)

    def owner_references(self, job: PodGroup) -> tuple[OwnerReference, ...]:
        owners = {r.uid: r for p in job.pods if (r := p.metadata.controller_ref()) is not None}
        if job.group and len(owners) == 1 and len(job.pods) == sum(1 for p in job.pods if p.metadata.controller_ref()):
            # A StatefulSet's group: its pods come and go, the StatefulSet stays.
            ref = next(iter(owners.values()))
            return (replace(ref, controller=True, block_owner_deletion=True),)
        return tuple(
            OwnerReference(api_version="v1", kind="Pod", name=p.metadata.name, uid=p.metadata.uid,
                           controller=i == 0, block_owner_deletion=True)
            for i, p in enumerate(job.pods)
        )

    def owns(self, wl: object, job: PodGroup) -> bool:
        return True  # found by name (groups) or by the pod's uid (single pods): see the shell

    def pod_sets(self, job: PodGroup) -> tuple[PodSet, ...]:
        if not job.group:
            return (PodSet(name="main", template=_template(job.pods[0]), count=1),) if job.pods else ()
        total = self.total_count(job)
        live = [p for p in job.pods if p.metadata.deletion_timestamp is None]
        if _fast(job) and isinstance(total, int) and live:
            # Fast admission: the whole group from its first pod (all its pods are alike).
            return (PodSet(name=_role(live[0]), template=_template(live[0]), count=total),)
        roles: dict[str, list[Pod]] = {}
        for p in job.pods:
            if p.metadata.deletion_timestamp is None:
                roles.setdefault(_role(p), []).append(p)
        return tuple(PodSet(name=r, template=_template(ps[0]), count=len(ps)) for r, ps in sorted(roles.items()))

    def equivalent(self, job: PodGroup, wl: object) -> bool:
        return True  # a pod's spec cannot change; a group's members are checked before the Workload

    def is_suspended(self, job: PodGroup) -> bool:
        return any(is_gated(p) for p in job.pods)

    def is_active(self, job: PodGroup) -> bool:
        return any(not is_gated(p) and not _terminal(p) for p in job.pods)

    def finished(self, job: PodGroup) -> tuple[bool, bool, str]:
        if not job.pods:
            return False, True, ""
        if job.group:
            if _serving(job):
                return False, True, ""
            total = self.total_count(job)
            ended = [p for p in job.pods if _terminal(p) and p.metadata.deletion_timestamp is None]  # not stopped by us
            if isinstance(total, str) or len(ended) < total:
                return False, True, ""
            failed = [p.metadata.name for p in ended if p.status.phase == "Failed"]
            if failed:
                return True, False, f"pods failed: {', '.join(failed)}"
            return True, True, "pods succeeded"
        pod = job.pods[0]
        if _terminal(pod):
            ok = pod.status.phase == "Succeeded"
            return True, ok, pod.status.message or ("pod succeeded" if ok else "pod failed")
        return False, True, ""

    def pods_ready(self, job: PodGroup) -> bool:
        return bool(job.pods) and all(
            p.status.phase == "Succeeded"
            or any(c.type == "Ready" and c.status == "True" for c in p.status.conditions)
            for p in job.pods
        )

    def run(self, job: PodGroup, infos: Sequence[jp.PodSetInfo]) -> Action | None:
        by_name = {i.name: i for i in infos}
        for pod in job.pods:
            if not is_gated(pod) or pod.metadata.deletion_timestamp is not None:
                continue
            info = by_name.get("main" if not job.group else _role(pod))
            if info is None:
                raise PodSetCountMismatch(f"pod {pod.metadata.name!r} matches no admitted podset")
            # A pod may only lose gates: the admission's own gates (TAS) do not apply to pods here.
            info = replace(info, scheduling_gates=())
            t = template_with(PodTemplateSpec(metadata=pod.metadata, spec=pod.spec), info)
            gates = tuple(g for g in t.spec.scheduling_gates if g.name != ADMISSION_GATE)
            started = replace(pod, metadata=t.metadata, spec=replace(t.spec, scheduling_gates=gates))
            return patch_write("pod", pod, started, status=False, why=f"ungate: admitted ({job.name})")
        return None

    def stop(self, job: PodGroup, originals: Sequence[jp.PodSetInfo] | None) -> Action | None:
        for pod in job.pods:
            if is_gated(pod) or _terminal(pod) or pod.metadata.deletion_timestamp is not None:
                continue
            return Delete(kind="pod", namespace=pod.metadata.namespace, name=pod.metadata.name,
                          uid=pod.metadata.uid, resource_version=pod.metadata.resource_version,
                          why=f"stop: pod of {job.name} runs without admission")
        return None
