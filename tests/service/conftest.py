"""One in-process kubesim cluster ("c1") per test, and clients for it.

A module may set SIM_SEED to fix kubesim's generated names and uids for its tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from support.watcher_harness import SimControl, kube_client

from kq.kube import KubeClient
from kubesim.server import KubeSim

CLUSTER = "c1"


@pytest.fixture
async def sim(request: pytest.FixtureRequest) -> AsyncIterator[KubeSim]:
    s = KubeSim([CLUSTER], ready_delay_s=0.05, bookmark_interval_s=0.2, seed=getattr(request.module, "SIM_SEED", 1))
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


@pytest.fixture
async def kube(sim: KubeSim, tmp_path: Path) -> AsyncIterator[KubeClient]:
    c = await kube_client(sim, tmp_path, CLUSTER)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
async def control(sim: KubeSim) -> AsyncIterator[SimControl]:
    async with aiohttp.ClientSession() as s:
        yield SimControl(s, sim.url)
