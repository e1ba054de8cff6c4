"""A Job's Workload priority, as Kueue's jobframework.ExtractPriority: the WorkloadPriorityClass
label first, then the pods' scheduling.k8s.io PriorityClass, then the global default one."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec.structs import replace
from unit.watcher.watcher_builders import NOW, job, priority_class

from kq.api import constants as k
from kq.api.core import Job, PriorityClass
from kq.api.meta import ObjectMeta
from services.watcher.core import job_pods as jp
from services.watcher.core.jobs import reconcile_job
from services.watcher.core.writes import Create, Skip

WPC = {"wl-high": priority_class("wl-high", 1000)}


def pc(name: str, value: int, global_default: bool = False) -> PriorityClass:
    return PriorityClass(metadata=ObjectMeta(name=name), value=value, global_default=global_default)


def with_pod_class(j: Job, name: str) -> Job:
    spec = replace(j.spec.template.spec, priority_class_name=name, priority=7)  # spec.priority is not what counts
    return replace(j, spec=replace(j.spec, template=replace(j.spec.template, spec=spec)))


POD_CLASSES = {"high": pc("high", 500), "low": pc("low", -10), "default-a": pc("default-a", 30, True),
               "default-b": pc("default-b", 20, True)}


@pytest.mark.parametrize("j, pod_classes, want", [
    pytest.param(with_pod_class(job(), "high"), POD_CLASSES, ("scheduling.k8s.io", "PriorityClass", "high", 500), id="pod-class"),
    pytest.param(with_pod_class(job(), "low"), POD_CLASSES, ("scheduling.k8s.io", "PriorityClass", "low", -10), id="negative"),
    pytest.param(with_pod_class(job(labels={k.PRIORITY_CLASS_LABEL: "wl-high"}), "low"), POD_CLASSES,
                 (k.KUEUE_GROUP, "WorkloadPriorityClass", "wl-high", 1000), id="workload-class-label-first"),
    pytest.param(job(), POD_CLASSES, ("scheduling.k8s.io", "PriorityClass", "default-b", 20), id="global-default-lowest"),
    pytest.param(job(), {"high": POD_CLASSES["high"]}, None, id="no-class-priority-0"),
])
def test_workload_priority_from_the_classes(j: Job, pod_classes: dict[str, PriorityClass], want: Any) -> None:
    wl = jp.build_workload(j, WPC, pod_classes)
    ref = wl.spec.priority_class_ref
    if want is None:
        assert (ref, wl.spec.priority) == (None, 0)
    else:
        assert ref is not None and (ref.group, ref.kind, ref.name, wl.spec.priority) == want


def test_a_missing_pod_priority_class_holds_the_workload_back_until_it_exists() -> None:
    j = with_pod_class(job(suspend=True), "high")
    step = reconcile_job(j, None, {}, WPC, NOW, {})
    assert isinstance(step, Skip) and step.reason == "CannotCreateWorkload: PriorityClass 'high' not found"
    step = reconcile_job(j, None, {}, WPC, NOW, POD_CLASSES)
    assert isinstance(step, Create) and step.kind == "workload"
