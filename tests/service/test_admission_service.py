"""The admission service against a real nats-server, kubesim over HTTP and the real watcher.

Workloads and Jobs go in through the Kubernetes API; what the scheduler decided is read back
from the API server (Workload conditions, Job spec, ClusterQueue status).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import msgspec
import pytest
from support.kubesim_fixtures import SimSpec
from support.wait import eventually
from support.watcher_harness import cluster_configs, create, read_typed, running_watcher

from kq import subjects
from kq.api import constants as k
from kq.api.core import Job, Pod
from kq.api.kueue import Admission, ClusterQueue, PodSetAssignment, Workload
from kq.api.meta import Condition, condition_is_true, find_condition
from kq.config import Config, NatsConfig
from kq.kube import KubeClient
from kq.messages import AdmitWorkload, WorkloadPendingEvent, decision_decoder
from kq.runtime import Bus, Lease
from kubesim.server import KubeSim
from services.admission.leader import TermSettings
from services.admission.plan.outputs import command_id
from services.admission.service import AdmissionSettings, main
from services.watcher.core.job_pods import workload_name

pytestmark = pytest.mark.timeout(120)
C = "c1"
KUBESIM = SimSpec(seed=11)
FAST = AdmissionSettings(lease_ttl_s=3, term=TermSettings(progress_log_s=2.0))
KUEUE = "kueue.x-k8s.io/v1beta2"


@asynccontextmanager
async def running_admission(nats: NatsConfig, sim: KubeSim, tmp: Path, instance: str = "0",
                            settings: AdmissionSettings = FAST, wait: bool = True) -> AsyncIterator[Bus]:
    """The admission service in-process on its own connection; yields once it decides (wait=True)."""
    config = Config(nats=nats, clusters=cluster_configs(sim, tmp, [C]), instance=instance)
    bus = await Bus.connect(nats, "admission", instance=instance)
    task = asyncio.create_task(main(bus, config, settings), name=f"admission-{instance}")
    try:
        if wait:
            await wait_deciding(bus, task)
        yield bus
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError, Exception):
            await task
        await bus.close()


async def wait_deciding(bus: Bus, task: asyncio.Task[None] | None = None) -> None:
    def ready() -> bool:
        if task is not None and task.done():
            task.result()
            raise AssertionError("admission stopped")
        assert bus.status == "ready", bus.status
        return True

    await eventually(ready, timeout=30, what="admission deciding")


# --- the world --------------------------------------------------------------------------------------


async def make_world(kube: KubeClient, cpu: str, preemption: dict[str, Any] | None = None) -> None:
    await create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    await create(kube, {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "pool-a"},
                        "spec": {"nodeLabels": {"pool": "a"}}})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu"],
                            "flavors": [{"name": "pool-a", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}],
    }
    if preemption:
        spec["preemption"] = preemption
    await create(kube, {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec})
    await create(kube, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "demo"},
                        "spec": {"clusterQueue": "cq"}})
    for name, pool in (("node-a", "a"), ("node-b", "b")):
        await create(kube, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": pool}},
                            "status": {"allocatable": {"cpu": "16", "memory": "32Gi", "pods": "110"},
                                       "capacity": {"cpu": "16", "memory": "32Gi", "pods": "110"},
                                       "conditions": [{"type": "Ready", "status": "True"}]}})


def workload_doc(name: str, cpu: str = "1") -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": "demo"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}}


def job_doc(name: str, runtime: str, parallelism: int, priority_class: str | None = None) -> dict[str, Any]:
    labels = {k.QUEUE_NAME_LABEL: "lq"}
    if priority_class:
        labels[k.PRIORITY_CLASS_LABEL] = priority_class
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "demo", "labels": labels},
        "spec": {"parallelism": parallelism, "completions": parallelism, "template": {
            "metadata": {"annotations": {"kq.dev/runtime": runtime}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}}},
    }


async def workloads(kube: KubeClient) -> dict[str, Workload]:
    items, _ = await kube.list("workload", namespace="demo")
    out = [msgspec.json.decode(raw, type=Workload) for raw in items]
    return {w.metadata.name: w for w in out}


def cond(w: Workload, type_: str) -> Condition | None:
    return find_condition(w.status.conditions, type_)


def reserved(w: Workload) -> bool:
    return condition_is_true(w.status.conditions, k.WORKLOAD_QUOTA_RESERVED) and w.status.admission is not None


async def cluster_queue(kube: KubeClient) -> ClusterQueue:
    return await read_typed(kube, "clusterqueue", None, "cq")


def cq_summary(cq: ClusterQueue) -> tuple[Any, ...]:
    s = cq.status
    usage = {(f.name, r.name): str(r.total) for f in s.flavors_reservation for r in f.resources}
    active = find_condition(s.conditions, "Active")
    return (s.reserving_workloads, s.admitted_workloads, s.pending_workloads, usage,
            active.status if active is not None else None)


async def workload_of_job(kube: KubeClient, job: Job) -> str:
    name = workload_name(job.metadata.name, job.metadata.uid)

    async def exists() -> str:
        assert await read_typed(kube, "workload", "demo", name) is not None, f"no workload {name} yet"
        return name

    return await eventually(exists, timeout=15, what=f"workload for job {job.metadata.name}")


async def read_job(kube: KubeClient, name: str) -> Job:
    return await read_typed(kube, "job", "demo", name)


# --- tests ------------------------------------------------------------------------------------------


async def test_admits_up_to_quota_and_keeps_the_rest_pending(bus: Bus, nats_config: NatsConfig, sim: KubeSim,
                                                             kube: KubeClient, tmp_path: Path) -> None:
    await make_world(kube, cpu="6")
    async with running_watcher(bus, sim, tmp_path, [C]), running_admission(nats_config, sim, tmp_path):
        for i in range(10):
            await create(kube, workload_doc(f"w{i}"))

        async def settled() -> dict[str, Workload]:
            wls = await workloads(kube)
            admitted = [n for n, w in wls.items() if reserved(w)]
            assert len(admitted) <= 6, f"over quota: {sorted(admitted)}"
            told = [n for n, w in wls.items() if (c := cond(w, k.WORKLOAD_QUOTA_RESERVED)) is not None
                    and c.status == "False"]
            assert (len(admitted), len(wls) - len(admitted)) == (6, 4) and told, (sorted(admitted), sorted(told))
            assert cq_summary(await cluster_queue(kube)) == (6, 6, 4, {("pool-a", "cpu"): "6"}, "True")
            return wls

        wls = await eventually(settled, timeout=30, what="6 admitted, 4 pending with a reason, CQ status")
        for w in wls.values():
            if reserved(w):
                assert condition_is_true(w.status.conditions, k.WORKLOAD_ADMITTED)
                assert w.status.admission is not None
                (psa,) = w.status.admission.pod_set_assignments
                assert (psa.flavors, psa.resource_usage, psa.count) == ({"cpu": "pool-a"}, {"cpu": "1"}, 1)
            elif (c := cond(w, k.WORKLOAD_QUOTA_RESERVED)) is not None:
                # The head that was tried says why. Equivalent workloads behind it are set aside
                # untried (Kueue's SchedulingEquivalenceHashing) and carry no condition yet.
                assert (c.status, c.reason) == ("False", "Pending") and "insufficient" in c.message.lower(), c
        lq = await read_typed(kube, "localqueue", "demo", "lq")
        assert (lq.status.reserving_workloads, lq.status.admitted_workloads, lq.status.pending_workloads) == (6, 6, 4)

        # Finishing one frees its quota: exactly one waiting workload takes it.
        done = next(n for n, w in sorted(wls.items()) if reserved(w))
        await finish(kube, wls[done])

        async def one_more() -> bool:
            now = await workloads(kube)
            running = sorted(n for n, w in now.items() if reserved(w) and not finished(w))
            assert len(running) == 6 and done not in running, running
            assert cq_summary(await cluster_queue(kube)) == (6, 6, 3, {("pool-a", "cpu"): "6"}, "True")
            return True

        await eventually(one_more, timeout=20, what="the freed quota goes to one pending workload")


def finished(w: Workload) -> bool:
    return condition_is_true(w.status.conditions, k.WORKLOAD_FINISHED)


async def finish(kube: KubeClient, w: Workload) -> None:
    """Mark a Workload Finished the way a job integration would (status patch, conditions replaced)."""
    conds = [msgspec.to_builtins(c) for c in w.status.conditions if c.type != k.WORKLOAD_FINISHED]
    conds.append({"type": k.WORKLOAD_FINISHED, "status": "True", "reason": "Succeeded", "message": "done",
                  "lastTransitionTime": "2024-01-01T00:00:00Z"})
    body = {"metadata": {"resourceVersion": w.metadata.resource_version}, "status": {"conditions": conds}}
    await kube.patch("workload", "demo", w.metadata.name, body, patch_type="merge", subresource="status")


async def test_a_job_runs_end_to_end(bus: Bus, nats_config: NatsConfig, sim: KubeSim, kube: KubeClient,
                                     tmp_path: Path) -> None:
    await make_world(kube, cpu="6")
    async with running_watcher(bus, sim, tmp_path, [C]), running_admission(nats_config, sim, tmp_path):
        job = await create(kube, job_doc("j1", runtime="3s", parallelism=2))
        assert job.spec.suspend is True
        wl_name = await workload_of_job(kube, job)

        async def admitted() -> Workload:
            w = await read_typed(kube, "workload", "demo", wl_name)
            assert reserved(w) and condition_is_true(w.status.conditions, k.WORKLOAD_ADMITTED), w.status.conditions
            return w

        w = await eventually(admitted, timeout=15, what="workload admitted")
        assert w.status.admission is not None
        (psa,) = w.status.admission.pod_set_assignments
        assert (psa.name, psa.flavors, psa.resource_usage, psa.count) == ("main", {"cpu": "pool-a"}, {"cpu": "2"}, 2)

        async def quota_in_use() -> bool:
            assert cq_summary(await cluster_queue(kube)) == (1, 1, 0, {("pool-a", "cpu"): "2"}, "True")
            return True

        await eventually(quota_in_use, timeout=10, what="ClusterQueue status shows the reservation")

        async def started() -> Job:
            j = await read_job(kube, "j1")
            assert j.spec.suspend is False, "still suspended"
            return j

        j = await eventually(started, timeout=10, what="job unsuspended")
        assert j.spec.template.spec.node_selector == {"pool": "a"}

        async def pods_on_pool_a() -> bool:
            items, _ = await kube.list("pod", namespace="demo", label_selector="batch.kubernetes.io/job-name=j1")
            pods = [msgspec.json.decode(raw, type=Pod) for raw in items]
            assert len(pods) == 2 and {p.spec.node_name for p in pods} == {"node-a"}, \
                [(p.metadata.name, p.spec.node_name) for p in pods]
            return True

        await eventually(pods_on_pool_a, timeout=10, what="pods bound on the flavor's nodes")

        async def completed() -> bool:
            j = await read_job(kube, "j1")
            c = find_condition(j.status.conditions, "Complete")
            assert c is not None and c.status == "True", j.status.conditions
            w = await read_typed(kube, "workload", "demo", wl_name)
            assert finished(w), w.status.conditions
            return True

        await eventually(completed, timeout=20, what="job complete and workload finished")

        async def released() -> bool:
            assert cq_summary(await cluster_queue(kube)) == (0, 0, 0, {("pool-a", "cpu"): "0"}, "True")
            return True

        await eventually(released, timeout=10, what="quota released in the ClusterQueue status")


async def test_preemption_by_priority(bus: Bus, nats_config: NatsConfig, sim: KubeSim, kube: KubeClient,
                                      tmp_path: Path) -> None:
    await make_world(kube, cpu="4", preemption={"withinClusterQueue": "LowerPriority"})
    for name, value in (("low", 10), ("high", 1000)):
        await create(kube, {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                            "value": value})
    async with running_watcher(bus, sim, tmp_path, [C]), running_admission(nats_config, sim, tmp_path):
        low = await create(kube, job_doc("low", runtime="1h", parallelism=4, priority_class="low"))
        low_wl = await workload_of_job(kube, low)

        async def running(name: str) -> bool:
            j = await read_job(kube, name)
            assert j.spec.suspend is False and j.status.active == 4, (j.spec.suspend, j.status.active)
            return True

        await eventually(lambda: running("low"), timeout=15, what="low-priority job running")
        high = await create(kube, job_doc("high", runtime="1h", parallelism=4, priority_class="high"))
        high_wl = await workload_of_job(kube, high)

        async def preempted() -> bool:
            w = await read_typed(kube, "workload", "demo", low_wl)
            ev = cond(w, k.WORKLOAD_EVICTED)
            assert ev is not None and ev.status == "True" and ev.reason == "Preempted", w.status.conditions
            pre = cond(w, k.WORKLOAD_PREEMPTED)
            assert pre is not None and pre.status == "True" and pre.reason == "InClusterQueue", w.status.conditions
            return True

        await eventually(preempted, timeout=15, what="low-priority workload preempted")

        async def swapped() -> bool:
            j = await read_job(kube, "low")
            assert j.spec.suspend is True, "low job still running"
            w = await read_typed(kube, "workload", "demo", high_wl)
            assert reserved(w) and condition_is_true(w.status.conditions, k.WORKLOAD_ADMITTED), w.status.conditions
            lw = await read_typed(kube, "workload", "demo", low_wl)
            assert not reserved(lw), lw.status.conditions
            return True

        await eventually(swapped, timeout=20, what="low suspended, high admitted")
        await eventually(lambda: running("high"), timeout=15, what="high-priority job running")

        async def counted() -> bool:  # queue statuses are batched: they converge shortly after
            assert cq_summary(await cluster_queue(kube))[:2] == (1, 1)
            return True

        await eventually(counted, timeout=5, what="ClusterQueue status counting the high workload")


async def test_a_new_leader_waits_for_the_writes_of_the_old_one(bus: Bus, nats_config: NatsConfig, sim: KubeSim,
                                                                  kube: KubeClient, tmp_path: Path) -> None:
    """An older leader's admission still queued when the new one starts: the new leader must count
    its quota (the watcher applies it just before the new leader's fence) and not hand it out again."""
    await make_world(kube, cpu="2")
    a = await create(kube, workload_doc("a", cpu="2"))
    await create(kube, workload_doc("b", cpu="2"))
    async with running_watcher(bus, sim, tmp_path, [C]):
        pass  # mirrored; the watcher stops, so what follows queues up in KQ_CMD
    old = Lease(bus, "admission", "default", "old-leader", ttl=3)
    old_epoch = await old.acquire(timeout=10)
    await old.release()
    cid = command_id("reserve", old_epoch, C, "demo/a", f"reserve:{a.metadata.uid}:{a.metadata.resource_version}:1")
    admission = Admission(cluster_queue="cq", pod_set_assignments=(
        PodSetAssignment(name="main", flavors={"cpu": "pool-a"}, resource_usage={"cpu": "2"}, count=1),))
    await bus.publish(subjects.command_subject(C, "workload"), AdmitWorkload(
        id=cid, cluster=C, writer="admission", epoch=old_epoch, namespace="demo", name="a", uid=a.metadata.uid,
        admission=admission), msg_id=cid)

    async with (
        running_admission(nats_config, sim, tmp_path, wait=False) as adm_bus,
        running_watcher(bus, sim, tmp_path, [C]),
    ):
            await wait_deciding(adm_bus)

            async def settled() -> bool:
                wls = await workloads(kube)
                assert reserved(wls["a"]) and not reserved(wls["b"]), {n: w.status.conditions for n, w in wls.items()}
                c = cond(wls["b"], k.WORKLOAD_QUOTA_RESERVED)
                assert c is not None and c.reason == "Pending", c
                assert cq_summary(await cluster_queue(kube)) == (1, 1, 1, {("pool-a", "cpu"): "2"}, "True")
                return True

            await eventually(settled, timeout=20, what="a admitted by the old leader, b waiting")
    # The new leader never decided to admit b: its last decision about b says why it waits.
    last = await bus.js.get_msg(subjects.EVENTS_STREAM, subject=subjects.event_subject(C, "workload", "demo", "b"))
    assert isinstance(decision_decoder.decode(last.data or b""), WorkloadPendingEvent)
