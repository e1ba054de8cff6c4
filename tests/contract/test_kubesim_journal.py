"""kubesim's object history (--journal): every change of the chosen resources, in order, across clusters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubesim.journal import Journal
from kubesim.resources import by_key
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(30)
WL = by_key("workloads.kueue.x-k8s.io")
CM = by_key("configmaps")


def workload(name: str) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": name},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c"}]}}}]}}


async def test_every_change_of_a_journaled_resource_is_recorded_in_commit_order(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    sim = KubeSim(["manager", "worker-1"], journal=Journal(path), seed=3)
    await sim.start()
    try:
        m, w = sim.cluster("manager").store, sim.cluster("worker-1").store
        m.create(WL, "default", workload("a"))
        w.create(WL, "default", workload("a"))
        m.create(CM, "default", {"metadata": {"name": "not-journaled"}})
        m.modify(WL, "default", "a", lambda o: o["spec"].update(active=False))
        m.delete(WL, "default", "a")
    finally:
        await sim.stop()
    lines = [json.loads(ln) for ln in path.read_text().splitlines()]
    assert [(r["c"], r["e"], r["o"]["metadata"]["name"]) for r in lines] == [
        ("manager", "ADDED", "a"), ("worker-1", "ADDED", "a"), ("manager", "MODIFIED", "a"),
        ("manager", "DELETED", "a")]
    assert lines[2]["o"]["spec"]["active"] is False
    assert [int(r["o"]["metadata"]["resourceVersion"]) for r in lines] == [r["rv"] for r in lines]
    assert all(r["r"] == "workloads.kueue.x-k8s.io" for r in lines)
    assert lines[0]["t"] <= lines[-1]["t"]
