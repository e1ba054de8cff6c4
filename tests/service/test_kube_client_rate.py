"""Kueue's `clientConnection` (qps, burst): kq's API client keeps the same client-side limit,
requests and watch openings alike, against kubesim over HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kq.kube import KubeClient
from kq.kueue_config import ClientConnection
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(30)


async def _elapsed(client: KubeClient, requests: int) -> float:
    loop = asyncio.get_running_loop()
    start = loop.time()
    for _ in range(requests - 1):
        await client.get("namespace", None, "default")
    async for _ in client.watch("namespace", "0", timeout_s=1):  # opening a watch takes a turn too
        break
    return loop.time() - start


async def test_requests_beyond_the_burst_wait_for_the_rate(sim: KubeSim, tmp_path: Path) -> None:
    path = str(sim.kubeconfig("c1", tmp_path / "c1.kubeconfig"))
    rate = ClientConnection(qps=20, burst=2).rate()
    assert rate == (20, 2)
    limited = await KubeClient.from_kubeconfig(path, rate=rate)
    try:
        # 8 requests, 2 at once then one every 50 ms: at least 6 x 50 ms (unlimited: a few ms).
        assert await _elapsed(limited, 8) >= 0.29
    finally:
        await limited.close()
