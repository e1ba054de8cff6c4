"""The control API: scenario hooks (finish, fail, pods), connection loss, injected faults, state."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from contract.sim_objects import KUEUE, MERGE, api_client, job_body, workload_body
from kubernetes_asyncio.client import BatchV1Api, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException
from support.kubesim_fixtures import SimControl
from support.wait import eventually

from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(30)


def _cond(obj: Any, ctype: str) -> Any:
    for c in obj.status.conditions or ():
        if c.type == ctype:
            return c
    return None


async def _job_condition(batch: BatchV1Api, name: str, ctype: str) -> Any:
    j = await batch.read_namespaced_job_status(name, "default")
    c = _cond(j, ctype) if j.status else None
    return j if c is not None and c.status == "True" else None


async def _running_pods(core: CoreV1Api, n: int) -> list[Any]:
    pods = [p for p in (await core.list_namespaced_pod("default")).items if p.status.phase == "Running"]
    return pods if len(pods) == n else []


async def _workload_owned_by_job(custom: CustomObjectsApi, job: Any) -> dict[str, Any]:
    """What Kueue's job integration creates: a Workload with a generated name, owned by the Job."""
    body = workload_body("")
    body["metadata"] = {"generateName": f"job-{job.metadata.name}-", "ownerReferences": [{
        "apiVersion": "batch/v1", "kind": "Job", "name": job.metadata.name, "uid": job.metadata.uid,
        "controller": True, "blockOwnerDeletion": True}]}
    return await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", body)


async def test_finish_by_workload_name_completes_the_job(
    batch: BatchV1Api, core: CoreV1Api, custom: CustomObjectsApi, control: SimControl
) -> None:
    job = await batch.create_namespaced_job("default", job_body("j1", parallelism=2, completions=4))
    wl = await _workload_owned_by_job(custom, job)
    await eventually(lambda: _running_pods(core, 2))
    res = await control.post("clusters/manager/finish",
                             {"namespace": "default", "name": wl["metadata"]["name"], "succeeded": True})
    assert (res["kind"], res["name"], res["pods"]) == ("Job", "j1", 2)
    j = await eventually(lambda: _job_condition(batch, "j1", "Complete"), what="j1 Complete")
    assert j.status.succeeded == 4 and not j.status.failed


async def test_fail_marks_the_job_failed(batch: BatchV1Api, core: CoreV1Api, control: SimControl) -> None:
    await batch.create_namespaced_job("default", job_body("j1", parallelism=2, completions=2))
    await eventually(lambda: _running_pods(core, 2))
    await control.post("clusters/manager/finish", {"namespace": "default", "name": "j1", "succeeded": False})
    j = await eventually(lambda: _job_condition(batch, "j1", "Failed"), what="j1 Failed")
    assert _cond(j, "Failed").reason == "BackoffLimitExceeded" and not j.status.active

    async def pods_failed() -> bool:
        return all(p.status.phase == "Failed" for p in (await core.list_namespaced_pod("default")).items)

    await eventually(pods_failed)


async def test_finish_of_a_bare_workload_sets_finished(custom: CustomObjectsApi, control: SimControl) -> None:
    await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", workload_body("w1"))
    await control.post("clusters/manager/finish", {"namespace": "default", "name": "w1", "succeeded": False})
    w = await custom.get_namespaced_custom_object_status(*KUEUE, "default", "workloads", "w1")
    [finished] = [c for c in w["status"]["conditions"] if c["type"] == "Finished"]
    assert (finished["status"], finished["reason"]) == ("True", "Failed")


async def test_finish_goes_to_the_worker_running_a_multikueue_job(
    sim: KubeSim, batch: BatchV1Api, control: SimControl, tmp_path: Path
) -> None:
    await batch.create_namespaced_job("default", job_body("j1", queue="lq", managedBy="kueue.x-k8s.io/multikueue"))
    worker = await api_client(sim, "worker-1", tmp_path)
    try:
        wbatch = BatchV1Api(worker)
        await wbatch.create_namespaced_job("default", job_body("j1"))
        res = await control.post("clusters/manager/finish", {"namespace": "default", "name": "j1", "succeeded": True})
        assert res["cluster"] == "worker-1"
        await eventually(lambda: _job_condition(wbatch, "j1", "Complete"))
        # On a worker, MultiKueue's copy of a Job names its Workload in a label, not an owner reference.
        await CustomObjectsApi(worker).create_namespaced_custom_object(
            *KUEUE, "default", "workloads", workload_body("job-j2-abcde"))
        body = job_body("j2")
        body["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "job-j2-abcde"
        await wbatch.create_namespaced_job("default", body)
        res = await control.post("clusters/worker-1/finish", {"namespace": "default", "name": "job-j2-abcde"})
        assert (res["kind"], res["name"]) == ("Job", "j2")
        await eventually(lambda: _job_condition(wbatch, "j2", "Complete"))
    finally:
        await worker.close()


async def test_pods_readiness_overrides(batch: BatchV1Api, core: CoreV1Api, control: SimControl) -> None:
    await batch.create_namespaced_job("default", job_body("j1", parallelism=2, completions=2))

    async def ready_count(n: int) -> bool:
        j = await batch.read_namespaced_job_status("j1", "default")
        return (j.status.ready or 0) == n and j.status.active == 2

    await eventually(lambda: ready_count(2))
    await control.post("clusters/manager/pods", {"namespace": "default", "name": "j1", "ready": False})
    await eventually(lambda: ready_count(0), what="pods lost Ready")
    await control.post("clusters/manager/pods", {"namespace": "default", "name": "j1", "ready": True})
    await eventually(lambda: ready_count(2), what="pods Ready again")

    # neverReady applies to pods that do not exist yet.
    await control.post("clusters/manager/pods", {"namespace": "default", "name": "j2", "neverReady": True})
    await batch.create_namespaced_job("default", job_body("j2"))

    async def j2_running_not_ready() -> bool:
        pods = (await core.list_namespaced_pod("default", label_selector="job-name=j2")).items
        return len(pods) == 1 and pods[0].status.phase == "Running"

    await eventually(j2_running_not_ready)

    async def no_timer_left() -> bool:  # the readiness timer has fired and changed nothing
        return (await control.state())["clusters"]["manager"]["pendingTimers"] == 0

    await eventually(no_timer_left)
    pod = (await core.list_namespaced_pod("default", label_selector="job-name=j2")).items[0]
    assert _cond(pod, "Ready").status == "False"


@pytest.mark.parametrize(
    "path, body, field",
    [
        ("finish", {"name": "x"}, "namespace"),
        ("finish", {"namespace": "default", "name": "x", "succeeded": "yes"}, "succeeded"),
        ("pods", {"namespace": "default", "name": "x"}, "ready"),
        ("faults", {"type": "errors", "code": 404}, "errors.code"),
        ("faults", {"type": "latency", "ms": -1}, "latency.ms"),
        ("faults", {"type": "bogus"}, "type"),
    ],
    ids=["finish-no-namespace", "finish-bad-succeeded", "pods-no-mode", "errors-bad-code", "latency-negative",
         "unknown-fault"],
)
async def test_bad_control_requests_name_the_field(control: SimControl, path: str, body: dict, field: str) -> None:
    res = await control.post(f"clusters/manager/{path}", body, expect=400)
    assert field in res["error"]


async def test_unknown_targets_are_404(control: SimControl) -> None:
    await control.post("clusters/nope/finish", {"namespace": "default", "name": "x"}, expect=404)
    await control.post("clusters/manager/finish", {"namespace": "default", "name": "x"}, expect=404)


async def test_disconnect_and_reconnect(sim: KubeSim, core: CoreV1Api, control: SimControl, tmp_path: Path) -> None:
    from kubernetes_asyncio import watch

    await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    w = watch.Watch()
    seen: list[str] = []

    async def consume() -> None:
        async for ev in w.stream(core.list_namespaced_config_map, "default", timeout_seconds=30):
            seen.append(ev["type"])

    task = asyncio.create_task(consume())
    await eventually(lambda: seen == ["ADDED"])
    await control.post("clusters/manager/disconnect")
    with pytest.raises(aiohttp.ClientError):
        await asyncio.wait_for(task, 5)  # the open watch is cut
    await w.close()
    with pytest.raises(aiohttp.ClientError):
        await core.list_namespaced_config_map("default")
    # Other clusters are unaffected.
    worker = await api_client(sim, "worker-1", tmp_path)
    try:
        assert (await CoreV1Api(worker).list_namespace()).items
    finally:
        await worker.close()
    await control.post("clusters/manager/reconnect")
    assert [c.metadata.name for c in (await core.list_namespaced_config_map("default")).items] == ["a"]


async def test_partial_disconnect_cuts_only_clients_with_that_user_agent(sim: KubeSim, core: CoreV1Api,
                                                                        control: SimControl, tmp_path: Path) -> None:
    """MultiKueue's "the manager loses a worker": the worker's own clients keep working."""
    import yaml

    from kq.kube import KubeClient, Unreachable

    remote = await KubeClient.from_kubeconfig_dict(yaml.safe_load(sim.kubeconfig_yaml("manager")),
                                                   user_agent="kq-multikueue/test")
    try:
        assert (await remote.list("namespace"))[0]
        done = await control.post("clusters/manager/disconnect", {"userAgentPrefix": "kq-multikueue"})
        assert done["userAgentPrefix"] == "kq-multikueue"
        with pytest.raises(Unreachable):
            await remote.list("namespace")
        assert (await core.list_namespace()).items  # any other client still gets through
        await control.post("clusters/manager/disconnect", {"userAgentPrefix": ""}, expect=400)
        await control.post("clusters/manager/reconnect")
        assert (await remote.list("namespace"))[0]
    finally:
        await remote.close()


async def test_injected_errors(core: CoreV1Api, custom: CustomObjectsApi, control: SimControl) -> None:
    await control.post("clusters/manager/faults", {"type": "errors", "code": 429, "count": 2, "verbs": ["list"],
                                                   "resources": ["configmaps"], "retryAfterSeconds": 3})
    await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})  # not a list: passes
    await custom.list_namespaced_custom_object(*KUEUE, "default", "workloads")  # other resource: passes
    for _ in range(2):
        with pytest.raises(ApiException) as e:
            await core.list_namespaced_config_map("default")
        assert e.value.status == 429 and e.value.headers["Retry-After"] == "3"
        assert json.loads(e.value.body)["reason"] == "TooManyRequests"
    await core.list_namespaced_config_map("default")  # used up

    await control.post("clusters/manager/faults", {"type": "errors", "code": 500, "count": 5})
    with pytest.raises(ApiException) as e:
        await core.read_namespaced_config_map("a", "default")
    assert e.value.status == 500
    await control.delete("clusters/manager/faults")
    await core.read_namespaced_config_map("a", "default")

    await control.post("clusters/manager/faults", {"type": "errors", "code": 409, "verbs": ["patch"],
                                                   "resources": ["workloads/status"]})
    await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", workload_body("w1"))
    await custom.patch_namespaced_custom_object(*KUEUE, "default", "workloads", "w1", {"spec": {"priority": 1}},
                                                _content_type=MERGE)  # main resource: passes
    with pytest.raises(ApiException) as e:
        await custom.patch_namespaced_custom_object_status(*KUEUE, "default", "workloads", "w1",
                                                           {"status": {"a": 1}}, _content_type=MERGE)
    assert e.value.status == 409


async def test_latency(core: CoreV1Api, control: SimControl) -> None:
    await control.post("clusters/manager/faults", {"type": "latency", "ms": 200})
    t0 = time.monotonic()
    await core.list_namespace()
    assert time.monotonic() - t0 >= 0.2
    await control.delete("clusters/manager/faults")
    t0 = time.monotonic()
    await core.list_namespace()
    assert time.monotonic() - t0 < 0.2


async def test_state_reports_activity(batch: BatchV1Api, control: SimControl) -> None:
    before = (await control.state())["clusters"]
    assert set(before) == {"manager", "worker-1"}
    await batch.create_namespaced_job("default", job_body("j1", runtime="300ms"))

    async def busy() -> dict:
        m = (await control.state())["clusters"]["manager"]
        return m if m["pendingTimers"] > 0 else {}

    m = await eventually(busy, what="a pending runtime timer")
    assert int(m["resourceVersion"]) > int(before["manager"]["resourceVersion"])

    async def settled() -> dict:
        m = (await control.state())["clusters"]["manager"]
        return m if m["pendingTimers"] == 0 and m["msSinceLastChange"] >= 100 else {}

    await eventually(settled, what="timers done and no change for 100 ms")
    assert (await control.state())["clusters"]["worker-1"]["resourceVersion"] == before["worker-1"]["resourceVersion"]
