"""A batch/v1 Job seen through Kueue's Job integration: its Workload, and its pod template
as admission changes it (pkg/controller/jobs/job, pkg/controller/jobframework, pkg/podset).

Pure: the Workload a queued Job gets, the per-podset scheduling directives an
admission implies (flavor node labels and tolerations, TAS gate, admission check
updates), and the pod template after merging them in or restoring the original.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Final

import msgspec
from msgspec.structs import replace

from kq.api import constants as k
from kq.api.core import Job, PodSchedulingGate, PodTemplateSpec, PriorityClass, Toleration
from kq.api.kueue import (
    PodSet,
    PodSetAssignment,
    PodSetTopologyRequest,
    PriorityClassRef,
    ResourceFlavor,
    Workload,
    WorkloadPriorityClass,
    WorkloadSpec,
)
from kq.api.meta import ObjectMeta, OwnerReference, finished_condition

STOPPING_ANNOTATION = "kueue.x-k8s.io/stopping"
PODSET_LABEL = "kueue.x-k8s.io/podset"
PODSET_GROUP_NAME_ANNOTATION = "kueue.x-k8s.io/podset-group-name"
JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
# Labels the Job controller puts on the template; kept out of the Workload (but job-name) and kept on restore.
MANAGED_LABELS = ("job-name", "controller-uid", JOB_NAME_LABEL, "batch.kubernetes.io/controller-uid")
_NAME_HASH_LEN = 5
_MAX_WORKLOAD_NAME = 253
_JOB_KIND, _JOB_GROUP, _JOB_API_VERSION = "Job", "batch", "batch/v1"

# spec.priorityClassRef of a Workload whose priority came from the pods' PriorityClass.
POD_PRIORITY_GROUP: Final = "scheduling.k8s.io"


class PodSetInfo(msgspec.Struct, frozen=True, kw_only=True):
    """podset.PodSetInfo: what admission adds to (or a Workload restores on) a pod template."""

    name: str
    count: int
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    tolerations: tuple[Toleration, ...] = ()
    scheduling_gates: tuple[PodSchedulingGate, ...] = ()


class PodSetConflict(ValueError):
    """Admission wants a label/annotation/node selector value the template already sets differently."""


# --- the Job's own shape -------------------------------------------------------------------------


def queue_name(job: Job) -> str:
    return job.metadata.labels.get(k.QUEUE_NAME_LABEL, "")


def prebuilt_workload_name(job: Job) -> str:
    """The Workload someone else built for this Job (MultiKueue workers), or ""."""
    return job.metadata.labels.get(k.PREBUILT_WORKLOAD_LABEL, "")


def is_suspended(job: Job) -> bool:
    """Job.IsSuspended: suspended, and not half-way through being stopped."""
    return job.spec.suspend is True and job.metadata.annotations.get(STOPPING_ANNOTATION) != "true"


def is_active(job: Job) -> bool:
    return job.status.active != 0


def finished(job: Job) -> tuple[bool, bool, str]:
    """(finished, succeeded, message) from the Complete/Failed conditions."""
    return finished_condition(job.status.conditions, "Complete")


def pods_count(job: Job) -> int:
    parallelism = job.spec.parallelism if job.spec.parallelism is not None else 1
    if job.spec.completions is not None and job.spec.completions < parallelism:
        return job.spec.completions
    return parallelism


def pods_ready(job: Job) -> bool:
    """Job.PodsReady: ready and succeeded pods cover the count the Job runs at once."""
    return (job.status.ready or 0) + job.status.succeeded >= pods_count(job)


def min_pods_count(job: Job) -> int | None:
    raw = job.metadata.annotations.get(k.JOB_MIN_PARALLELISM_ANNOTATION)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def sync_completions(job: Job) -> bool:
    return job.metadata.annotations.get(k.JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION, "").lower() in (
        "true",
        "1",
        "t",
    )


def workload_name(job_name: str, job_uid: str) -> str:
    """jobframework.GetWorkloadNameForOwnerWithGVK: "job-<name>-<5 hex of sha1(kind, group, name, uid)>"."""
    digest = hashlib.sha1(f"{_JOB_KIND}\n{_JOB_GROUP}\n{job_name}\n{job_uid}".encode()).hexdigest()
    prefix = f"{_JOB_KIND.lower()}-{job_name}"[: _MAX_WORKLOAD_NAME - 1 - _NAME_HASH_LEN]
    return f"{prefix}-{digest[:_NAME_HASH_LEN]}"


def owned_by(wl: Workload, job: Job) -> bool:
    ref = wl.metadata.controller_ref()
    return ref is not None and ref.kind == _JOB_KIND and ref.uid == job.metadata.uid


# --- the Workload a Job gets ---------------------------------------------------------------------


class WorkloadBuildError(ValueError):
    """The Job cannot get its Workload yet (e.g. its WorkloadPriorityClass does not exist)."""


def _topology_request(meta: ObjectMeta) -> PodSetTopologyRequest:
    """NewPodSetTopologyRequest(...).PodIndexLabel(job-completion-index).Build() for a Job."""
    ann = meta.annotations
    required = ann.get(k.PODSET_REQUIRED_TOPOLOGY_ANNOTATION)
    preferred = ann.get(k.PODSET_PREFERRED_TOPOLOGY_ANNOTATION)
    unconstrained: bool | None = None
    if required is None and preferred is None and k.PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION in ann:
        unconstrained = ann[k.PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION].lower() in ("true", "1", "t")
    if required is not None:
        preferred = None
    slice_topology = ann.get(k.PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION)
    slice_size_raw = ann.get(k.PODSET_SLICE_SIZE_ANNOTATION)
    slice_size: int | None = None
    if slice_topology is not None and slice_size_raw is not None:
        try:
            slice_size = int(slice_size_raw)
        except ValueError:
            raise WorkloadBuildError(
                f"annotation {k.PODSET_SLICE_SIZE_ANNOTATION}: not an integer: {slice_size_raw!r}"
            ) from None
    else:
        slice_topology = None
    group = ann.get(PODSET_GROUP_NAME_ANNOTATION) if (required is not None or preferred is not None) else None
    return PodSetTopologyRequest(
        required=required,
        preferred=preferred,
        unconstrained=unconstrained,
        pod_index_label=JOB_COMPLETION_INDEX_ANNOTATION,
        pod_set_slice_required_topology=slice_topology,
        pod_set_slice_size=slice_size,
        pod_set_group_name=group,
    )


def _clean_template(template: PodTemplateSpec) -> PodTemplateSpec:
    labels = {
        key: v for key, v in template.metadata.labels.items() if key == JOB_NAME_LABEL or key not in MANAGED_LABELS
    }
    return replace(template, metadata=replace(template.metadata, labels=labels))


def _priority(job: Job, template: PodTemplateSpec, classes: Mapping[str, WorkloadPriorityClass],
              pod_classes: Mapping[str, PriorityClass]) -> tuple[PriorityClassRef | None, int]:
    """jobframework.ExtractPriority: the WorkloadPriorityClass label first, then the pods' PriorityClass
    (scheduling.k8s.io), else the global default PriorityClass (the lowest value if several), else 0.
    A named class that does not exist (yet) is an error: the Workload waits for it, as in Kueue."""
    wpc_name = job.metadata.labels.get(k.PRIORITY_CLASS_LABEL, "")
    if wpc_name:
        wpc = classes.get(wpc_name)
        if wpc is None:
            raise WorkloadBuildError(f"WorkloadPriorityClass {wpc_name!r} not found")
        return PriorityClassRef(group=k.KUEUE_GROUP, kind="WorkloadPriorityClass", name=wpc_name), wpc.value
    if name := template.spec.priority_class_name:
        pc = pod_classes.get(name)
        if pc is None:
            raise WorkloadBuildError(f"PriorityClass {name!r} not found")
        return PriorityClassRef(group=POD_PRIORITY_GROUP, kind="PriorityClass", name=name), pc.value
    defaults = sorted((c.value, n) for n, c in pod_classes.items() if c.global_default)
    if defaults:
        value, name = defaults[0]
        return PriorityClassRef(group=POD_PRIORITY_GROUP, kind="PriorityClass", name=name), value
    return None, 0


def pod_set(job: Job, template: PodTemplateSpec | None = None) -> PodSet:
    """The Job's one podset (WorkloadBuildError on a malformed TAS annotation)."""
    return PodSet(
        name=k.DEFAULT_POD_SET_NAME,
        template=template if template is not None else _clean_template(job.spec.template),
        count=pods_count(job),
        min_count=min_pods_count(job),
        topology_request=_topology_request(job.spec.template.metadata),
    )


def build_workload(job: Job, classes: Mapping[str, WorkloadPriorityClass],
                   pod_classes: Mapping[str, PriorityClass] | None = None) -> Workload:
    """jobframework.ConstructWorkload + prepareWorkload for a Job. Raises WorkloadBuildError when the
    named WorkloadPriorityClass does not exist (yet) or a TAS annotation is malformed."""
    meta = job.metadata
    template = _clean_template(job.spec.template)
    ref, priority = _priority(job, job.spec.template, classes, pod_classes or {})
    max_exec: int | None = None
    if raw := meta.labels.get(k.MAX_EXEC_TIME_SECONDS_LABEL):
        try:
            max_exec = int(raw) if int(raw) > 0 else None
        except ValueError:
            max_exec = None
    podset = pod_set(job, template)
    return Workload(
        api_version=k.KUEUE_API_VERSION,
        kind="Workload",
        metadata=ObjectMeta(
            name=workload_name(meta.name, meta.uid),
            namespace=meta.namespace,
            labels={k.JOB_UID_LABEL: meta.uid} if meta.uid else {},
            finalizers=(k.RESOURCE_IN_USE_FINALIZER,),
            owner_references=(
                OwnerReference(api_version=_JOB_API_VERSION, kind=_JOB_KIND, name=meta.name, uid=meta.uid,
                               controller=True, block_owner_deletion=True),
            ),
        ),
        spec=WorkloadSpec(
            pod_sets=(podset,),
            queue_name=queue_name(job),
            priority_class_ref=ref,
            priority=priority,
            maximum_execution_time_seconds=max_exec,
        ),
    )


def equivalent(job: Job, wl: Workload) -> bool:
    """A cheap EquivalentToWorkload: one podset with the Job's pod count (the admitted count once
    the Job runs, as partial admission changes its parallelism) and min count."""
    if len(wl.spec.pod_sets) != 1:
        return False
    ps = wl.spec.pod_sets[0]
    admission = wl.status.admission
    if not is_suspended(job) and admission is not None and admission.pod_set_assignments:
        count = admission.pod_set_assignments[0].count
        return pods_count(job) == (count if count is not None else ps.count)
    return ps.count == pods_count(job) and ps.min_count == min_pods_count(job)


def with_owner(wl: Workload, job: Job) -> Workload:
    """EnsurePrebuiltWorkloadOwnership: the Job becomes the Workload's controller."""
    meta = job.metadata
    ref = OwnerReference(api_version=_JOB_API_VERSION, kind=_JOB_KIND, name=meta.name, uid=meta.uid,
                         controller=True, block_owner_deletion=True)
    refs = (*(r for r in wl.metadata.owner_references if r.uid != meta.uid), ref)
    labels = {**wl.metadata.labels, k.JOB_UID_LABEL: meta.uid} if meta.uid else wl.metadata.labels
    return replace(wl, metadata=replace(wl.metadata, owner_references=refs, labels=labels))


# --- admission -> pod template -------------------------------------------------------------------


def _merge_map(into: dict[str, str], extra: dict[str, str], what: str) -> dict[str, str]:
    for key in sorted(extra):
        if key in into and into[key] != extra[key]:
            raise PodSetConflict(f"conflict for {what}: key {key!r} is {into[key]!r}, admission wants {extra[key]!r}")
    return {**into, **extra}


def merge_info(a: PodSetInfo, b: PodSetInfo) -> PodSetInfo:
    """PodSetInfo.Merge: maps must not conflict; tolerations and gates are appended without duplicates."""
    return replace(
        a,
        annotations=_merge_map(a.annotations, b.annotations, "annotations"),
        labels=_merge_map(a.labels, b.labels, "labels"),
        node_selector=_merge_map(a.node_selector, b.node_selector, "nodeSelector"),
        tolerations=a.tolerations + tuple(t for t in b.tolerations if t not in a.tolerations),
        scheduling_gates=a.scheduling_gates + tuple(g for g in b.scheduling_gates if g not in a.scheduling_gates),
    )


class MissingFlavor(LookupError):
    pass


def info_from_assignment(
    wl: Workload, assignment: PodSetAssignment, podset: PodSet, flavors: dict[str, ResourceFlavor]
) -> PodSetInfo:
    """podset.FromAssignment + the labels/annotations getPodSetsInfoFromStatus adds + admission check updates."""
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []
    seen: set[str] = set()
    for resource in sorted(assignment.flavors):
        name = assignment.flavors[resource]
        if name in seen:
            continue
        seen.add(name)
        flavor = flavors.get(name)
        if flavor is None:
            raise MissingFlavor(f"ResourceFlavor {name!r} not found")
        node_selector.update(flavor.spec.node_labels)
        tolerations.extend(flavor.spec.tolerations)
    annotations: dict[str, str] = {}
    gates: tuple[PodSchedulingGate, ...] = ()
    if assignment.topology_assignment is not None:
        req = podset.topology_request
        if req is None or (req.preferred is None and req.required is None and req.unconstrained is None):
            annotations[k.PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION] = "true"
        gates = (PodSchedulingGate(name=k.TOPOLOGY_SCHEDULING_GATE),)
        annotations[k.WORKLOAD_ANNOTATION] = wl.metadata.name
    info = PodSetInfo(
        name=assignment.name,
        count=assignment.count if assignment.count is not None else podset.count,
        annotations=annotations,
        labels={PODSET_LABEL: assignment.name},
        node_selector=node_selector,
        tolerations=tuple(tolerations),
        scheduling_gates=gates,
    )
    for check in wl.status.admission_checks:
        for update in check.pod_set_updates:
            if update.name == info.name:
                try:
                    info = merge_info(info, PodSetInfo(
                        name=update.name, count=info.count, annotations=update.annotations, labels=update.labels,
                        node_selector=update.node_selector, tolerations=update.tolerations,
                    ))
                except PodSetConflict as e:
                    raise PodSetConflict(f"in admission check {check.name!r}: {e}") from None
                break
    return info


def info_from_podset(ps: PodSet) -> PodSetInfo:
    """podset.FromPodSet: what the Workload remembers of the original template."""
    spec = ps.template.spec
    return PodSetInfo(
        name=ps.name,
        count=ps.count,
        annotations=dict(ps.template.metadata.annotations),
        labels=dict(ps.template.metadata.labels),
        node_selector=dict(spec.node_selector),
        tolerations=spec.tolerations,
        scheduling_gates=spec.scheduling_gates,
    )


def _template_info(t: PodTemplateSpec) -> PodSetInfo:
    return PodSetInfo(
        name="",
        count=0,
        annotations=dict(t.metadata.annotations),
        labels=dict(t.metadata.labels),
        node_selector=dict(t.spec.node_selector),
        tolerations=t.spec.tolerations,
        scheduling_gates=t.spec.scheduling_gates,
    )


def _with_info(t: PodTemplateSpec, info: PodSetInfo) -> PodTemplateSpec:
    return replace(
        t,
        metadata=replace(t.metadata, annotations=info.annotations, labels=info.labels),
        spec=replace(t.spec, node_selector=info.node_selector, tolerations=info.tolerations,
                     scheduling_gates=info.scheduling_gates),
    )


def started_job(job: Job, info: PodSetInfo) -> Job:
    """Job.RunWithPodSetsInfo: unsuspend, the admitted count as parallelism under partial admission,
    the admission's directives merged into the pod template (PodSetConflict on a clash)."""
    merged = merge_info(_template_info(job.spec.template), info)
    spec = replace(job.spec, suspend=False, template=_with_info(job.spec.template, merged))
    if min_pods_count(job) is not None:
        spec = replace(spec, parallelism=info.count)
        if sync_completions(job):
            spec = replace(spec, completions=info.count)
    return replace(job, spec=spec)


def restored_job(job: Job, info: PodSetInfo | None) -> Job:
    """Job.RestorePodSetsInfo: the original count and template directives back (managed labels kept)."""
    if info is None:
        return job
    spec = job.spec
    if min_pods_count(job) is not None and (spec.parallelism or 0) != info.count:
        spec = replace(spec, parallelism=info.count)
        if sync_completions(job):
            spec = replace(spec, completions=info.count)
    labels = dict(info.labels)
    for key in MANAGED_LABELS:
        if key in job.spec.template.metadata.labels:
            labels[key] = job.spec.template.metadata.labels[key]
    spec = replace(spec, template=_with_info(spec.template, replace(info, labels=labels)))
    return replace(job, spec=spec)
