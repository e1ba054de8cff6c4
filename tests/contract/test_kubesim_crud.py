"""Create, read, update, list: the API server's semantics through kubernetes-asyncio."""

from __future__ import annotations

import json
import re

import pytest
from contract.sim_objects import KUEUE, MERGE, make_namespace, workload_body
from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

pytestmark = pytest.mark.timeout(30)


def status_of(e: ApiException) -> dict:
    body = json.loads(e.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure", body
    assert body["code"] == e.status
    return body


async def test_namespaced_and_cluster_scoped_crud(core: CoreV1Api, custom: CustomObjectsApi) -> None:
    await make_namespace(core, "team-a")
    cm = await core.create_namespaced_config_map("team-a", {"metadata": {"name": "c1"}, "data": {"k": "v"}})
    assert cm.metadata.namespace == "team-a" and cm.metadata.uid and cm.metadata.creation_timestamp
    assert cm.metadata.generation == 1 and int(cm.metadata.resource_version) > 0

    rf = await custom.create_cluster_custom_object(*KUEUE, "resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}})
    assert rf["metadata"]["name"] == "default" and "namespace" not in rf["metadata"]

    got = await custom.get_cluster_custom_object(*KUEUE, "resourceflavors", "default")
    assert got == rf
    listed = await core.list_namespaced_config_map("team-a")
    assert [c.metadata.name for c in listed.items] == ["c1"]
    assert int(listed.metadata.resource_version) >= int(cm.metadata.resource_version)

    # A cluster-scoped kind is not reachable under a namespace, and the reverse.
    with pytest.raises(ApiException) as e:
        await custom.get_namespaced_custom_object(*KUEUE, "team-a", "resourceflavors", "default")
    assert e.value.status == 404
    await core.delete_namespaced_config_map("c1", "team-a")
    with pytest.raises(ApiException) as e:
        await core.read_namespaced_config_map("c1", "team-a")
    body = status_of(e.value)
    assert body["reason"] == "NotFound" and body["message"] == 'configmaps "c1" not found'
    assert body["details"] == {"name": "c1", "kind": "configmaps"}


async def test_create_twice_is_409_already_exists(core: CoreV1Api, custom: CustomObjectsApi) -> None:
    await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", workload_body("w1"))
    with pytest.raises(ApiException) as e:
        await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", workload_body("w1"))
    body = status_of(e.value)
    assert (e.value.status, body["reason"]) == (409, "AlreadyExists")
    assert body["message"] == 'workloads.kueue.x-k8s.io "w1" already exists'
    assert body["details"]["group"] == "kueue.x-k8s.io"


async def test_create_in_a_missing_namespace_is_404(custom: CustomObjectsApi) -> None:
    with pytest.raises(ApiException) as e:
        await custom.create_namespaced_custom_object(*KUEUE, "nope", "workloads", workload_body("w1"))
    body = status_of(e.value)
    assert (e.value.status, body["message"]) == (404, 'namespaces "nope" not found')


@pytest.mark.parametrize(
    "name, code",
    [("Upper", 422), ("under_score", 422), ("a" * 254, 422), ("ok-name.with.dots", 201)],
    ids=["upper-case", "underscore", "too-long", "dns-subdomain"],
)
async def test_names_are_validated(custom: CustomObjectsApi, name: str, code: int) -> None:
    try:
        await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", workload_body(name))
        got = 201
    except ApiException as e:
        got = e.status
        assert status_of(e)["reason"] == "Invalid"
    assert got == code


async def test_label_values_are_validated(core: CoreV1Api) -> None:
    with pytest.raises(ApiException) as e:
        await core.create_namespaced_config_map("default", {"metadata": {"name": "c", "labels": {"k": "x" * 64}}})
    assert e.value.status == 422


async def test_generate_name(core: CoreV1Api) -> None:
    names = set()
    for _ in range(20):
        cm = await core.create_namespaced_config_map("default", {"metadata": {"generateName": "cfg-"}})
        assert re.fullmatch(r"cfg-[a-z0-9]{5}", cm.metadata.name), cm.metadata.name
        names.add(cm.metadata.name)
    assert len(names) == 20
    with pytest.raises(ApiException) as e:
        await core.create_namespaced_config_map("default", {"metadata": {}})
    assert e.value.status == 422


async def test_stale_put_is_409_conflict(custom: CustomObjectsApi) -> None:
    w = await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", workload_body("w1"))
    w["spec"]["priority"] = 5
    updated = await custom.replace_namespaced_custom_object(*KUEUE, "default", "workloads", "w1", w)
    assert int(updated["metadata"]["resourceVersion"]) > int(w["metadata"]["resourceVersion"])
    w["spec"]["priority"] = 6  # still carries the old resourceVersion
    with pytest.raises(ApiException) as e:
        await custom.replace_namespaced_custom_object(*KUEUE, "default", "workloads", "w1", w)
    body = status_of(e.value)
    assert (e.value.status, body["reason"]) == (409, "Conflict")
    assert "the object has been modified" in body["message"]
    # A custom resource cannot be updated without a resourceVersion (no unconditional update).
    del w["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as e:
        await custom.replace_namespaced_custom_object(*KUEUE, "default", "workloads", "w1", w)
    assert e.value.status == 422


async def test_noop_update_keeps_resource_version(custom: CustomObjectsApi) -> None:
    w = await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", workload_body("w1"))
    again = await custom.replace_namespaced_custom_object(*KUEUE, "default", "workloads", "w1", w)
    assert again["metadata"]["resourceVersion"] == w["metadata"]["resourceVersion"]


async def test_generation_moves_on_spec_changes_only(custom: CustomObjectsApi) -> None:
    w = await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", workload_body("w1"))
    assert w["metadata"]["generation"] == 1
    w = await custom.patch_namespaced_custom_object(*KUEUE, "default", "workloads", "w1",
                                                    {"metadata": {"labels": {"a": "b"}}}, _content_type=MERGE)
    assert w["metadata"]["generation"] == 1
    w = await custom.patch_namespaced_custom_object_status(
        *KUEUE, "default", "workloads", "w1", {"status": {"conditions": []}}, _content_type=MERGE)
    assert w["metadata"]["generation"] == 1
    w = await custom.patch_namespaced_custom_object(*KUEUE, "default", "workloads", "w1",
                                                    {"spec": {"active": False}}, _content_type=MERGE)
    assert w["metadata"]["generation"] == 2


async def test_status_subresource_isolation(custom: CustomObjectsApi) -> None:
    w = await custom.create_namespaced_custom_object(
        *KUEUE, "default", "workloads", {**workload_body("w1"), "status": {"ignored": True}})
    assert "status" not in w  # status is not set by create
    # The main resource ignores status...
    w = await custom.patch_namespaced_custom_object(
        *KUEUE, "default", "workloads", "w1", {"spec": {"priority": 3}, "status": {"x": 1}}, _content_type=MERGE)
    assert w["spec"]["priority"] == 3 and "status" not in w
    # ...and the status subresource ignores everything else.
    w = await custom.patch_namespaced_custom_object_status(
        *KUEUE, "default", "workloads", "w1", {"spec": {"priority": 9}, "status": {"x": 1}}, _content_type=MERGE)
    assert w["spec"]["priority"] == 3 and w["status"] == {"x": 1}
    w["status"] = {"x": 2}
    w["spec"]["priority"] = 10
    w = await custom.replace_namespaced_custom_object_status(*KUEUE, "default", "workloads", "w1", w)
    assert w["spec"]["priority"] == 3 and w["status"] == {"x": 2}
    # A kind without a status subresource has no /status path.
    await custom.create_cluster_custom_object(*KUEUE, "resourceflavors", {"metadata": {"name": "rf"}})
    with pytest.raises(ApiException) as e:
        await custom.get_cluster_custom_object_status(*KUEUE, "resourceflavors", "rf")
    assert e.value.status == 404


@pytest.mark.parametrize(
    "selector, want",
    [
        ("tier=gold", ["a"]),
        ("tier==gold", ["a"]),
        ("tier!=gold", ["b", "c"]),
        ("tier in (gold,silver)", ["a", "b"]),
        ("tier notin (gold)", ["b", "c"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c"]),
        ("tier,team=x", ["a"]),
    ],
    ids=["eq", "double-eq", "neq", "in", "notin", "exists", "not-exists", "and"],
)
async def test_label_selectors(core: CoreV1Api, selector: str, want: list[str]) -> None:
    for name, labels in (("a", {"tier": "gold", "team": "x"}), ("b", {"tier": "silver"}), ("c", {})):
        await core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": labels}})
    got = await core.list_namespaced_config_map("default", label_selector=selector)
    assert [c.metadata.name for c in got.items] == want


async def test_field_selectors(core: CoreV1Api) -> None:
    await make_namespace(core, "other")
    for ns in ("default", "other"):
        for name in ("a", "b"):
            await core.create_namespaced_config_map(ns, {"metadata": {"name": name}})
    got = await core.list_config_map_for_all_namespaces(field_selector="metadata.name=a")
    assert [(c.metadata.namespace, c.metadata.name) for c in got.items] == [("default", "a"), ("other", "a")]
    got = await core.list_config_map_for_all_namespaces(field_selector="metadata.namespace!=default")
    assert [(c.metadata.namespace, c.metadata.name) for c in got.items] == [("other", "a"), ("other", "b")]
    with pytest.raises(ApiException) as e:
        await core.list_config_map_for_all_namespaces(field_selector="spec.whatever=1")
    assert e.value.status == 400


async def test_list_pages_with_limit_and_continue(core: CoreV1Api) -> None:
    for i in range(7):
        await core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    seen, cont, pages = [], None, 0
    while True:
        page = await core.list_namespaced_config_map("default", limit=3, _continue=cont)
        pages += 1
        seen += [c.metadata.name for c in page.items]
        cont = page.metadata._continue
        if not cont:
            break
    assert seen == [f"c{i}" for i in range(7)] and pages == 3


async def test_discovery(kube: ApiClient) -> None:
    from kubernetes_asyncio.client import ApisApi, BatchV1Api, CoreApi

    versions = await CoreApi(kube).get_api_versions()
    assert versions.versions == ["v1"]
    groups = {g.name: g.preferred_version.version for g in (await ApisApi(kube).get_api_versions()).groups}
    assert groups["kueue.x-k8s.io"] == "v1beta2" and groups["batch"] == "v1" and groups["jobset.x-k8s.io"] == "v1alpha2"
    res = {r.name: r for r in (await CoreV1Api(kube).get_api_resources()).resources}
    assert res["pods"].namespaced and not res["nodes"].namespaced and "pods/status" in res
    jobs = {r.name for r in (await BatchV1Api(kube).get_api_resources()).resources}
    assert {"jobs", "jobs/status"} <= jobs
    raw, status, _ = await kube.call_api("/apis/kueue.x-k8s.io/v1beta2", "GET", response_types_map={200: "object"},
                                         auth_settings=["BearerToken"], _return_http_data_only=False)
    assert status == 200
    scopes = {r["name"]: r["namespaced"] for r in raw["resources"]}
    assert scopes == {
        "resourceflavors": False, "clusterqueues": False, "clusterqueues/status": False, "localqueues": True,
        "localqueues/status": True, "cohorts": False, "cohorts/status": False, "topologies": False,
        "admissionchecks": False, "admissionchecks/status": False, "multikueueconfigs": False,
        "multikueueclusters": False, "multikueueclusters/status": False, "workloadpriorityclasses": False,
        "workloads": True, "workloads/status": True,
    }
