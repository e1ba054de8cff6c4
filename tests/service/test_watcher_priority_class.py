"""Kubernetes PriorityClass through kubesim: the watcher mirrors scheduling.k8s.io/v1 PriorityClasses
and a queued Job whose pods name one gets that class's value as its Workload's priority (a Job
naming a class that does not exist yet gets its Workload once the class is created)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.wait import eventually
from support.watcher_harness import MirrorFollower, create, read_typed, running_watcher

from kq.api import constants as k
from kq.api.kueue import Workload
from kq.kube import KubeClient
from kq.runtime import Bus
from kubesim.server import KubeSim
from services.watcher.core.job_pods import workload_name

pytestmark = pytest.mark.timeout(90)
C = "c1"


def priority_class_doc(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
            "description": "test class"}


def job_doc(name: str, priority_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "demo", "labels": {k.QUEUE_NAME_LABEL: "lq"}},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
            "priorityClassName": priority_class, "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}}},
    }


async def workload_of(kube: KubeClient, job: Any, timeout: float = 15) -> Workload:
    async def probe() -> Workload:
        wl = await read_typed(kube, "workload", "demo", workload_name(job.metadata.name, job.metadata.uid))
        assert wl is not None, "no workload yet"
        return wl

    return await eventually(probe, timeout=timeout, what=f"workload for job {job.metadata.name}")


async def test_pod_priority_class_value_becomes_the_workload_priority(bus: Bus, sim: KubeSim, kube: KubeClient,
                                                                       tmp_path: Path) -> None:
    await create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    await create(kube, priority_class_doc("high", 5000))
    async with MirrorFollower(bus, C) as mirror, running_watcher(bus, sim, tmp_path, [C]):
        async def mirrored() -> bool:
            assert [r.name for r in mirror.view.items(C, "priorityclass")] == ["high"]
            return True

        await eventually(mirrored, timeout=15, what="PriorityClass in the mirror")

        job = await create(kube, job_doc("j-high", "high"))
        wl = await workload_of(kube, job)
        ref = wl.spec.priority_class_ref
        assert ref is not None and (ref.group, ref.kind, ref.name) == ("scheduling.k8s.io", "PriorityClass", "high")
        assert wl.spec.priority == 5000

        # A class that does not exist yet holds the Workload back; creating the class releases it.
        later = await create(kube, job_doc("j-later", "later"))
        await create(kube, job_doc("j-probe", "high"))  # handled after j-later: by then j-later was looked at
        await workload_of(kube, await read_typed(kube, "job", "demo", "j-probe"))
        assert await read_typed(kube, "workload", "demo", workload_name("j-later", later.metadata.uid)) is None
        await create(kube, priority_class_doc("later", -5))
        wl = await workload_of(kube, later)
        assert wl.spec.priority == -5 and wl.spec.priority_class_ref is not None
        assert wl.spec.priority_class_ref.name == "later"
