"""The watcher's API writes that wait at the same moment go out pipelined on one connection
(`watcher.apiPipeline`), each keeping its own outcome: a 409 or a 500 in the middle of a batch
goes to that command's usual handling (re-read and re-plan; retry) and every command is applied."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from support.kubesim_fixtures import SimControl, SimSpec
from support.wait import eventually
from support.watcher_harness import Outcomes, create, read_typed, running_watcher, send, workload_doc

from kq.api.kueue import Admission, PodSetAssignment
from kq.api.meta import find_condition
from kq.http1 import Http1Pool, Outcome
from kq.kube import KubeClient
from kq.messages import AdmitWorkload
from kq.runtime import Bus
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(90)
C = "c1"
KUBESIM = SimSpec(seed=5)
N = 12
ADMISSION = Admission(cluster_queue="cq", pod_set_assignments=(
    PodSetAssignment(name="main", flavors={"cpu": "f1"}, resource_usage={"cpu": "1"}, count=1),))


async def test_status_patches_waiting_together_go_pipelined_with_their_own_outcomes(
        bus: Bus, sim: KubeSim, kube: KubeClient, control: SimControl, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    await create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    uids = {}
    for i in range(N):
        uids[f"w{i}"] = (await create(kube, workload_doc(f"w{i}"))).metadata.uid
    batches: list[list[bytes]] = []  # the request line of each request, per batch written
    real_exchange = Http1Pool._exchange

    async def seen(pool: Http1Pool, requests: list[bytes], timeout_s: float) -> list[Outcome]:
        batches.append([r.split(b"\r\n", 1)[0] for r in requests])
        return await real_exchange(pool, requests, timeout_s)

    monkeypatch.setattr(Http1Pool, "_exchange", seen)
    # Queued before the watcher starts: its consumer takes them in one batch.
    for name, uid in uids.items():
        await send(bus, AdmitWorkload(id=f"admit-{name}", cluster=C, writer="admission", epoch=0, namespace="demo",
                                      name=name, uid=uid, admission=ADMISSION))
    await control.fault(C, {"type": "errors", "code": 409, "count": 1, "verbs": ["patch"]})
    await control.fault(C, {"type": "errors", "code": 500, "count": 1, "verbs": ["patch"]})
    async with Outcomes(bus, "admission", C) as outcomes, running_watcher(bus, sim, tmp_path, [C]):
        await eventually(lambda: len(outcomes.by_id) == N, timeout=30, what="every admission's outcome")
        assert all(o.applied for o in outcomes.by_id.values()), outcomes.by_id
    for name in uids:
        wl = await read_typed(kube, "workload", "demo", name)
        cond = find_condition(wl.status.conditions, "QuotaReserved")
        assert cond is not None and cond.status == "True", name

    def patches(batch: Sequence[bytes]) -> int:
        return sum(line.startswith(b"PATCH ") and b"/workloads/" in line for line in batch)

    assert max(patches(b) for b in batches) >= 2, batches  # several status patches in one write
