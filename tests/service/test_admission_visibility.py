"""Kueue's visibility API served by the admission leader (real nats-server, kubesim, the watcher):
pending workloads with positions in queue order, asked through the bus and through `kq get pendingworkloads`."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import msgspec
import pytest
from service.test_admission_service import KUEUE, make_world, reserved, running_admission, workloads
from support.wait import eventually
from support.watcher_harness import create, running_watcher

from kq import subjects
from kq.cli.main import _run, build_parser
from kq.cli.objects import Streams
from kq.config import NatsConfig
from kq.kube import KubeClient
from kq.runtime import Bus
from kq.visibility import PendingWorkloadsRequest, VisibilityAnswer, answer_decoder
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(120)
C = "c1"


def wl(name: str, queue: str, priority: int) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": "demo"},
            "spec": {"queueName": queue, "priority": priority, "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}}


async def ask(bus: Bus, req: PendingWorkloadsRequest) -> VisibilityAnswer:
    msg = await bus.nc.request(subjects.visibility_subject(C), msgspec.json.encode(req), timeout=5)
    return answer_decoder.decode(msg.data)


async def kq(nats_url: str, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await _run(build_parser().parse_args([*argv, "--nats", nats_url, "--cluster", C]), Streams(out, err))
    return code, out.getvalue(), err.getvalue()


async def test_pending_workloads_with_positions_in_queue_order(bus: Bus, nats_config: NatsConfig, sim: KubeSim,
                                                               kube: KubeClient, tmp_path: Path) -> None:
    await make_world(kube, cpu="1")
    await create(kube, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq2", "namespace": "demo"},
                        "spec": {"clusterQueue": "cq"}})
    async with running_watcher(bus, sim, tmp_path, [C]), running_admission(nats_config, sim, tmp_path):
        await create(kube, wl("running", "lq", 100))

        async def running() -> bool:
            assert reserved((await workloads(kube))["running"])
            return True

        await eventually(running, timeout=30, what="the first workload admitted")
        for name, queue, prio in (("w-a", "lq", 5), ("w-b", "lq2", 9), ("w-c", "lq", 1), ("w-d", "lq", 7)):
            await create(kube, wl(name, queue, prio))

        async def all_pending() -> VisibilityAnswer:
            ans = await ask(bus, PendingWorkloadsRequest(cluster_queue="cq"))
            assert ans.summary is not None and len(ans.summary.items) == 4, ans
            return ans

        ans = await eventually(all_pending, timeout=30, what="4 pending workloads in cq")
        assert ans.summary is not None
        assert [(w.metadata.name, w.position_in_cluster_queue, w.position_in_local_queue, w.local_queue_name, w.priority)
                for w in ans.summary.items] == [("w-b", 0, 0, "lq2", 9), ("w-d", 1, 0, "lq", 7), ("w-a", 2, 1, "lq", 5),
                                                ("w-c", 3, 2, "lq", 1)]
        lq = await ask(bus, PendingWorkloadsRequest(namespace="demo", local_queue="lq"))
        assert lq.summary is not None
        assert [(w.metadata.name, w.position_in_cluster_queue, w.position_in_local_queue) for w in lq.summary.items] \
            == [("w-d", 1, 0), ("w-a", 2, 1), ("w-c", 3, 2)]
        assert (await ask(bus, PendingWorkloadsRequest(cluster_queue="nope"))).not_found
        assert "bad request" in (await ask(bus, PendingWorkloadsRequest())).error

        code, out, err = await kq(nats_config.url, "get", "pendingworkloads", "lq/lq", "-n", "demo")
        assert code == 0, err
        header, *rows = out.splitlines()
        assert header.split() == ["POSITION", "IN", "CQ", "POSITION", "IN", "LQ", "NAMESPACE", "NAME", "LOCALQUEUE",
                                  "PRIORITY", "AGE"]
        assert [r.split()[:6] for r in rows] == [["1", "0", "demo", "w-d", "lq", "7"], ["2", "1", "demo", "w-a", "lq", "5"],
                                                 ["3", "2", "demo", "w-c", "lq", "1"]]
        code, out, err = await kq(nats_config.url, "get", "pendingworkloads", "cq/cq", "-o", "json")
        assert code == 0, err
        doc = msgspec.json.decode(out)
        assert (doc["apiVersion"], doc["kind"]) == ("visibility.kueue.x-k8s.io/v1beta2", "PendingWorkloadsSummary")
        assert doc["items"][0]["metadata"]["name"] == "w-b" and doc["items"][0]["positionInClusterQueue"] == 0
        assert set(doc["items"][0]) == {"metadata", "priority", "localQueueName", "positionInClusterQueue",
                                        "positionInLocalQueue"}
        code, _, err = await kq(nats_config.url, "get", "pendingworkloads", "cq/nope")
        assert code == 1 and "not found" in err
        code, out, err = await kq(nats_config.url, "describe", "workload", "demo/w-a")
        assert code == 0, err
        assert "Position:" in out and "2 in its ClusterQueue, 1 in LocalQueue lq" in out, out

        # kueuectl's list: each pending workload at its position in its LocalQueue, filters as kueuectl's
        code, out, err = await kq(nats_config.url, "list", "workloads", "-n", "demo", "--status", "pending")
        assert code == 0, err
        header, *rows = out.splitlines()
        assert "POSITION IN QUEUE" in header
        assert [r.split()[:5] for r in rows] == [["w-a", "lq", "cq", "PENDING", "1"], ["w-b", "lq2", "cq", "PENDING", "0"],
                                                 ["w-c", "lq", "cq", "PENDING", "2"], ["w-d", "lq", "cq", "PENDING", "0"]]
        code, out, err = await kq(nats_config.url, "list", "workloads", "-n", "demo", "-q", "lq2")
        assert code == 0 and [r.split()[0] for r in out.splitlines()[1:]] == ["w-b"], (out, err)
        code, out, err = await kq(nats_config.url, "list", "wl", "-A", "-c", "cq", "--status", "admitted")
        assert code == 0, err
        assert [r.split()[:5] for r in out.splitlines()[1:]] == [["demo", "running", "lq", "cq", "ADMITTED"]]
        code, _, err = await kq(nats_config.url, "list", "workloads", "--status", "sleeping")
        assert code == 1 and "--status" in err
