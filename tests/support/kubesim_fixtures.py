"""kubesim for tests: one in-process simulator per test, a kq KubeClient for its first cluster, and its
control API over HTTP, as the fixtures `sim`, `kube` and `control` (tests/conftest.py makes them
available everywhere).

A test module says what it needs with a module-level `KUBESIM = SimSpec(...)` (or a folder's
conftest with a `kubesim_spec` fixture): its clusters, the seed that fixes kubesim's generated
names and uids, how much watch history it keeps, and the namespaces `kube` creates first. Without
one, a test gets one cluster, "c1", seeded with 1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kq.kube import KubeClient
from kubesim.server import KubeSim


@dataclass(frozen=True)
class SimSpec:
    clusters: tuple[str, ...] = ("c1",)
    seed: int = 1
    history_size: int = 10_000  # watch events kept per cluster (resume points older than that are Gone)
    namespaces: tuple[str, ...] = ()  # created through `kube` before the test starts


@pytest.fixture
def kubesim_spec(request: pytest.FixtureRequest) -> SimSpec:
    """The module's KUBESIM, else the default; a conftest may override this for a whole folder."""
    spec: SimSpec = getattr(request.module, "KUBESIM", SimSpec())
    return spec


@asynccontextmanager
async def running_sim(spec: SimSpec) -> AsyncIterator[KubeSim]:
    """kubesim started on a free port with fast readiness and bookmarks; stopped after."""
    sim = KubeSim(list(spec.clusters), ready_delay_s=0.05, bookmark_interval_s=0.2,
                  history_size=spec.history_size, seed=spec.seed)
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()


async def kube_client(sim: KubeSim, tmp: Path, cluster: str) -> KubeClient:
    """kq's own client for one of the simulator's clusters, through a kubeconfig as a user has it."""
    path = sim.kubeconfig(cluster, tmp / f"test-{cluster}.kubeconfig")
    return await KubeClient.from_kubeconfig(str(path))


class SimControl:
    """kubesim's control API over HTTP (scenario hooks, faults, disconnects, state)."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str) -> None:
        self._s = session
        self._base = base_url

    async def post(self, path: str, body: dict[str, Any] | None = None, *, expect: int = 200) -> dict[str, Any]:
        async with self._s.post(f"{self._base}/kubesim/{path}", json=body or {}) as r:
            data: dict[str, Any] = await r.json()
            assert r.status == expect, (r.status, data)
            return data

    async def get(self, path: str) -> dict[str, Any]:
        async with self._s.get(f"{self._base}/kubesim/{path}") as r:
            assert r.status == 200, await r.text()
            data: dict[str, Any] = await r.json()
            return data

    async def delete(self, path: str) -> dict[str, Any]:
        async with self._s.delete(f"{self._base}/kubesim/{path}") as r:
            assert r.status == 200, await r.text()
            data: dict[str, Any] = await r.json()
            return data

    async def state(self) -> dict[str, Any]:
        async with self._s.get(f"{self._base}/kubesim/state") as r:
            assert r.status == 200
            data: dict[str, Any] = await r.json()
            return data

    async def fault(self, cluster: str, spec: dict[str, Any]) -> None:
        async with self._s.post(f"{self._base}/kubesim/clusters/{cluster}/faults", json=spec) as r:
            if r.status >= 300:
                raise AssertionError(f"fault {spec} refused: {r.status} {await r.text()}")

    async def clear(self, cluster: str) -> None:
        async with self._s.delete(f"{self._base}/kubesim/clusters/{cluster}/faults") as r:
            if r.status >= 300:
                raise AssertionError(f"clearing faults: {r.status} {await r.text()}")


@pytest.fixture
async def sim(kubesim_spec: SimSpec) -> AsyncIterator[KubeSim]:
    async with running_sim(kubesim_spec) as s:
        yield s


@pytest.fixture
async def kube(kubesim_spec: SimSpec, sim: KubeSim, tmp_path: Path) -> AsyncIterator[KubeClient]:
    spec = kubesim_spec
    c = await kube_client(sim, tmp_path, spec.clusters[0])
    try:
        for ns in spec.namespaces:
            await c.create("namespace", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        yield c
    finally:
        await c.close()


@pytest.fixture
async def control(sim: KubeSim) -> AsyncIterator[SimControl]:
    async with aiohttp.ClientSession() as s:
        yield SimControl(s, sim.url)
