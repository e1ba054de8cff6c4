"""The pods-ready service survives kill -9: its deadlines live on the bus and in the mirror.

A real local stack (nats-server, kubesim, watcher, admission, podsready as processes). A Job is
admitted with pods that never become ready; in the middle of its countdown the podsready process
is killed with SIGKILL. Either it is restarted at once, or (two replicas) the hot standby takes
over. Either way the eviction (PodsReadyTimeout, requeue count 1) happens within 1 s of the
deadline, which is the Admitted condition's time plus the timeout, as Kueue computes it.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from support.wait import eventually

from kq import subjects
from kq.api import constants as k
from kq.api.kueue import Workload
from kq.api.meta import find_condition, parse_time
from kq.kube import KubeClient
from kq.messages import WorkloadEvictedEvent, decision_decoder
from kq.runtime import Bus
from kq.stack import Stack
from kq.stack.health import health_answers

pytestmark = [pytest.mark.timeout(240), pytest.mark.e2e]
KUEUE = "kueue.x-k8s.io/v1beta2"
TIMEOUT_S = 10
CONFIG = {"waitForPodsReady": {"timeout": f"{TIMEOUT_S}s", "requeuingStrategy": {"backoffBaseSeconds": 60}}}
_wl = msgspec.json.Decoder(Workload)


@pytest.fixture
async def stack(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Stack]:
    replicas = getattr(request, "param", 1)
    async with Stack(tmp_path / "stack", kueue_config=CONFIG, clusters=[("manager", "manager")],
                     replicas={"podsready": replicas}, timeout_s=120) as s:
        yield s


async def _world(kube: KubeClient, sim_url: str) -> None:
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "2"}]}]}]}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
         "spec": {"clusterQueue": "cq"}},
    ]
    for d in docs:
        await kube.create(d["kind"], d["metadata"].get("namespace"), d)
    async with (  # the pods of j1 never become ready
        aiohttp.ClientSession() as http,
        http.post(f"{sim_url}/kubesim/clusters/manager/pods",
                  json={"namespace": "ns", "name": "j1", "neverReady": True}) as resp,
    ):
        assert resp.status < 300, await resp.text()
    await kube.create("Job", "ns", {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j1", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"suspend": True, "parallelism": 1, "completions": 1, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                                                     "resources": {"requests": {"cpu": "1"}}}]}}}})


async def _workload(kube: KubeClient) -> Workload:
    raws, _ = await kube.list("Workload", namespace="ns")
    wls = [_wl.decode(r) for r in raws]
    assert len(wls) == 1, wls
    return wls[0]


async def _admitted_at(kube: KubeClient) -> tuple[Workload, datetime]:
    async def probe() -> tuple[Workload, datetime] | None:
        wl = await _workload(kube)
        c = find_condition(wl.status.conditions, k.WORKLOAD_ADMITTED)
        if c is None or c.status != "True" or not c.last_transition_time:
            return None
        return wl, parse_time(c.last_transition_time)

    return await eventually(probe, timeout=30, what="j1's workload admitted")


async def _eviction(bus: Bus, wl: Workload) -> WorkloadEvictedEvent:
    subject = subjects.event_subject("manager", "workload", "ns", wl.metadata.name)

    async def probe() -> WorkloadEvictedEvent:
        msg = await bus.js.get_last_msg(subjects.EVENTS_STREAM, subject)
        assert msg.data is not None, msg
        ev = decision_decoder.decode(msg.data)
        assert isinstance(ev, WorkloadEvictedEvent) and ev.reason == "PodsReadyTimeout", ev
        return ev

    return await eventually(probe, timeout=TIMEOUT_S + 20, interval=0.05, what="the PodsReadyTimeout eviction event")


async def _check_on_time(stack: Stack, kube: KubeClient, wl: Workload, admitted: datetime) -> None:
    ev = await _eviction(stack.bus, wl)
    lateness = (parse_time(ev.at) - admitted).total_seconds() - TIMEOUT_S
    assert -0.05 <= lateness < 1.0, f"evicted {lateness:.3f}s after the deadline"

    async def evicted() -> Workload:
        w = await _workload(kube)
        c = find_condition(w.status.conditions, k.WORKLOAD_EVICTED)
        assert c is not None and c.status == "True" and c.reason == "PodsReadyTimeout", w.status.conditions
        assert w.status.requeue_state is not None and w.status.requeue_state.count == 1, w.status.requeue_state
        return w

    await eventually(evicted, timeout=10, what="the workload evicted with requeue count 1")


async def _active(bus: Bus) -> str:
    async def probe() -> str:
        st = {i: a.status for i, a in (await health_answers(bus.nc, "podsready", window_s=0.3)).items()}
        ready = [i for i, s in st.items() if s == "ready"]
        assert len(ready) == 1 and len(st) == 2, st
        return ready[0]

    return await eventually(probe, timeout=30, what="one active and one standby podsready")


async def test_kill_and_restart_mid_countdown_evicts_on_time(stack: Stack) -> None:
    kube = await KubeClient.from_kubeconfig(stack.kubeconfig("manager"))
    try:
        await _world(kube, stack.kubesim_url)
        wl, admitted = await _admitted_at(kube)
        await stack.kill("podsready", sig=signal.SIGKILL)  # mid-countdown: TIMEOUT_S - ~1s to go
        await stack.start("podsready")
        await _check_on_time(stack, kube, wl, admitted)
    finally:
        await kube.close()


@pytest.mark.parametrize("stack", [2], indirect=True)
async def test_standby_takes_over_when_the_active_replica_is_killed(stack: Stack) -> None:
    kube = await KubeClient.from_kubeconfig(stack.kubeconfig("manager"))
    try:
        await _world(kube, stack.kubesim_url)
        wl, admitted = await _admitted_at(kube)
        active = await _active(stack.bus)
        await stack.kill("podsready", active, sig=signal.SIGKILL)
        await _check_on_time(stack, kube, wl, admitted)
    finally:
        await kube.close()
