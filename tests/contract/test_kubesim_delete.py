"""DELETE: finalizers, preconditions, owner-reference cascades (background, orphan, foreground), namespaces."""

from __future__ import annotations

import json
from typing import Any

import pytest
from contract.sim_objects import KUEUE, MERGE, job_body, make_namespace, workload_body
from kubernetes_asyncio.client import BatchV1Api, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException
from support.wait import eventually

pytestmark = pytest.mark.timeout(30)


async def _exists(core: CoreV1Api, name: str, ns: str = "default") -> bool:
    try:
        await core.read_namespaced_config_map(name, ns)
        return True
    except ApiException as e:
        if e.status == 404:
            return False
        raise


def _owned_by(owner: Any, name: str) -> dict[str, Any]:
    meta = owner.metadata
    return {"metadata": {"name": name, "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": meta.name, "uid": meta.uid}]}}


async def test_finalizers_hold_the_object_until_removed(custom: CustomObjectsApi) -> None:
    body = workload_body("w1")
    body["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    w = await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", body)
    deleting = await custom.delete_namespaced_custom_object(*KUEUE, "default", "workloads", "w1")
    assert deleting["metadata"]["deletionTimestamp"]
    assert deleting["metadata"]["generation"] == w["metadata"]["generation"] + 1
    got = await custom.get_namespaced_custom_object(*KUEUE, "default", "workloads", "w1")
    assert got["metadata"]["deletionTimestamp"] == deleting["metadata"]["deletionTimestamp"]
    # Status writes still work while it is being deleted; the last finalizer's removal deletes it.
    await custom.patch_namespaced_custom_object_status(*KUEUE, "default", "workloads", "w1",
                                                      {"status": {"a": 1}}, _content_type=MERGE)
    await custom.patch_namespaced_custom_object(*KUEUE, "default", "workloads", "w1",
                                               {"metadata": {"finalizers": None}}, _content_type=MERGE)
    with pytest.raises(ApiException) as e:
        await custom.get_namespaced_custom_object(*KUEUE, "default", "workloads", "w1")
    assert e.value.status == 404


@pytest.mark.parametrize("which", ["uid", "resourceVersion"])
async def test_delete_preconditions(core: CoreV1Api, which: str) -> None:
    cm = await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    pre = {"uid": "not-the-uid"} if which == "uid" else {"resourceVersion": "1"}
    with pytest.raises(ApiException) as e:
        await core.delete_namespaced_config_map("a", "default", body={"preconditions": pre})
    assert e.value.status == 409 and "Precondition failed" in json.loads(e.value.body)["message"]
    good = {"uid": cm.metadata.uid, "resourceVersion": cm.metadata.resource_version}
    await core.delete_namespaced_config_map("a", "default", body={"preconditions": good})
    assert not await _exists(core, "a")


async def test_background_cascade(core: CoreV1Api) -> None:
    owner = await core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    other = await core.create_namespaced_config_map("default", {"metadata": {"name": "other"}})
    await core.create_namespaced_config_map("default", _owned_by(owner, "dep"))
    shared = _owned_by(owner, "shared")
    shared["metadata"]["ownerReferences"] += _owned_by(other, "x")["metadata"]["ownerReferences"]
    await core.create_namespaced_config_map("default", shared)
    await core.delete_namespaced_config_map("owner", "default", propagation_policy="Background")
    await eventually(lambda: _gone_and_detached(core), what="dependent gone, shared one detached")


async def _gone_and_detached(core: CoreV1Api) -> bool:
    if await _exists(core, "dep"):
        return False
    shared = await core.read_namespaced_config_map("shared", "default")
    return [r.name for r in shared.metadata.owner_references] == ["other"]


async def test_orphan_keeps_dependents_without_the_reference(core: CoreV1Api) -> None:
    owner = await core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    await core.create_namespaced_config_map("default", _owned_by(owner, "dep"))
    await core.delete_namespaced_config_map("owner", "default", propagation_policy="Orphan")

    async def orphaned() -> bool:
        dep = await core.read_namespaced_config_map("dep", "default")
        return not await _exists(core, "owner") and not dep.metadata.owner_references

    await eventually(orphaned)


async def test_foreground_waits_for_dependents(core: CoreV1Api) -> None:
    owner = await core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    dep = _owned_by(owner, "dep")
    dep["metadata"]["finalizers"] = ["example.com/hold"]
    await core.create_namespaced_config_map("default", dep)
    await core.delete_namespaced_config_map("owner", "default", propagation_policy="Foreground")

    async def dep_deleting() -> bool:
        d = await core.read_namespaced_config_map("dep", "default")
        return d.metadata.deletion_timestamp is not None

    await eventually(dep_deleting)
    held = await core.read_namespaced_config_map("owner", "default")
    assert held.metadata.finalizers == ["foregroundDeletion"] and held.metadata.deletion_timestamp
    await core.patch_namespaced_config_map("dep", "default", {"metadata": {"finalizers": None}}, _content_type=MERGE)
    await eventually(lambda: _none_exist(core, "owner", "dep"))


async def _none_exist(core: CoreV1Api, *names: str) -> bool:
    for n in names:
        if await _exists(core, n):
            return False
    return True


async def test_a_dangling_owner_reference_is_collected(core: CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", {"metadata": {"name": "dep", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}]}})
    await eventually(lambda: _none_exist(core, "dep"))


async def test_batch_v1_job_delete_orphans_pods_by_default(core: CoreV1Api, batch: BatchV1Api) -> None:
    await batch.create_namespaced_job("default", job_body("j1", parallelism=2, completions=2))
    await eventually(lambda: _pod_count(core, 2), what="pods of j1")
    await batch.delete_namespaced_job("j1", "default")  # Kubernetes' default for batch/v1: orphan

    async def orphaned_pods() -> bool:
        pods = (await core.list_namespaced_pod("default")).items
        return len(pods) == 2 and all(not p.metadata.owner_references for p in pods)

    await eventually(orphaned_pods)
    await batch.create_namespaced_job("default", job_body("j2", parallelism=1))
    await eventually(lambda: _pod_count(core, 3))
    await batch.delete_namespaced_job("j2", "default", propagation_policy="Background")
    await eventually(lambda: _pod_count(core, 2), what="j2's pod collected")


async def _pod_count(core: CoreV1Api, n: int) -> bool:
    return len((await core.list_namespaced_pod("default")).items) == n


async def test_deleting_a_namespace_deletes_its_contents(core: CoreV1Api, custom: CustomObjectsApi) -> None:
    await make_namespace(core, "gone")
    await core.create_namespaced_config_map("gone", {"metadata": {"name": "a", "finalizers": ["example.com/hold"]}})
    await custom.create_namespaced_custom_object(*KUEUE, "gone", "workloads", workload_body("w1"))
    await core.delete_namespace("gone")
    await eventually(lambda: _workload_gone(custom), what="w1 deleted with its namespace")
    ns = await core.read_namespace("gone")  # held by a's finalizer
    assert ns.status.phase == "Terminating"
    with pytest.raises(ApiException) as e:  # no new content in a terminating namespace
        await core.create_namespaced_config_map("gone", {"metadata": {"name": "late"}})
    assert e.value.status == 403
    await core.patch_namespaced_config_map("a", "gone", {"metadata": {"finalizers": None}}, _content_type=MERGE)

    async def namespace_gone() -> bool:
        try:
            await core.read_namespace("gone")
            return False
        except ApiException as e:
            return e.status == 404

    await eventually(namespace_gone)
    assert (await core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=gone")).items == []


async def _workload_gone(custom: CustomObjectsApi) -> bool:
    return not (await custom.list_namespaced_custom_object(*KUEUE, "gone", "workloads"))["items"]
