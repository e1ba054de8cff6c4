"""The Job integration end to end through kubesim: Job -> Workload -> admission -> run -> Finished;
eviction suspends the Job and releases the quota."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from support.kubesim_fixtures import SimSpec
from support.wait import eventually
from support.watcher_harness import Outcomes, create, read_typed, running_watcher, send

from kq.api import constants as k
from kq.api.core import Job, Pod
from kq.api.kueue import Admission, PodSetAssignment, Workload
from kq.api.meta import find_condition
from kq.kube import KubeClient
from kq.messages import AdmitWorkload, EvictWorkload
from kq.runtime import Bus
from kubesim.server import KubeSim
from services.watcher.core import workload_status as ws
from services.watcher.core.job_pods import workload_name

pytestmark = pytest.mark.timeout(90)
C = "c1"
KUBESIM = SimSpec(seed=3)


@pytest.fixture
async def world(kube: KubeClient) -> None:
    await create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    await create(kube, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "pool-a"},
                        "spec": {"nodeLabels": {"pool": "a"},
                                 "tolerations": [{"key": "pool", "operator": "Equal", "value": "a", "effect": "NoSchedule"}]}})
    for name, pool in (("node-a", "a"), ("node-b", "b")):
        await create(kube, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": pool}},
                            "spec": {"taints": [{"key": "pool", "value": pool, "effect": "NoSchedule"}]},
                            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                                       "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                                       "conditions": [{"type": "Ready", "status": "True"}]}})


def job_doc(name: str, runtime: str, parallelism: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "demo", "labels": {k.QUEUE_NAME_LABEL: "lq"}},
        "spec": {"parallelism": parallelism, "completions": parallelism, "template": {
            "metadata": {"annotations": {"kq.dev/runtime": runtime}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}}},
    }


ADMISSION = Admission(cluster_queue="cq", pod_set_assignments=(
    PodSetAssignment(name="main", flavors={"cpu": "pool-a"}, resource_usage={"cpu": "2"}, count=2),))


async def workload_of(kube: KubeClient, job: Job) -> Workload:
    async def probe() -> Workload:
        wl = await read_typed(kube, "workload", "demo", workload_name(job.metadata.name, job.metadata.uid))
        assert wl is not None, "no workload yet"
        return wl

    return await eventually(probe, timeout=10, what="workload created for the job")


async def pods_of(kube: KubeClient, job: str) -> list[Pod]:
    items, _ = await kube.list("pod", namespace="demo", label_selector=f"batch.kubernetes.io/job-name={job}")
    return [msgspec.json.decode(raw, type=Pod) for raw in items]


async def test_job_runs_to_completion(bus: Bus, sim: KubeSim, kube: KubeClient, world: None, tmp_path: Path) -> None:
    async with Outcomes(bus, "admission", C) as outcomes, running_watcher(bus, sim, tmp_path, [C]):
        job = await create(kube, job_doc("j1", "500ms"))
        assert job.spec.suspend is True  # kubesim does what Kueue's webhook does
        wl = await workload_of(kube, job)
        assert wl.spec.queue_name == "lq"
        assert [(p.name, p.count) for p in wl.spec.pod_sets] == [("main", 2)]
        ref = wl.metadata.controller_ref()
        assert ref is not None and (ref.kind, ref.uid) == ("Job", job.metadata.uid)
        assert wl.metadata.finalizers == (k.RESOURCE_IN_USE_FINALIZER,)

        # The scheduler's decision, as admission would send it.
        await send(bus, AdmitWorkload(id="adm-j1", cluster=C, writer="admission", namespace="demo",
                                      name=wl.metadata.name, uid=wl.metadata.uid, admission=ADMISSION))
        assert getattr(await eventually(lambda: outcomes.by_id.get("adm-j1"), timeout=10), "applied", False)

        async def started() -> Job:
            j = await read_typed(kube, "job", "demo", "j1")
            assert j.spec.suspend is False, "still suspended"
            return j

        j = await eventually(started, timeout=10, what="job unsuspended")
        assert j.spec.template.spec.node_selector == {"pool": "a"}
        assert [t.key for t in j.spec.template.spec.tolerations] == ["pool"]
        assert j.spec.template.metadata.labels["kueue.x-k8s.io/podset"] == "main"

        async def bound() -> list[Pod]:
            pods = await pods_of(kube, "j1")
            assert len(pods) == 2 and all(p.spec.node_name for p in pods), [(p.metadata.name, p.spec.node_name) for p in pods]
            return pods

        assert {p.spec.node_name for p in await eventually(bound, timeout=10)} == {"node-a"}

        async def finished() -> Workload:
            w = await read_typed(kube, "workload", "demo", wl.metadata.name)
            assert ws.is_finished(w), w.status.conditions
            return w

        done = await eventually(finished, timeout=15, what="workload finished")
        fin = find_condition(done.status.conditions, k.WORKLOAD_FINISHED)
        assert fin is not None and fin.reason == "Succeeded"
        await eventually(lambda: _no_finalizer(kube, wl.metadata.name), timeout=10, what="finalizer dropped")


async def _no_finalizer(kube: KubeClient, name: str) -> bool:
    w = await read_typed(kube, "workload", "demo", name)
    assert w is not None and not w.metadata.finalizers, w.metadata.finalizers if w else None
    return True


async def test_eviction_suspends_the_job_and_releases_quota(bus: Bus, sim: KubeSim, kube: KubeClient, world: None,
                                                            tmp_path: Path) -> None:
    async with Outcomes(bus, "admission", C) as outcomes, running_watcher(bus, sim, tmp_path, [C]):
        job = await create(kube, job_doc("long", "1h"))
        wl = await workload_of(kube, job)
        await send(bus, AdmitWorkload(id="adm", cluster=C, writer="admission", namespace="demo",
                                      name=wl.metadata.name, uid=wl.metadata.uid, admission=ADMISSION))

        async def running() -> bool:
            j = await read_typed(kube, "job", "demo", "long")
            assert j.spec.suspend is False and j.status.active == 2, (j.spec.suspend, j.status.active)
            return True

        await eventually(running, timeout=10, what="job running")
        await send(bus, EvictWorkload(id="ev", cluster=C, writer="admission", namespace="demo", name=wl.metadata.name,
                                      uid=wl.metadata.uid, reason=k.EVICTED_BY_PREEMPTION,
                                      message="Preempted to accommodate a higher priority workload",
                                      preemption_reason="InClusterQueue"))
        assert getattr(await eventually(lambda: outcomes.by_id.get("ev"), timeout=10), "applied", False)

        async def released() -> Workload:
            w = await read_typed(kube, "workload", "demo", wl.metadata.name)
            assert w.status.admission is None, w.status.conditions
            return w

        w = await eventually(released, timeout=15, what="quota released after the job stopped")
        assert find_condition(w.status.conditions, k.WORKLOAD_REQUEUED).status == "True"  # type: ignore[union-attr]  # absent fails the test too
        assert find_condition(w.status.conditions, k.WORKLOAD_QUOTA_RESERVED).reason == k.REASON_PENDING_EVALUATION  # type: ignore[union-attr]  # absent fails the test too
        j = await read_typed(kube, "job", "demo", "long")
        assert j.spec.suspend is True and j.status.active == 0
        assert j.spec.template.spec.node_selector == {} and j.spec.template.spec.tolerations == ()
        assert "kueue.x-k8s.io/stopping" not in j.metadata.annotations
        assert not [p for p in await pods_of(kube, "long") if p.status.phase in ("Pending", "Running")]


async def test_deleted_workload_is_recreated_for_a_waiting_job(bus: Bus, sim: KubeSim, kube: KubeClient, world: None,
                                                               tmp_path: Path) -> None:
    async with running_watcher(bus, sim, tmp_path, [C]):
        job = await create(kube, job_doc("waiting", "1s"))
        first = await workload_of(kube, job)
        await kube.delete("workload", "demo", first.metadata.name)

        async def recreated() -> Workload:
            w = await read_typed(kube, "workload", "demo", first.metadata.name)
            assert w is not None and w.metadata.uid != first.metadata.uid, "not recreated yet"
            assert w.metadata.deletion_timestamp is None
            return w

        again = await eventually(recreated, timeout=10, what="workload recreated")
        assert again.spec.pod_sets == first.spec.pod_sets
