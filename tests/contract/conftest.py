"""kubesim in-process on port 0 (tests/support/kubesim_fixtures.py), driven through kubernetes-asyncio
(the production client path)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from contract.sim_objects import api_client
from kubernetes_asyncio import client
from support.kubesim_fixtures import SimSpec

from kubesim.server import KubeSim


@pytest.fixture
def kubesim_spec() -> SimSpec:
    return SimSpec(clusters=("manager", "worker-1"), seed=7, history_size=1000)


@pytest.fixture
async def kube(sim: KubeSim, tmp_path: Path) -> AsyncIterator[client.ApiClient]:
    """Here `kube` is the official client's ApiClient for the manager, not kq's KubeClient."""
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
def apps(kube: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(kube)
