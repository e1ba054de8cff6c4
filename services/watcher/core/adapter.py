"""The job-framework adapter: what Kueue's GenericJob is, for kq (pkg/controller/jobframework/interface.go).

A framework (JobSet, plain Pods and pod groups, ...) is one `Adapter` subclass in
core/frameworks/: it says how its object looks to Kueue (pod sets, suspended,
active, finished, pods ready) and which single write moves it towards running
with an admission's pod set infos, or towards stopped with its original pod set
infos restored. The generic reconciler (core/generic.py) decides when; the shell
(services/watcher/frameworks.py) applies one write at a time and asks again.

Also here: what every framework shares when it builds its Workload (name, owner,
priority, podsets) and turns an admission into per-podset infos.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import msgspec
from msgspec.structs import replace

from kq.api import constants as k
from kq.api.core import PodTemplateSpec, PriorityClass
from kq.api.kueue import PodSet, PriorityClassRef, ResourceFlavor, Workload, WorkloadPriorityClass, WorkloadSpec
from kq.api.meta import ObjectMeta, OwnerReference
from services.watcher.core import job_pods as jp
from services.watcher.core.job_pods import PodSetInfo, WorkloadBuildError
from services.watcher.core.writes import Action

T = TypeVar("T")

_NAME_HASH_LEN = 5
_MAX_WORKLOAD_NAME = 253


class PodSetCountMismatch(jp.PodSetConflict):
    """The admission has another number of podsets than the object runs."""


class Adapter(ABC, Generic[T]):
    """One job framework. `T` is what the watcher hands the adapter: the object (a JobSet) or a
    view of several (a pod group). Every method is pure."""

    framework: ClassVar[str]  # Kueue's integrations.frameworks name: "jobset.x-k8s.io/jobset"
    kind: ClassVar[str]  # the owner kind of its Workloads: "JobSet"
    api_version: ClassVar[str]  # "jobset.x-k8s.io/v1alpha2"

    @abstractmethod
    def meta(self, job: T) -> ObjectMeta:
        """Name, namespace, uid, labels and annotations as Kueue reads them (queue name, priority)."""

    @abstractmethod
    def pod_sets(self, job: T) -> tuple[PodSet, ...]:
        """GenericJob.PodSets."""

    @abstractmethod
    def is_suspended(self, job: T) -> bool:
        """Waiting for admission (a suspended JobSet, gated pods)."""

    @abstractmethod
    def is_active(self, job: T) -> bool:
        """Some pod may still be running (an eviction waits for this to be False)."""

    @abstractmethod
    def finished(self, job: T) -> tuple[bool, bool, str]:
        """(finished, succeeded, message)."""

    @abstractmethod
    def pods_ready(self, job: T) -> bool:
        """Every admitted pod is ready (waitForPodsReady)."""

    @abstractmethod
    def run(self, job: T, infos: Sequence[PodSetInfo]) -> Action | None:
        """The next write of RunWithPodSetsInfo (unsuspend with the admission's directives); None once
        it runs. Raises jp.PodSetConflict when the directives clash with the object's own."""

    @abstractmethod
    def stop(self, job: T, originals: Sequence[PodSetInfo] | None) -> Action | None:
        """The next write of Stop + RestorePodSetsInfo (None when stopped with its templates restored).
        `originals` are the Workload's podsets (None when there is no Workload yet)."""

    # --- shared defaults, overridable ---

    def workload(self, job: T, classes: Mapping[str, WorkloadPriorityClass],
                 pod_classes: Mapping[str, PriorityClass]) -> Workload:
        """The Workload the object gets (WorkloadBuildError when it cannot be built yet)."""
        return build_workload(self, job, classes, pod_classes)

    def skip(self, job: T) -> bool:
        """Not Kueue's to manage (a RayJob on an existing cluster, a RayCluster its RayJob runs)."""
        return False

    def pod_priority_class(self, job: T) -> str:
        """The PriorityClass name Kueue reads for the object: its first podset's, unless overridden."""
        pod_sets = self.pod_sets(job)
        return pod_sets[0].template.spec.priority_class_name if pod_sets else ""

    def waiting_reason(self, job: T) -> str | None:
        """Why the object cannot get its Workload yet (a pod group short of members), or None."""
        return None

    def queue_name(self, job: T) -> str:
        return self.meta(job).labels.get(k.QUEUE_NAME_LABEL, "")

    def workload_name(self, job: T) -> str:
        meta = self.meta(job)
        return workload_name_for(self.kind, self.api_version, meta.name, meta.uid)

    def owner_references(self, job: T) -> tuple[OwnerReference, ...]:
        meta = self.meta(job)
        return (OwnerReference(api_version=self.api_version, kind=self.kind, name=meta.name, uid=meta.uid,
                               controller=True, block_owner_deletion=True),)

    def owns(self, wl: Workload, job: T) -> bool:
        ref = wl.metadata.controller_ref()
        return ref is not None and ref.kind == self.kind and ref.uid == self.meta(job).uid

    def equivalent(self, job: T, wl: Workload) -> bool:
        """EquivalentToWorkload, cheaply: the same podset names and counts."""
        mine = [(p.name, p.count) for p in self.pod_sets(job)]
        theirs = [(p.name, p.count) for p in wl.spec.pod_sets]
        return mine == theirs


def workload_name_for(kind: str, api_version: str, name: str, uid: str) -> str:
    """GetWorkloadNameForOwnerWithGVK: "<kind>-<name>-<5 hex of sha1(kind, group, name, uid)>"."""
    group = api_version.rpartition("/")[0]
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode()).hexdigest()
    prefix = f"{kind.lower()}-{name}"[: _MAX_WORKLOAD_NAME - 1 - _NAME_HASH_LEN]
    return f"{prefix}-{digest[:_NAME_HASH_LEN]}"


def _priority(meta: ObjectMeta, pod_class: str, classes: Mapping[str, WorkloadPriorityClass],
              pod_classes: Mapping[str, PriorityClass]) -> tuple[PriorityClassRef | None, int]:
    """jobframework.ExtractPriority, as the Job integration does it."""
    wpc_name = meta.labels.get(k.PRIORITY_CLASS_LABEL, "")
    if wpc_name:
        wpc = classes.get(wpc_name)
        if wpc is None:
            raise WorkloadBuildError(f"WorkloadPriorityClass {wpc_name!r} not found")
        return PriorityClassRef(group=k.KUEUE_GROUP, kind="WorkloadPriorityClass", name=wpc_name), wpc.value
    if name := pod_class:
        pc = pod_classes.get(name)
        if pc is None:
            raise WorkloadBuildError(f"PriorityClass {name!r} not found")
        return PriorityClassRef(group=jp.POD_PRIORITY_GROUP, kind="PriorityClass", name=name), pc.value
    defaults = sorted((c.value, n) for n, c in pod_classes.items() if c.global_default)
    if defaults:
        value, name = defaults[0]
        return PriorityClassRef(group=jp.POD_PRIORITY_GROUP, kind="PriorityClass", name=name), value
    return None, 0


def build_workload(adapter: Adapter[Any], job: Any, classes: Mapping[str, WorkloadPriorityClass],
                   pod_classes: Mapping[str, PriorityClass]) -> Workload:
    """ConstructWorkload for any framework; WorkloadBuildError when it cannot be built yet."""
    meta = adapter.meta(job)
    pod_sets = adapter.pod_sets(job)
    if not pod_sets:
        raise WorkloadBuildError("no pod sets")
    ref, priority = _priority(meta, adapter.pod_priority_class(job), classes, pod_classes)
    max_exec: int | None = None
    if raw := meta.labels.get(k.MAX_EXEC_TIME_SECONDS_LABEL):
        try:
            max_exec = int(raw) if int(raw) > 0 else None
        except ValueError:
            max_exec = None
    return Workload(
        api_version=k.KUEUE_API_VERSION,
        kind="Workload",
        metadata=ObjectMeta(
            name=adapter.workload_name(job),
            namespace=meta.namespace,
            labels={k.JOB_UID_LABEL: meta.uid} if meta.uid else {},
            finalizers=(k.RESOURCE_IN_USE_FINALIZER,),
            owner_references=adapter.owner_references(job),
        ),
        spec=WorkloadSpec(pod_sets=pod_sets, queue_name=adapter.queue_name(job), priority_class_ref=ref,
                          priority=priority, maximum_execution_time_seconds=max_exec),
    )


def admission_infos(wl: Workload, flavors: dict[str, ResourceFlavor]) -> list[PodSetInfo]:
    """One PodSetInfo per admitted podset, in the Workload's podset order (raises jp.MissingFlavor,
    jp.PodSetConflict)."""
    admission = wl.status.admission
    assert admission is not None
    if len(admission.pod_set_assignments) != len(wl.spec.pod_sets):
        n = len(wl.spec.pod_sets)
        raise PodSetCountMismatch(f"expecting {n} podset{'' if n == 1 else 's'}, "
                                  f"got {len(admission.pod_set_assignments)}")
    by_name = {a.name: a for a in admission.pod_set_assignments}
    out: list[PodSetInfo] = []
    for ps in wl.spec.pod_sets:
        assignment = by_name.get(ps.name)
        if assignment is None:
            raise PodSetCountMismatch(f"podset {ps.name!r} has no assignment")
        out.append(jp.info_from_assignment(wl, assignment, ps, flavors))
    return out


def original_infos(wl: Workload | None) -> list[PodSetInfo] | None:
    if wl is None:
        return None
    return [jp.info_from_podset(ps) for ps in wl.spec.pod_sets]


def template_with(t: PodTemplateSpec, info: PodSetInfo) -> PodTemplateSpec:
    """The template with an admission's directives merged in (jp.PodSetConflict on a clash)."""
    own = PodSetInfo(name=info.name, count=info.count, annotations=dict(t.metadata.annotations),
                     labels=dict(t.metadata.labels), node_selector=dict(t.spec.node_selector),
                     tolerations=t.spec.tolerations, scheduling_gates=t.spec.scheduling_gates)
    merged = jp.merge_info(own, info)
    return replace(
        t,
        metadata=replace(t.metadata, annotations=merged.annotations, labels=merged.labels),
        spec=replace(t.spec, node_selector=merged.node_selector, tolerations=merged.tolerations,
                     scheduling_gates=merged.scheduling_gates),
    )


def template_ops(base: str, old: PodTemplateSpec, new: PodTemplateSpec) -> list[dict[str, Any]]:
    """JSON patch ops turning the pod template at JSON pointer `base` from `old` into `new`: its metadata and
    scheduling directives (what run/stop change); the rest of the template stays as the API server has it."""
    ops: list[dict[str, Any]] = []
    if old.metadata != new.metadata:
        ops.append({"op": "add", "path": f"{base}/metadata", "value": msgspec.to_builtins(new.metadata)})
    for field, a, b in (("nodeSelector", old.spec.node_selector, new.spec.node_selector),
                        ("tolerations", old.spec.tolerations, new.spec.tolerations),
                        ("schedulingGates", old.spec.scheduling_gates, new.spec.scheduling_gates)):
        if a != b:
            ops.append({"op": "add", "path": f"{base}/spec/{field}", "value": msgspec.to_builtins(b)})
    return ops


def pointer(*parts: str) -> str:
    """A JSON pointer from unescaped parts (a map key may hold '/' or '~')."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def template_restored(t: PodTemplateSpec, info: PodSetInfo) -> PodTemplateSpec:
    """RestorePodSetsInfo on one template: the Workload's original directives back."""
    return replace(
        t,
        metadata=replace(t.metadata, annotations=dict(info.annotations), labels=dict(info.labels)),
        spec=replace(t.spec, node_selector=dict(info.node_selector), tolerations=info.tolerations,
                     scheduling_gates=info.scheduling_gates),
    )
