"""The Job and JobSet controllers and Kueue's job mutation."""

from __future__ import annotations

from typing import Any

import pytest
from contract.sim_objects import MERGE, job_body
from kubernetes_asyncio.client import BatchV1Api, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException
from support.wait import eventually

pytestmark = pytest.mark.timeout(30)
QUEUE = "kueue.x-k8s.io/queue-name"
JOBSET = ("jobset.x-k8s.io", "v1alpha2")


async def _pods(core: CoreV1Api, job: str) -> list[Any]:
    pods = (await core.list_namespaced_pod("default", label_selector=f"batch.kubernetes.io/job-name={job}")).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def _cond(job: Any, ctype: str) -> str | None:
    for c in job.status.conditions or ():
        if c.type == ctype:
            return c.status
    return None


async def test_queued_job_is_created_suspended(batch: BatchV1Api, core: CoreV1Api) -> None:
    j = await batch.create_namespaced_job("default", job_body("j1", queue="lq", suspend=False))
    assert j.spec.suspend is True
    assert j.spec.template.metadata.labels["batch.kubernetes.io/job-name"] == "j1"
    assert j.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": j.metadata.uid}
    plain = await batch.create_namespaced_job("default", job_body("j2"))
    assert plain.spec.suspend is False
    await eventually(lambda: _suspended(batch, "j1"), what="Suspended condition on j1")
    assert await _pods(core, "j1") == []


async def _suspended(batch: BatchV1Api, name: str) -> bool:
    j = await batch.read_namespaced_job_status(name, "default")
    return _cond(j, "Suspended") == "True" and not j.status.active


async def test_unsuspend_runs_pods_and_suspend_removes_them(batch: BatchV1Api, core: CoreV1Api) -> None:
    body = job_body("j1", queue="lq", parallelism=3, completions=5)
    body["spec"]["template"]["metadata"]["annotations"]["note"] = "copied"
    await batch.create_namespaced_job("default", body)
    await eventually(lambda: _suspended(batch, "j1"))
    await batch.patch_namespaced_job("j1", "default", {"spec": {"suspend": False, "template": {
        "spec": {"nodeSelector": {"pool": "a"}}}}}, _content_type=MERGE)

    async def running() -> Any:
        j = await batch.read_namespaced_job_status("j1", "default")
        return j if (j.status.active, j.status.ready, _cond(j, "Suspended")) == (3, 3, "False") else None

    # No Node objects: pods go to the virtual pool whatever their nodeSelector.
    j = await eventually(running, what="3 active, ready pods")
    assert j.status.start_time is not None
    pods = await _pods(core, "j1")
    assert len(pods) == 3
    for p in pods:
        ref = p.metadata.owner_references[0]
        assert (ref.kind, ref.name, ref.uid, ref.controller) == ("Job", "j1", j.metadata.uid, True)
        assert p.metadata.annotations["note"] == "copied" and p.spec.node_selector == {"pool": "a"}
        assert p.metadata.labels["app"] == "j1" and p.spec.node_name == "kubesim-virtual"
    await batch.patch_namespaced_job("j1", "default", {"spec": {"suspend": True}}, _content_type=MERGE)

    async def stopped() -> bool:
        j = await batch.read_namespaced_job_status("j1", "default")
        pods = (await core.list_namespaced_pod("default")).items
        return _cond(j, "Suspended") == "True" and not j.status.active and j.status.start_time is None and not pods

    await eventually(stopped, what="pods deleted, Suspended, startTime cleared")
    assert not (await batch.read_namespaced_job_status("j1", "default")).status.failed


async def test_runtime_annotation_completes_the_job(batch: BatchV1Api) -> None:
    await batch.create_namespaced_job("default", job_body("j1", parallelism=2, completions=3, runtime="200ms"))

    async def complete() -> Any:
        j = await batch.read_namespaced_job_status("j1", "default")
        return j if _cond(j, "Complete") == "True" else None

    j = await eventually(complete, what="Complete condition")
    assert (j.status.succeeded, j.status.active or 0, j.status.failed or 0) == (3, 0, 0)
    assert _cond(j, "SuccessCriteriaMet") == "True" and j.status.completion_time is not None


async def test_indexed_job_gives_each_pod_an_index(batch: BatchV1Api, core: CoreV1Api) -> None:
    await batch.create_namespaced_job("default", job_body("j1", parallelism=3, completions=3, **{"completionMode": "Indexed"}))
    await eventually(lambda: _pod_count(core, "j1", 3))
    pods = await _pods(core, "j1")
    indexes = sorted(p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods)
    assert indexes == ["0", "1", "2"]


async def _pod_count(core: CoreV1Api, job: str, n: int) -> bool:
    return len(await _pods(core, job)) == n


async def test_job_managed_by_another_controller_is_left_alone(batch: BatchV1Api, core: CoreV1Api) -> None:
    await batch.create_namespaced_job("default", job_body("j1", managedBy="kueue.x-k8s.io/multikueue"))
    await batch.create_namespaced_job("default", job_body("j2"))
    await eventually(lambda: _pod_count(core, "j2", 1))  # the controller has run
    assert await _pods(core, "j1") == []
    status = (await batch.read_namespaced_job_status("j1", "default")).status
    assert status is None or (status.active is None and not status.conditions)


async def test_pod_template_is_mutable_only_while_suspended_and_not_started(batch: BatchV1Api) -> None:
    await batch.create_namespaced_job("default", job_body("j1", queue="lq"))
    await eventually(lambda: _suspended(batch, "j1"))
    await batch.patch_namespaced_job("j1", "default", {"spec": {"template": {"spec": {
        "nodeSelector": {"a": "b"}, "schedulingGates": [{"name": "g"}]}}}}, _content_type=MERGE)
    with pytest.raises(ApiException) as e:  # not a scheduling directive
        await batch.patch_namespaced_job("j1", "default", {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure"}}}}, _content_type=MERGE)
    assert e.value.status == 422
    await batch.patch_namespaced_job("j1", "default", {"spec": {"suspend": False}}, _content_type=MERGE)

    async def started() -> bool:
        return (await batch.read_namespaced_job_status("j1", "default")).status.start_time is not None

    await eventually(started)
    with pytest.raises(ApiException) as e:
        await batch.patch_namespaced_job("j1", "default", {"spec": {"template": {"spec": {
            "nodeSelector": {"a": "c"}}}}}, _content_type=MERGE)
    assert e.value.status == 422


async def test_failed_pods_past_backoff_limit_fail_the_job(batch: BatchV1Api, core: CoreV1Api) -> None:
    await batch.create_namespaced_job("default", job_body("j1", backoffLimit=1))
    for round_ in range(2):
        pods = await eventually(lambda: _pods_running(core, "j1"), what=f"a running pod, round {round_}")
        await core.patch_namespaced_pod_status(pods[0].metadata.name, "default", {"status": {"phase": "Failed"}},
                                               _content_type=MERGE)

    async def failed() -> Any:
        j = await batch.read_namespaced_job_status("j1", "default")
        return j if _cond(j, "Failed") == "True" else None

    j = await eventually(failed)
    assert j.status.failed == 2 and not j.status.active
    reasons = {c.type: c.reason for c in j.status.conditions}
    assert reasons["Failed"] == reasons["FailureTarget"] == "BackoffLimitExceeded"


async def _pods_running(core: CoreV1Api, job: str) -> list[Any]:
    return [p for p in await _pods(core, job) if p.status.phase == "Running"]


async def test_jobset_creates_child_jobs_and_completes(custom: CustomObjectsApi, batch: BatchV1Api) -> None:
    tmpl = job_body("x", runtime="100ms", parallelism=1, completions=1)
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "labels": {QUEUE: "lq"}},
        "spec": {"replicatedJobs": [
            {"name": "workers", "replicas": 2, "template": {"spec": tmpl["spec"]}},
            {"name": "driver", "template": {"spec": tmpl["spec"]}},
        ]},
    }
    created = await custom.create_namespaced_custom_object(*JOBSET, "default", "jobsets", js)
    assert created["spec"]["suspend"] is True  # Kueue's webhook
    assert (await batch.list_namespaced_job("default")).items == []
    await custom.patch_namespaced_custom_object(*JOBSET, "default", "jobsets", "js", {"spec": {"suspend": False}},
                                                _content_type=MERGE)

    async def completed() -> Any:
        got = await custom.get_namespaced_custom_object(*JOBSET, "default", "jobsets", "js")
        conds = {c["type"]: c["status"] for c in got.get("status", {}).get("conditions", [])}
        return got if conds.get("Completed") == "True" else None

    got = await eventually(completed, what="JobSet Completed")
    names = sorted(j.metadata.name for j in (await batch.list_namespaced_job("default")).items)
    assert names == ["js-driver-0", "js-workers-0", "js-workers-1"]
    assert {s["name"]: s["succeeded"] for s in got["status"]["replicatedJobsStatus"]} == {"workers": 2, "driver": 1}


@pytest.mark.parametrize("change, field", [
    pytest.param({"completions": {}}, "spec.completions", id="completions-a-mapping"),  # crashed the job controller
    pytest.param({"parallelism": "2"}, "spec.parallelism", id="parallelism-a-string"),
    pytest.param({"backoffLimit": 2**40}, "spec.backoffLimit", id="backoff-beyond-int32"),
    pytest.param({"suspend": "yes"}, "spec.suspend", id="suspend-not-a-boolean"),
    pytest.param({"completionMode": "Sometimes"}, "spec.completionMode", id="unknown-completion-mode"),
])
async def test_a_malformed_job_is_refused_naming_the_field(batch: BatchV1Api, change: dict[str, Any],
                                                           field: str) -> None:
    """Found by the hostile-input fuzzing (tests/fuzz): the API server refuses these, so no controller meets them."""
    body = job_body("bad")
    body["spec"].update(change)
    with pytest.raises(ApiException) as e:
        await batch.create_namespaced_job("default", body)
    assert e.value.status == 422 and field in e.value.body, e.value.body


async def test_a_request_that_is_not_a_quantity_is_refused(batch: BatchV1Api) -> None:
    with pytest.raises(ApiException) as e:
        await batch.create_namespaced_job("default", job_body("bad", cpu="1e999999"))
    assert e.value.status == 422 and "spec.template.spec.containers[0].resources.requests[cpu]" in e.value.body


async def test_annotations_over_256_kib_are_refused(batch: BatchV1Api) -> None:
    body = job_body("big")
    body["metadata"]["annotations"] = {"note": "x" * (1 << 20)}
    with pytest.raises(ApiException) as e:
        await batch.create_namespaced_job("default", body)
    assert e.value.status == 422 and "metadata.annotations" in e.value.body
