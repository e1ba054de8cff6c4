"""Through kubesim's faults (cut watches, expired history, error storms, a partition) the mirror on
the bus converges to the API server's state: nothing missing, nothing extra, nothing stale."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from support.kubesim_fixtures import SimControl, SimSpec
from support.wait import eventually
from support.watcher_harness import (
    Churn,
    MirrorFollower,
    api_state,
    create,
    diff,
    mirror_state,
    running_watcher,
    workload_doc,
)

from kq.kube import KubeClient
from kq.runtime import Bus
from kubesim.resources import by_key
from kubesim.server import KubeSim
from services.watcher.service import ClusterWatcher
from services.watcher.settings import WatcherSettings

pytestmark = pytest.mark.timeout(120)
C = "c1"
KINDS = ["resourceflavor", "workload", "namespace"]
SETTINGS = WatcherSettings(skip_kinds=("pod", "node", "job", "jobset"), watch_timeout_s=30.0,
                           retry_base_s=0.05, retry_max_s=0.3)


KUBESIM = SimSpec(clusters=(C,), seed=17, history_size=5000, namespaces=("demo",))


async def _converged(kube: KubeClient, mirror: MirrorFollower) -> None:
    async def probe() -> bool:
        d = diff(await api_state(kube, KINDS), mirror_state(mirror.view, C, KINDS))
        assert not d, d
        return True

    await eventually(probe, timeout=20, interval=0.1, what="mirror == API")


async def _with_churn(kube: KubeClient, seed: int, during) -> int:
    churn = Churn(kube, seed)
    task = asyncio.create_task(churn.run())
    try:
        await eventually(lambda: churn.ops >= 30, timeout=10, what="churn started")
        await during()
        start = churn.ops
        await eventually(lambda: churn.ops >= start + 30, timeout=10, what="churn after the fault")
    finally:
        churn.stop()
        await task
    return churn.ops


def _lists(w: ClusterWatcher, kind: str) -> int:
    return next(loop.lists for loop in w.loops if loop.kind == kind)


@pytest.mark.parametrize("mid_stream", [pytest.param(True, id="cut-mid-chunk"), pytest.param(False, id="cut-cleanly")])
async def test_cut_watches(bus: Bus, sim: KubeSim, kube: KubeClient, control: SimControl, tmp_path: Path,
                           mid_stream: bool) -> None:
    async with MirrorFollower(bus, C) as mirror, running_watcher(bus, sim, tmp_path, [C], SETTINGS) as (w,):
        async def cut() -> None:
            for _ in range(5):
                await control.fault(C, {"type": "cut-watches", "midStream": mid_stream})
                await asyncio.sleep(0.05)

        await _with_churn(kube, 1, cut)
        await _converged(kube, mirror)
        assert _lists(w, "workload") == 1, "a cut watch resumes from its resourceVersion; it needs no re-list"


async def test_expired_history_relists_and_tombstones(bus: Bus, sim: KubeSim, kube: KubeClient, control: SimControl,
                                                      tmp_path: Path) -> None:
    """Partitioned while objects are deleted and the watch history expires: on reconnect the
    resume point is gone (410), so it lists again and tombstones what vanished meanwhile."""
    for i in range(6):
        await create(kube, workload_doc(f"keep{i}"))
    async with MirrorFollower(bus, C) as mirror, running_watcher(bus, sim, tmp_path, [C], SETTINGS) as (w,):
        await _converged(kube, mirror)
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{sim.url}/kubesim/clusters/{C}/disconnect") as r:
                assert r.status == 200
            # Changes the watcher cannot see, straight in the simulated store.
            store = sim.cluster(C).store
            for i in (0, 1, 2):
                store.delete(by_key("workloads.kueue.x-k8s.io"), "demo", f"keep{i}")
            await control.fault(C, {"type": "expire-history"})
            async with s.post(f"{sim.url}/kubesim/clusters/{C}/reconnect") as r:
                assert r.status == 200
        await _converged(kube, mirror)
        assert _lists(w, "workload") >= 2, "410 must lead to a re-list"
        tombstoned = sorted(r.name for r in mirror.seen if r.deleted and r.kind == "workload")
        assert tombstoned == ["keep0", "keep1", "keep2"]


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param({"type": "errors", "code": 500, "count": 20, "verbs": ["list", "watch"]}, id="500s"),
        pytest.param({"type": "errors", "code": 503, "count": 20, "verbs": ["list", "watch"]}, id="503s"),
        pytest.param({"type": "errors", "code": 429, "count": 10, "verbs": ["list", "watch"], "retryAfterSeconds": 0},
                     id="429s"),
    ],
)
async def test_error_storms_while_watches_are_cut(bus: Bus, sim: KubeSim, kube: KubeClient, control: SimControl,
                                                  tmp_path: Path, fault: dict[str, Any]) -> None:
    async with MirrorFollower(bus, C) as mirror, running_watcher(bus, sim, tmp_path, [C], SETTINGS):
        async def storm() -> None:
            await control.fault(C, fault)
            await control.fault(C, {"type": "cut-watches", "midStream": True})
            await control.fault(C, {"type": "expire-history"})
            await control.fault(C, {"type": "cut-watches", "midStream": False})

        await _with_churn(kube, 2, storm)
        await eventually(lambda: sim.cluster(C).faults.describe()["errors"] == [], timeout=20,
                         what="the watcher retried through every injected error")
        await _converged(kube, mirror)


async def test_no_object_is_stored_twice_under_faults(bus: Bus, sim: KubeSim, kube: KubeClient, control: SimControl,
                                                      tmp_path: Path) -> None:
    async with MirrorFollower(bus, C) as mirror, running_watcher(bus, sim, tmp_path, [C], SETTINGS):
        async def faults() -> None:
            for _ in range(3):
                await control.fault(C, {"type": "cut-watches", "midStream": True})
                await control.fault(C, {"type": "expire-history"})
                await asyncio.sleep(0.05)

        await _with_churn(kube, 3, faults)
        await _converged(kube, mirror)
    seen: dict[tuple[str, str, str, str, bool], int] = {}
    for r in mirror.seen:
        key = (r.kind, r.namespace, r.name, r.resource_version, r.deleted)
        seen[key] = seen.get(key, 0) + 1
    assert [k for k, n in seen.items() if n > 1] == []
