"""PATCH: merge, JSON and strategic merge patches, their preconditions and content types."""

from __future__ import annotations

import json

import pytest
from contract.sim_objects import JSON_PATCH, KUEUE, MERGE, STRATEGIC, pod_body, workload_body
from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

pytestmark = pytest.mark.timeout(30)


async def test_merge_patch_merges_maps_and_deletes_nulls(custom: CustomObjectsApi) -> None:
    await custom.create_namespaced_custom_object(
        *KUEUE, "default", "workloads", {**workload_body("w1"), "metadata": {"name": "w1", "labels": {"a": "1", "b": "2"}}})
    w = await custom.patch_namespaced_custom_object(
        *KUEUE, "default", "workloads", "w1", {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"priority": 4}},
        _content_type=MERGE)
    assert w["metadata"]["labels"] == {"b": "2", "c": "3"} and w["spec"]["priority"] == 4
    assert w["spec"]["podSets"][0]["name"] == "main"  # untouched siblings stay


async def test_resource_version_in_a_merge_patch_is_a_precondition(custom: CustomObjectsApi) -> None:
    w = await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", workload_body("w1"))
    rv = w["metadata"]["resourceVersion"]
    ok = await custom.patch_namespaced_custom_object(
        *KUEUE, "default", "workloads", "w1", {"metadata": {"resourceVersion": rv}, "spec": {"priority": 1}},
        _content_type=MERGE)
    assert ok["spec"]["priority"] == 1
    with pytest.raises(ApiException) as e:  # rv is stale now
        await custom.patch_namespaced_custom_object(
            *KUEUE, "default", "workloads", "w1", {"metadata": {"resourceVersion": rv}, "spec": {"priority": 2}},
            _content_type=MERGE)
    assert e.value.status == 409 and json.loads(e.value.body)["reason"] == "Conflict"
    # The same holds on the status subresource.
    with pytest.raises(ApiException) as e:
        await custom.patch_namespaced_custom_object_status(
            *KUEUE, "default", "workloads", "w1", {"metadata": {"resourceVersion": rv}, "status": {"a": 1}},
            _content_type=MERGE)
    assert e.value.status == 409
    got = await custom.get_namespaced_custom_object(*KUEUE, "default", "workloads", "w1")
    assert got["spec"]["priority"] == 1 and "status" not in got


async def test_json_patch(custom: CustomObjectsApi) -> None:
    await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", workload_body("w1"))
    # A list body goes out as application/json-patch+json; say so anyway.
    w = await custom.patch_namespaced_custom_object(*KUEUE, "default", "workloads", "w1", [
        {"op": "test", "path": "/spec/queueName", "value": "lq"},
        {"op": "replace", "path": "/spec/queueName", "value": "lq2"},
        {"op": "add", "path": "/metadata/labels", "value": {"x~y/z": "1"}},
        {"op": "add", "path": "/spec/podSets/-", "value": {"name": "extra", "count": 2}},
        {"op": "copy", "from": "/spec/queueName", "path": "/metadata/labels/copied"},
        {"op": "remove", "path": "/metadata/labels/x~0y~1z"},
    ], _content_type=JSON_PATCH)
    assert w["spec"]["queueName"] == "lq2"
    assert w["metadata"]["labels"] == {"copied": "lq2"}
    assert [p["name"] for p in w["spec"]["podSets"]] == ["main", "extra"]
    with pytest.raises(ApiException) as e:
        await custom.patch_namespaced_custom_object(*KUEUE, "default", "workloads", "w1", [
            {"op": "test", "path": "/spec/queueName", "value": "lq"},
            {"op": "replace", "path": "/spec/queueName", "value": "never"},
        ], _content_type=JSON_PATCH)
    assert e.value.status == 422
    assert (await custom.get_namespaced_custom_object(*KUEUE, "default", "workloads", "w1"))["spec"]["queueName"] == "lq2"


async def test_strategic_merge_patch_on_a_builtin_kind(core: CoreV1Api) -> None:
    body = pod_body("p1", schedulingGates=[{"name": "g1"}, {"name": "g2"}],
                    tolerations=[{"key": "a", "operator": "Exists"}])
    body["spec"]["containers"].append({"name": "side", "image": "x"})
    body["metadata"]["finalizers"] = ["f1"]
    await core.create_namespaced_pod("default", body)
    p = await core.patch_namespaced_pod("p1", "default", {
        "metadata": {"finalizers": ["f2"]},
        "spec": {
            "containers": [{"name": "side", "image": "y"}],  # merged by name
            "schedulingGates": [{"name": "g1", "$patch": "delete"}],
            "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}],  # replaced
        },
    }, _content_type=STRATEGIC)
    assert [(c.name, c.image) for c in p.spec.containers] == [("main", "busybox"), ("side", "y")]
    assert [g.name for g in p.spec.scheduling_gates] == ["g2"]
    assert [t.key for t in p.spec.tolerations] == ["a", "b"]
    assert p.metadata.finalizers == ["f1", "f2"]  # finalizers merge as a set


async def test_strategic_merge_patch_on_a_custom_resource_is_415(custom: CustomObjectsApi) -> None:
    await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", workload_body("w1"))
    with pytest.raises(ApiException) as e:
        await custom.patch_namespaced_custom_object(*KUEUE, "default", "workloads", "w1", {"spec": {"priority": 1}},
                                                    _content_type=STRATEGIC)
    assert e.value.status == 415 and json.loads(e.value.body)["reason"] == "UnsupportedMediaType"


@pytest.mark.parametrize("ctype", ["application/apply-patch+yaml", "application/json"],
                         ids=["apply-patch", "plain-json"])
async def test_unsupported_patch_content_type_is_415(kube: ApiClient, core: CoreV1Api, ctype: str) -> None:
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c1"}})
    with pytest.raises(ApiException) as e:
        await core.patch_namespaced_config_map("c1", "default", {"data": {"a": "b"}}, _content_type=ctype)
    assert e.value.status == 415
