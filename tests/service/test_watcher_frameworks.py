"""The framework integrations end to end through kubesim and a real nats-server: a JobSet and a pod
group get their Workloads, run when admission's command admits them, finish; an evicted group's pods
are stopped and the quota released."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.kubesim_fixtures import SimSpec
from support.wait import eventually
from support.watcher_harness import Outcomes, create, read_typed, running_watcher, send

from kq.api import constants as k
from kq.api.core import JobSet, Pod
from kq.api.kueue import Admission, PodSetAssignment, Workload
from kq.kube import KubeClient
from kq.messages import AdmitWorkload, EvictWorkload
from kq.runtime import Bus
from kubesim.server import KubeSim
from services.watcher.core import workload_status as ws
from services.watcher.core.adapter import workload_name_for

pytestmark = pytest.mark.timeout(90)
C = "c1"
KUBESIM = SimSpec(seed=5)
FRAMEWORKS = frozenset({"batch/job", "jobset.x-k8s.io/jobset", "pod"})


@pytest.fixture
async def world(kube: KubeClient) -> None:
    await create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    await create(kube, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                        "metadata": {"name": "pool-a"}, "spec": {"nodeLabels": {"pool": "a"}}})


def _container(cpu: str = "1") -> dict[str, Any]:
    return {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}


async def _workload(kube: KubeClient, name: str) -> Workload:
    async def probe() -> Workload:
        wl = await read_typed(kube, "workload", "demo", name)
        assert wl is not None, f"no workload {name} yet"
        return wl

    return await eventually(probe, timeout=10, what=f"workload {name}")


async def _admit(bus: Bus, outcomes: Outcomes, wl: Workload) -> None:
    adm = Admission(cluster_queue="cq", pod_set_assignments=tuple(
        PodSetAssignment(name=p.name, flavors={"cpu": "pool-a"}, count=p.count) for p in wl.spec.pod_sets))
    cid = f"adm-{wl.metadata.name}"
    await send(bus, AdmitWorkload(id=cid, cluster=C, writer="admission", namespace="demo", name=wl.metadata.name,
                                  uid=wl.metadata.uid, admission=adm))
    assert getattr(await eventually(lambda: outcomes.by_id.get(cid), timeout=10), "applied", False)


async def _finished(kube: KubeClient, name: str) -> Workload:
    async def probe() -> Workload:
        w = await read_typed(kube, "workload", "demo", name)
        assert ws.is_finished(w), w.status.conditions
        return w

    return await eventually(probe, timeout=20, what=f"workload {name} finished")


async def test_a_jobset_runs_to_completion_once_admitted(bus: Bus, sim: KubeSim, kube: KubeClient, world: None,
                                                         tmp_path: Path) -> None:
    async with Outcomes(bus, "admission", C) as outcomes, running_watcher(bus, sim, tmp_path, [C],
                                                                           frameworks=FRAMEWORKS):
        js = await create(kube, {
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": "demo", "labels": {k.QUEUE_NAME_LABEL: "lq"}},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": {"template": {
                "metadata": {"annotations": {"kq.dev/runtime": "300ms"}},
                "spec": {"restartPolicy": "Never", "containers": [_container()]}}}}}]}})
        assert js.spec.suspend is True
        wl = await _workload(kube, workload_name_for("JobSet", "jobset.x-k8s.io/v1alpha2", "js", js.metadata.uid))
        assert [(p.name, p.count) for p in wl.spec.pod_sets] == [("workers", 2)]
        await _admit(bus, outcomes, wl)

        async def started() -> JobSet:
            got = await read_typed(kube, "jobset", "demo", "js")
            assert got.spec.suspend is False, "still suspended"
            return got

        got = await eventually(started, timeout=10, what="jobset unsuspended")
        assert got.spec.replicated_jobs[0].template.spec.template.spec.node_selector == {"pool": "a"}
        done = await _finished(kube, wl.metadata.name)
        assert any(c.type == k.WORKLOAD_FINISHED and c.reason == k.FINISHED_SUCCEEDED for c in done.status.conditions)


async def test_an_evicted_pod_group_is_stopped_and_releases_its_quota(bus: Bus, sim: KubeSim, kube: KubeClient,
                                                                      world: None, tmp_path: Path) -> None:
    async with Outcomes(bus, "admission", C) as outcomes, running_watcher(bus, sim, tmp_path, [C],
                                                                           frameworks=FRAMEWORKS):
        for name in ("a", "b"):
            pod = await create(kube, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "demo",
                             "labels": {k.QUEUE_NAME_LABEL: "lq", "kueue.x-k8s.io/pod-group-name": "g"},
                             "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}},
                "spec": {"restartPolicy": "Never", "containers": [_container()]}})
            assert [g.name for g in pod.spec.scheduling_gates] == ["kueue.x-k8s.io/admission"]
        wl = await _workload(kube, "g")
        await _admit(bus, outcomes, wl)

        async def running() -> list[Pod]:
            pods = [await read_typed(kube, "pod", "demo", n) for n in ("a", "b")]
            assert all(p.status.phase == "Running" and p.spec.node_selector == {"pool": "a"} for p in pods), pods
            return pods

        await eventually(running, timeout=10, what="both members run on the flavor's nodes")
        await send(bus, EvictWorkload(id="ev", cluster=C, writer="admission", namespace="demo", name="g",
                                      uid=wl.metadata.uid, reason=k.EVICTED_BY_PREEMPTION, message="preempted"))

        async def released() -> Workload:
            w = await read_typed(kube, "workload", "demo", "g")
            gone = [await read_typed(kube, "pod", "demo", n) for n in ("a", "b")]
            assert w is None or not ws.has_quota_reservation(w), w.status.conditions if w else None
            assert gone == [None, None], [p.status.phase for p in gone if p]
            return w or wl

        await eventually(released, timeout=20, what="pods stopped, quota released")
