"""kubesim in-process on port 0, driven through kubernetes-asyncio (the production client path)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from contract.sim_objects import Control, api_client
from kubernetes_asyncio import client

from kubesim.server import KubeSim


@pytest.fixture
async def sim() -> AsyncIterator[KubeSim]:
    s = KubeSim(["manager", "worker-1"], ready_delay_s=0.05, bookmark_interval_s=0.2, history_size=1000, seed=7)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


@pytest.fixture
async def kube(sim: KubeSim, tmp_path: Path) -> AsyncIterator[client.ApiClient]:
    c = await api_client(sim, "manager", tmp_path)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
def core(kube: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube)


@pytest.fixture
def batch(kube: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(kube)


@pytest.fixture
def custom(kube: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube)


@pytest.fixture
async def control(sim: KubeSim) -> AsyncIterator[Control]:
    async with aiohttp.ClientSession() as s:
        yield Control(s, sim.url)
