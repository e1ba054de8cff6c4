"""kubesim's apps/v1 controllers and Kueue's pod, Deployment and StatefulSet webhooks, through
kubernetes-asyncio: queued pods are created gated, Deployments run ReplicaSets that keep their pods,
StatefulSets create their ordinals in order and recreate deleted ones, LeaderWorkerSets run a leader
StatefulSet and one worker StatefulSet per leader."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from contract.sim_objects import MERGE
from kubernetes_asyncio.client import AppsV1Api, CoreV1Api, CustomObjectsApi
from support.wait import eventually

pytestmark = pytest.mark.timeout(30)
QUEUE = "kueue.x-k8s.io/queue-name"
GATE = "kueue.x-k8s.io/admission"


def _container(cpu: str = "100m") -> dict[str, Any]:
    return {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}


def _pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [_container()], "restartPolicy": "Never"}}


def _workload(kind: str, name: str, replicas: int, queued: bool = True, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "labels": {QUEUE: "lq"} if queued else {}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [_container()]}},
                     **spec}}


def _gates(pod: Any) -> list[str]:
    return [g.name for g in pod.spec.scheduling_gates or ()]


async def _pods(core: CoreV1Api, app: str) -> list[Any]:
    items = (await core.list_namespaced_pod("default", label_selector=f"app={app}")).items
    return sorted((p for p in items if p.metadata.deletion_timestamp is None), key=lambda p: p.metadata.name)


async def test_a_queued_pod_is_created_gated_and_runs_once_ungated(core: CoreV1Api) -> None:
    p = await core.create_namespaced_pod("default", _pod("p1", {QUEUE: "lq"}))
    assert _gates(p) == [GATE] and p.metadata.labels["kueue.x-k8s.io/managed"] == "true"
    plain = await core.create_namespaced_pod("default", _pod("p2", {}))
    assert _gates(plain) == []
    await core.patch_namespaced_pod("p1", "default", {"spec": {"schedulingGates": None,
                                                             "nodeSelector": {"pool": "a"}}}, _content_type=MERGE)

    async def bound() -> Any:
        got = await core.read_namespaced_pod("p1", "default")
        assert got.spec.node_name and got.status.phase == "Running", got.status
        return got

    got = await eventually(bound, what="the ungated pod is bound and runs")
    assert got.spec.node_selector == {"pool": "a"}


async def test_a_deployment_keeps_its_replicas_through_a_replicaset(apps: AppsV1Api, core: CoreV1Api) -> None:
    d = await apps.create_namespaced_deployment("default", _workload("Deployment", "web", 2))
    assert d.spec.template.metadata.labels[QUEUE] == "lq"  # Kueue's Deployment webhook

    async def two_gated() -> list[Any]:
        pods = await _pods(core, "web")
        assert len(pods) == 2 and all(_gates(p) == [GATE] for p in pods), [p.metadata.name for p in pods]
        return pods

    pods = await eventually(two_gated, what="two gated pods")
    ref = pods[0].metadata.owner_references[0]
    assert ref.kind == "ReplicaSet" and ref.name.startswith("web-")
    rs = await apps.read_namespaced_replica_set(ref.name, "default")
    assert rs.metadata.owner_references[0].kind == "Deployment"
    await core.delete_namespaced_pod(pods[0].metadata.name, "default")

    async def replaced() -> list[Any]:
        now = await _pods(core, "web")
        names = {p.metadata.name for p in now}
        assert len(now) == 2 and pods[0].metadata.name not in names, names
        return now

    await eventually(replaced, what="the deleted pod is replaced")
    await apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 1}}, _content_type=MERGE)

    async def one() -> list[Any]:
        now = await _pods(core, "web")
        assert len(now) == 1, [p.metadata.name for p in now]
        return now

    await eventually(one, what="scaled down to one pod")


async def test_a_statefulset_is_one_serving_group_created_in_order(apps: AppsV1Api, core: CoreV1Api) -> None:
    sts = await apps.create_namespaced_stateful_set("default", _workload("StatefulSet", "db", 3, serviceName="db"))
    labels = sts.spec.template.metadata.labels
    annotations = sts.spec.template.metadata.annotations
    assert labels[QUEUE] == "lq" and labels["kueue.x-k8s.io/pod-group-name"].startswith("statefulset-db-")
    assert annotations == {"kueue.x-k8s.io/pod-group-total-count": "3", "kueue.x-k8s.io/pod-group-serving": "true",
                           "kueue.x-k8s.io/pod-group-fast-admission": "true"}

    async def first_only() -> list[Any]:
        pods = await _pods(core, "db")
        assert [p.metadata.name for p in pods] == ["db-0"] and _gates(pods[0]) == [GATE], pods
        return pods

    await eventually(first_only, what="OrderedReady: db-0 only, gated")
    for i in range(3):  # ungating each as it comes lets the next one be created
        await eventually(_exists(core, f"db-{i}"), what=f"db-{i} created")
        await core.patch_namespaced_pod(f"db-{i}", "default", {"spec": {"schedulingGates": None}}, _content_type=MERGE)

    async def all_ready() -> Any:
        got = await apps.read_namespaced_stateful_set_status("db", "default")
        assert got.status.ready_replicas == 3, got.status
        return got

    await eventually(all_ready, what="three ready replicas")


def _exists(core: CoreV1Api, name: str) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return any(p.metadata.name == name for p in await _pods(core, "db"))
    return probe


LWS = ("leaderworkerset.x-k8s.io", "v1")


async def test_a_leaderworkerset_runs_each_group_as_a_leader_and_its_workers(
        apps: AppsV1Api, core: CoreV1Api, custom: CustomObjectsApi) -> None:
    template = {"metadata": {"labels": {"app": "lws"}}, "spec": {"containers": [_container()]}}
    await custom.create_namespaced_custom_object(*LWS, "default", "leaderworkersets", {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "lws"},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": template}}})

    async def groups_ready() -> list[Any]:
        got = await custom.get_namespaced_custom_object_status(*LWS, "default", "leaderworkersets", "lws")
        assert got.get("status") == {"replicas": 2, "readyReplicas": 2}, got.get("status")
        return await _pods(core, "lws")

    pods = await eventually(groups_ready, what="two ready groups of three")
    by_name = {p.metadata.name: p for p in pods}
    assert sorted(by_name) == ["lws-0", "lws-0-0", "lws-0-1", "lws-1", "lws-1-0", "lws-1-1"]
    for name, p in by_name.items():
        group = name.split("-")[1]
        labels, annotations = p.metadata.labels, p.metadata.annotations
        assert labels["leaderworkerset.sigs.k8s.io/name"] == "lws", labels
        assert annotations["leaderworkerset.sigs.k8s.io/size"] == "3", annotations
        if name.count("-") == 2:  # a worker: its group's StatefulSet, owned by the leader pod
            assert labels["leaderworkerset.sigs.k8s.io/group-index"] == group
            sts = await apps.read_namespaced_stateful_set(f"lws-{group}", "default")
            owner = sts.metadata.owner_references[0]
            assert (owner.kind, owner.name, sts.spec.replicas) == ("Pod", f"lws-{group}", 2)
        else:
            assert labels["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    leaders = await apps.read_namespaced_stateful_set("lws", "default")
    owner = leaders.metadata.owner_references[0]
    assert (owner.kind, leaders.spec.replicas, leaders.spec.pod_management_policy) == ("LeaderWorkerSet", 2, "Parallel")

    await custom.patch_namespaced_custom_object(*LWS, "default", "leaderworkersets", "lws", {"spec": {"replicas": 1}},
                                                _content_type=MERGE)

    async def one_group() -> list[str]:
        names = sorted(p.metadata.name for p in await _pods(core, "lws"))
        assert names == ["lws-0", "lws-0-0", "lws-0-1"], names
        return names

    await eventually(one_group, what="scaled down to one group (the leader's deletion takes its workers)")
