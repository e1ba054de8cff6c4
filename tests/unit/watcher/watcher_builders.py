"""Small builders for the watcher's core tests: Jobs, Workloads and flavors in a given state."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from msgspec.structs import replace

from kq.api import constants as k
from kq.api.core import Container, Job, JobSpec, JobStatus, PodSpec, PodTemplateSpec, ResourceRequirements, Toleration
from kq.api.kueue import (
    Admission,
    PodSetAssignment,
    ResourceFlavor,
    ResourceFlavorSpec,
    Workload,
    WorkloadPriorityClass,
)
from kq.api.meta import Condition, ObjectMeta
from services.watcher.core import job_pods
from services.watcher.core import workload_status as ws

NOW = "2026-01-01T00:00:10Z"
EARLIER = "2026-01-01T00:00:00Z"


def job(name: str = "j1", *, queue: str | None = "lq", suspend: bool | None = True, parallelism: int = 2,
        completions: int | None = None, uid: str = "job-uid", rv: str = "10", labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, node_selector: dict[str, str] | None = None,
        active: int = 0, start_time: str | None = None, conditions: tuple = ()) -> Job:
    lbl = dict(labels or {})
    if queue is not None:
        lbl[k.QUEUE_NAME_LABEL] = queue
    template = PodTemplateSpec(
        metadata=ObjectMeta(labels={"app": "x", "batch.kubernetes.io/job-name": name, "controller-uid": uid}),
        spec=PodSpec(
            containers=(Container(name="c", resources=ResourceRequirements(requests={"cpu": "1"})),),
            node_selector=dict(node_selector or {}),
            restart_policy="Never",
        ),
    )
    return Job(
        api_version="batch/v1",
        kind="Job",
        metadata=ObjectMeta(name=name, namespace="ns", uid=uid, resource_version=rv, labels=lbl,
                            annotations=dict(annotations or {})),
        spec=JobSpec(template=template, parallelism=parallelism, completions=completions, suspend=suspend),
        status=JobStatus(active=active, start_time=start_time, conditions=conditions),
    )


def workload_for(j: Job, *, rv: str = "20", uid: str = "wl-uid") -> Workload:
    wl = job_pods.build_workload(j, {})
    return replace(wl, metadata=replace(wl.metadata, uid=uid, resource_version=rv, generation=1))


def plain_workload(name: str = "w1", *, uid: str = "wl-uid", rv: str = "20") -> Workload:
    return Workload(metadata=ObjectMeta(name=name, namespace="ns", uid=uid, resource_version=rv, generation=1))


def admission(cq: str = "cq", flavor: str = "f1", count: int | None = None, **extra) -> Admission:
    return Admission(cluster_queue=cq, pod_set_assignments=(
        PodSetAssignment(name="main", flavors={"cpu": flavor}, count=count, **extra),
    ))


def admitted(wl: Workload, adm: Admission | None = None) -> Workload:
    return ws.set_quota_reservation(wl, adm or admission(), EARLIER, admitted=True)


def reserved(wl: Workload, adm: Admission | None = None) -> Workload:
    return ws.set_quota_reservation(wl, adm or admission(), EARLIER, admitted=False)


def evicted(wl: Workload, reason: str = k.EVICTED_BY_PREEMPTION) -> Workload:
    return ws.evict(wl, reason, "preempted by ns/high", EARLIER, preemption_reason="InClusterQueue")


def finished(wl: Workload) -> Workload:
    return ws.finish(wl, k.FINISHED_SUCCEEDED, "done", EARLIER)


def with_conditions(wl: Workload, *conds: Condition) -> Workload:
    return replace(wl, status=replace(wl.status, conditions=tuple(conds)))


def flavor(name: str = "f1", labels: dict[str, str] | None = None, tolerations: tuple[Toleration, ...] = ()) -> ResourceFlavor:
    return ResourceFlavor(metadata=ObjectMeta(name=name),
                          spec=ResourceFlavorSpec(node_labels=dict(labels or {}), tolerations=tolerations))


def priority_class(name: str, value: int) -> WorkloadPriorityClass:
    return WorkloadPriorityClass(metadata=ObjectMeta(name=name), value=value)


T = TypeVar("T")


def _merge(doc: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(doc) if isinstance(doc, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def merge_apply(obj: T, patch: bytes) -> T:
    """What the API server does with a merge patch (resourceVersion aside), on a typed object."""
    doc = _merge(msgspec.to_builtins(obj), msgspec.json.decode(patch))
    return msgspec.convert(doc, type(obj))
