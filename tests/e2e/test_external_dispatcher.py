"""The example external dispatcher (examples/dispatchers/cheapest_region.py) as a real process on
the bus: it sees each waiting workload on kq.v1.mk.pending.*, nominates the cheapest worker on
kq.v1.mk.nominate.*, and the job runs there although the other worker had room too."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


async def _run_example(tmp_path: Path, dispatcher_name: str, script: Path, args: list[str], jobs: int,
                       wanted: Callable[[str, dict[str, Any]], bool]) -> tuple[list[Workload], str]:
    """A manager and two workers with `script` as the external dispatcher: `jobs` Jobs created on the
    manager (of `_setup`'s objects only those `wanted(cluster, obj)`), run until every manager Workload
    is Admitted. Returns those Workloads and what the dispatcher printed."""
    config = {"multiKueue": {"gcInterval": "1s", "origin": "mk", "dispatcherName": dispatcher_name}}
    async with Stack(tmp_path / "stack", kueue_config=config, log_level="warning") as stack:
        clients = {c: await KubeClient.from_kubeconfig(stack.kubeconfig(c)) for c in ("manager", "worker-1", "worker-2")}
        proc = await asyncio.create_subprocess_exec(sys.executable, str(script), "--nats", stack.nats_url, *args,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            for c, client in clients.items():
                for obj in _setup(c == "manager"):
                    if wanted(c, obj):
                        await _create(client, obj)
            for i in range(jobs):
                await _create(clients["manager"], _job(i))

            async def all_admitted() -> list[Workload]:
                raws, _ = await clients["manager"].list("workload", namespace="ns")
                wls = [msgspec.json.decode(r, type=Workload) for r in raws]
                assert len(wls) == jobs and all(condition_is_true(w.status.conditions, "Admitted") for w in wls)
                return wls

            wls = await eventually(all_admitted, timeout=60, interval=0.1, what="every job admitted")
        finally:
            proc.terminate()
            try:
                out, _ = await asyncio.wait_for(proc.communicate(), 10)
            except TimeoutError:
                proc.kill()
                out, _ = await proc.communicate()
            for client in clients.values():
                await client.close()
    return wls, out.decode()


@pytest.mark.parametrize(("prices", "want"), [("worker-1=5,worker-2=1", "worker-2"), ("worker-1=1,worker-2=5", "worker-1")])
async def test_cheapest_region_dispatcher_nominates_over_the_bus(tmp_path: Path, prices: str, want: str) -> None:
    wls, out = await _run_example(tmp_path, "example.com/cheapest-region", EXAMPLE, ["--prices", prices], 2,
                                  lambda _c, _o: True)
    assert {w.status.cluster_name or "" for w in wls} == {want}
    assert "-> ['" + want in out, out


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
    wls, out = await _run_example(
        tmp_path, "example.com/spread", SPREAD, ["--widen-after", widen_after], jobs,
        lambda c, obj: c != "worker-1" or queue_on_worker_1 or obj["kind"] != "LocalQueue")
    assert Counter(w.status.cluster_name or "" for w in wls) == want
    nominations = [ln for ln in out.splitlines() if " -> " in ln]
    widened = [ln for ln in nominations if "', '" in ln]
    if queue_on_worker_1:
        assert len(nominations) >= jobs and not widened, out
    else:
        assert widened and widened[-1].endswith("-> ['worker-1', 'worker-2']"), out
