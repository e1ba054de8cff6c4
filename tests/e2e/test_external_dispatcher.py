"""The example external dispatcher (examples/dispatchers/cheapest_region.py) as a real process on
the bus: it sees each waiting workload on kq.v1.mk.pending.*, nominates the cheapest worker on
kq.v1.mk.nominate.*, and the job runs there although the other worker had room too."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import msgspec
import pytest
from e2e.test_multikueue import _create, _job, _setup
from support.wait import eventually

from kq.api.kueue import Workload
from kq.api.meta import condition_is_true
from kq.kube import KubeClient
from kq.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dispatchers" / "cheapest_region.py"


@pytest.mark.parametrize(("prices", "want"), [("worker-1=5,worker-2=1", "worker-2"), ("worker-1=1,worker-2=5", "worker-1")])
async def test_cheapest_region_dispatcher_nominates_over_the_bus(tmp_path: Path, prices: str, want: str) -> None:
    config = {"multiKueue": {"gcInterval": "1s", "origin": "mk", "dispatcherName": "example.com/cheapest-region"}}
    async with Stack(tmp_path / "stack", kueue_config=config, log_level="warning") as stack:
        clients = {c: await KubeClient.from_kubeconfig(stack.kubeconfig(c)) for c in ("manager", "worker-1", "worker-2")}
        proc = await asyncio.create_subprocess_exec(sys.executable, str(EXAMPLE), "--nats", stack.nats_url,
                                                    "--prices", prices, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)
        try:
            for c, client in clients.items():
                for obj in _setup(c == "manager"):
                    await _create(client, obj)
            for i in range(2):
                await _create(clients["manager"], _job(i))

            async def ran_where() -> dict[str, str]:
                raws, _ = await clients["manager"].list("workload", namespace="ns")
                wls = [msgspec.json.decode(r, type=Workload) for r in raws]
                assert len(wls) == 2 and all(condition_is_true(w.status.conditions, "Admitted") for w in wls)
                return {w.metadata.name: w.status.cluster_name or "" for w in wls}

            where = await eventually(ran_where, timeout=60, interval=0.1, what="both jobs admitted")
            assert set(where.values()) == {want}
        finally:
            proc.terminate()
            try:
                out, _ = await asyncio.wait_for(proc.communicate(), 10)
            except TimeoutError:
                proc.kill()
                out, _ = await proc.communicate()
            for client in clients.values():
                await client.close()
        assert b"-> ['" + want.encode() in out, out.decode()


SPREAD = EXAMPLE.with_name("spread.py")


@pytest.mark.parametrize(("jobs", "queue_on_worker_1", "widen_after", "want"), [
    pytest.param(4, True, "60", {"worker-1": 2, "worker-2": 2}, id="one-worker-a-job-spread-evenly"),
    pytest.param(1, False, "2", {"worker-2": 1}, id="widened-when-still-waiting"),
])
async def test_spread_dispatcher_nominates_one_worker_a_job(tmp_path: Path, jobs: int, queue_on_worker_1: bool,
                                                            widen_after: str, want: dict[str, int]) -> None:
    """spread.py nominates one worker a job, the least nominated so far; a job whose worker cannot
    admit it (worker-1 without the LocalQueue keeps its copy pending) gets one more worker after
    --widen-after, and only then."""
    config = {"multiKueue": {"gcInterval": "1s", "origin": "mk", "dispatcherName": "example.com/spread"}}
    async with Stack(tmp_path / "stack", kueue_config=config, log_level="warning") as stack:
        clients = {c: await KubeClient.from_kubeconfig(stack.kubeconfig(c)) for c in ("manager", "worker-1", "worker-2")}
        proc = await asyncio.create_subprocess_exec(sys.executable, str(SPREAD), "--nats", stack.nats_url,
                                                    "--widen-after", widen_after, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)
        try:
            for c, client in clients.items():
                for obj in _setup(c == "manager"):
                    if c != "worker-1" or queue_on_worker_1 or obj["kind"] != "LocalQueue":
                        await _create(client, obj)
            for i in range(jobs):
                await _create(clients["manager"], _job(i))

            async def ran_where() -> dict[str, int]:
                raws, _ = await clients["manager"].list("workload", namespace="ns")
                wls = [msgspec.json.decode(r, type=Workload) for r in raws]
                assert len(wls) == jobs and all(condition_is_true(w.status.conditions, "Admitted") for w in wls)
                where: dict[str, int] = {}
                for w in wls:
                    where[w.status.cluster_name or ""] = where.get(w.status.cluster_name or "", 0) + 1
                return where

            assert await eventually(ran_where, timeout=60, interval=0.1, what="every job admitted") == want
        finally:
            proc.terminate()
            try:
                out, _ = await asyncio.wait_for(proc.communicate(), 10)
            except TimeoutError:
                proc.kill()
                out, _ = await proc.communicate()
            for client in clients.values():
                await client.close()
        nominations = [ln for ln in out.decode().splitlines() if " -> " in ln]
        widened = [ln for ln in nominations if "', '" in ln]
        if queue_on_worker_1:
            assert len(nominations) >= jobs and not widened, out.decode()
        else:
            assert widened and widened[-1].endswith("-> ['worker-1', 'worker-2']"), out.decode()
