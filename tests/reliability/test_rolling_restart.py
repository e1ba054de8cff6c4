"""Upgrades without loss: a rolling restart of every service while Jobs run loses nothing.

One stack (every service as a process, kubesim, nats-server). Jobs queue through one ClusterQueue
that runs three at a time; while they run, each service in turn is stopped as a rollout stops a
pod (SIGTERM, waiting for it to exit) and started again (waiting for its health answer). In the
end every Job succeeded once: one Workload each, Finished, never evicted, one pod each (none run
twice), and no service left a traceback.
"""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from support.wait import eventually

from kq.kube import KubeClient
from kq.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

JOBS = 9
QUEUE = "kueue.x-k8s.io/queue-name"
V = "kueue.x-k8s.io/v1beta2"


def _setup() -> list[tuple[str, str | None, dict[str, Any]]]:
    return [
        ("ResourceFlavor", None, {"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}),
        ("ClusterQueue", None, {"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": "3"}]}]}]}}),
        ("LocalQueue", "default", {"apiVersion": V, "kind": "LocalQueue",
                                   "metadata": {"namespace": "default", "name": "lq"}, "spec": {"clusterQueue": "cq"}}),
    ]


def _job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "labels": {QUEUE: "lq"}},
            "spec": {"parallelism": 1, "completions": 1, "template": {
                "metadata": {"annotations": {"kq.dev/runtime": "2s"}},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}


async def _list(client: KubeClient, kind: str) -> list[dict[str, Any]]:
    items, _ = await client.list(kind, "default")
    return [msgspec.json.decode(raw) for raw in items]


def _owner(obj: dict[str, Any]) -> str:
    return next((o["name"] for o in obj["metadata"].get("ownerReferences", ()) if o.get("kind") == "Job"), "")


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", ())}


async def test_a_rolling_restart_of_every_service_loses_nothing(tmp_path: Path) -> None:
    async with Stack(tmp_path / "s", clusters=(("manager", "manager"),), log_level="warning") as stack:
        client = await KubeClient.from_kubeconfig(stack.kubeconfig("manager"))
        try:
            for kind, ns, body in _setup():
                await client.create(kind, ns, body)
            names = [f"j{i}" for i in range(JOBS)]
            for name in names:
                await client.create("Job", "default", _job(name))

            async def some_running() -> bool:
                assert any(j.get("status", {}).get("active") for j in await _list(client, "Job"))
                return True

            await eventually(some_running, timeout=60, interval=0.2, what="the first Jobs admitted and running")
            restarted = []
            for service in list(stack.services):
                code = await stack.kill(service, sig=signal.SIGTERM, timeout_s=30)
                assert code == 0, f"{service} exited {code} on SIGTERM: {stack.log_path(service)}"
                await stack.start(service)
                restarted.append(service)
            assert set(restarted) >= {"watcher", "admission"}

            async def all_done() -> list[dict[str, Any]]:
                jobs = await _list(client, "Job")
                done = sorted(j["metadata"]["name"] for j in jobs if j.get("status", {}).get("succeeded") == 1)
                assert done == sorted(names), f"succeeded: {done}"
                return jobs

            jobs = await eventually(all_done, timeout=120, interval=0.3, what="every Job succeeded")
            assert all(not j["status"].get("failed") for j in jobs), [j["status"] for j in jobs]
            workloads = await _list(client, "Workload")
            assert sorted(Counter(_owner(w) for w in workloads).items()) == [(n, 1) for n in sorted(names)]
            for w in workloads:
                conditions = _conditions(w)
                assert conditions.get("Finished") == "True", (w["metadata"]["name"], conditions)
                assert conditions.get("Evicted") != "True", (w["metadata"]["name"], conditions)
            pods = Counter(p["metadata"].get("labels", {}).get("job-name", "") for p in await _list(client, "Pod"))
            assert all(pods[n] == 1 for n in names), f"pods per Job: {dict(pods)}"
        finally:
            await client.close()
        for name in stack.services:
            text = stack.log_path(name).read_text(errors="replace")
            assert "Traceback" not in text, f"{name}:\n{text[text.index('Traceback'):][:3000]}"
