"""The scheduler and the kubelet: binding, readiness, runtime."""

from __future__ import annotations

import time
from typing import Any

import pytest
from contract.sim_objects import MERGE, STRATEGIC, node_body, pod_body
from kubernetes_asyncio.client import CoreV1Api
from support.wait import eventually

pytestmark = pytest.mark.timeout(30)


async def _pod(core: CoreV1Api, name: str) -> Any:
    return await core.read_namespaced_pod_status(name, "default")


def _cond(pod: Any, ctype: str) -> Any:
    for c in pod.status.conditions or ():
        if c.type == ctype:
            return c
    return None


async def _bound_to(core: CoreV1Api, name: str) -> str | None:
    return (await _pod(core, name)).spec.node_name


async def _unschedulable(core: CoreV1Api, name: str) -> str | None:
    p = await _pod(core, name)
    c = _cond(p, "PodScheduled")
    return c.message if c is not None and c.reason == "Unschedulable" and not p.spec.node_name else None


async def test_without_nodes_pods_go_to_the_virtual_pool(core: CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_body("p1", cpu="1000", nodeSelector={"any": "thing"}))
    assert await eventually(lambda: _bound_to(core, "p1")) == "kubesim-virtual"


@pytest.mark.parametrize(
    "pod_spec, want",
    [
        ({"nodeSelector": {"zone": "b"}}, "n-b"),
        ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["c"]}]}]}}}}, "n-c"),
        ({"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
          "nodeSelector": {"zone": "t"}}, "n-tainted"),
        ({"nodeSelector": {"zone": "t"}}, None),
        ({"nodeSelector": {"zone": "u"}}, None),
        ({"nodeSelector": {"zone": "nowhere"}}, None),
    ],
    ids=["node-selector", "node-affinity", "tolerated-taint", "untolerated-taint", "unschedulable-node", "no-match"],
)
async def test_node_choice(core: CoreV1Api, pod_spec: dict[str, Any], want: str | None) -> None:
    for name, zone, spec in (
        ("n-b", "b", {}),
        ("n-c", "c", {}),
        ("n-tainted", "t", {"taints": [{"key": "gpu", "value": "present", "effect": "NoSchedule"}]}),
        ("n-off", "u", {"unschedulable": True}),
    ):
        await core.create_node(node_body(name, cpu="4", labels={"zone": zone}, **spec))
    await core.create_namespaced_pod("default", pod_body("p1", **pod_spec))
    if want is not None:
        assert await eventually(lambda: _bound_to(core, "p1")) == want
    else:
        msg = await eventually(lambda: _unschedulable(core, "p1"))
        assert msg.startswith("0/4 nodes are available:")


async def test_capacity_is_respected_and_freed(core: CoreV1Api) -> None:
    await core.create_node(node_body("n1", cpu="1"))
    # A plain pod already bound takes its share of the node.
    await core.create_namespaced_pod("default", pod_body("bound", cpu="500m", nodeName="n1"))
    await core.create_namespaced_pod("default", pod_body("p1", cpu="500m"))
    assert await eventually(lambda: _bound_to(core, "p1")) == "n1"
    await core.create_namespaced_pod("default", pod_body("p2", cpu="200m"))
    msg = await eventually(lambda: _unschedulable(core, "p2"))
    assert "Insufficient cpu" in msg
    await core.patch_namespaced_pod_status("bound", "default", {"status": {"phase": "Succeeded"}}, _content_type=MERGE)
    assert await eventually(lambda: _bound_to(core, "p2")) == "n1"


async def test_new_node_takes_waiting_pods(core: CoreV1Api) -> None:
    await core.create_node(node_body("small", cpu="1"))
    await core.create_namespaced_pod("default", pod_body("big", cpu="2"))
    await eventually(lambda: _unschedulable(core, "big"))
    await core.create_node(node_body("large", cpu="4"))
    assert await eventually(lambda: _bound_to(core, "big")) == "large"


async def test_scheduling_gates_hold_pods(core: CoreV1Api) -> None:
    await core.create_node(node_body("n1", cpu="4", labels={"rack": "r1"}))
    await core.create_node(node_body("n2", cpu="4", labels={"rack": "r2"}))
    await core.create_namespaced_pod("default", pod_body("p1", schedulingGates=[{"name": "kueue.x-k8s.io/topology"}]))
    await core.create_namespaced_pod("default", pod_body("p2"))
    await eventually(lambda: _bound_to(core, "p2"))  # the scheduler has run
    gated = await _pod(core, "p1")
    assert gated.spec.node_name is None and _cond(gated, "PodScheduled").reason == "SchedulingGated"
    # What Kueue's topology ungater does: add a node selector, remove the gate.
    await core.patch_namespaced_pod("p1", "default", {"spec": {
        "nodeSelector": {"rack": "r2"}, "schedulingGates": [{"name": "kueue.x-k8s.io/topology", "$patch": "delete"}]}},
        _content_type=STRATEGIC)
    assert await eventually(lambda: _bound_to(core, "p1")) == "n2"


async def test_kubelet_readiness_and_runtime(core: CoreV1Api) -> None:
    t0 = time.monotonic()
    body = pod_body("p1")
    body["metadata"]["annotations"] = {"kq.dev/runtime": "300ms"}
    await core.create_namespaced_pod("default", body)

    async def ready() -> Any:
        p = await _pod(core, "p1")
        c = _cond(p, "Ready")
        return p if p.status.phase == "Running" and c is not None and c.status == "True" else None

    p = await eventually(ready, what="Running and Ready")
    assert p.status.container_statuses[0].ready is True and p.status.pod_ip
    assert p.status.start_time is not None and _cond(p, "PodScheduled").status == "True"

    async def succeeded() -> Any:
        p = await _pod(core, "p1")
        return p if p.status.phase == "Succeeded" else None

    p = await eventually(succeeded, what="Succeeded after the runtime")
    assert time.monotonic() - t0 >= 0.3
    term = p.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (0, "Completed") and _cond(p, "Ready").status == "False"


async def test_a_running_pod_is_deleted_gracefully(core: CoreV1Api) -> None:
    await core.create_namespaced_pod("default", pod_body("p1"))
    await eventually(lambda: _phase(core, "p1", "Running"))
    await core.delete_namespaced_pod("p1", "default")

    async def gone() -> bool:
        return not (await core.list_namespaced_pod("default")).items

    await eventually(gone)


async def _phase(core: CoreV1Api, name: str, phase: str) -> bool:
    return (await _pod(core, name)).status.phase == phase
