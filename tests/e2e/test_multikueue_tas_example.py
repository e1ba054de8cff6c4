"""Kueue's MultiKueue with topology-aware scheduling example (its MultiKueue setup guide and dev
guide: examples/multikueue/tas/ holds its files unchanged) on `kq up`, as a user applies it: the
manager's queues with a TAS flavor and a MultiKueue check, each worker's queues with the same flavor
over a labelled node, then Kueue's two sample Jobs, neither naming `spec.managedBy`.

- Kueue's webhook sends both to MultiKueue (`spec.managedBy: kueue.x-k8s.io/multikueue`): the
  manager never runs them.
- The manager reserves quota with the topology request left to the worker (`delayedTopologyRequest`
  Pending, no assignment: the manager has no node of the flavor), then, once the winner's copy was
  placed by its worker, Ready and Admitted with `status.clusterName`, as Kueue's expected output.
- The worker's copy carries the worker's topology assignment, and the job's pods run on the node it
  names there, on that worker only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e.test_cli_stack import kq
from support.wait import eventually

from kq.stack import stop_stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
TAS = Path(__file__).resolve().parents[2] / "examples" / "multikueue" / "tas"
WORKERS = {"worker1": "worker-1", "worker2": "worker-2"}  # Kueue's MultiKueueCluster -> kq up's cluster


async def test_kueue_multikueue_tas_example_is_placed_by_the_worker_it_runs_on(tmp_path: Path) -> None:
    async def run(*args: str, timeout: float = 60) -> str:
        done = await kq(*args, "--dir", "s", cwd=tmp_path, timeout=timeout)
        assert done.code == 0, (args, done)
        return done.out

    async def items(kind: str, cluster: str = "manager") -> list[dict[str, Any]]:
        out = await run("get", kind, "-n", "default", "--cluster", cluster, "-o", "json")
        listed: list[dict[str, Any]] = json.loads(out)["items"]
        return listed

    try:
        await run("up", "--timeout", "120", timeout=150)
        await run("apply", "-f", str(TAS / "manager-setup.yaml"))
        for cluster in WORKERS.values():
            await run("apply", "--cluster", cluster, "-f", str(TAS / "worker-nodes.yaml"),
                      "-f", str(TAS / "worker-setup.yaml"))
        await run("create", "-f", str(TAS / "sample-tas-job.yaml"))

        jobs = {j["metadata"]["name"]: j["spec"].get("managedBy") for j in await items("jobs")}
        assert jobs == {"tas-sample-job": "kueue.x-k8s.io/multikueue",
                        "implicit-tas-job": "kueue.x-k8s.io/multikueue"}, jobs

        async def admitted_on_workers() -> dict[str, str]:
            got = {}
            for w in await items("workloads"):
                st = w.get("status", {})
                conds = {c["type"]: c["status"] for c in st.get("conditions", [])}
                [psa] = st.get("admission", {}).get("podSetAssignments", [{}])
                assert conds.get("Admitted") == "True" and st.get("clusterName") in WORKERS, st
                # Placed by the worker, not here: the request is Ready and the manager holds no assignment.
                assert (psa.get("delayedTopologyRequest"), psa.get("topologyAssignment")) == ("Ready", None), psa
                got[w["metadata"]["ownerReferences"][0]["name"]] = st["clusterName"]
            assert sorted(got) == ["implicit-tas-job", "tas-sample-job"], got
            return got

        where = await eventually(admitted_on_workers, timeout=60, interval=0.5,
                                 what="both sample Jobs admitted on a worker, their topology placed there")

        async def running_where_placed() -> bool:
            for job, mk_cluster in where.items():
                cluster = WORKERS[mk_cluster]
                [copy] = [w for w in await items("workloads", cluster)
                          if w["metadata"]["ownerReferences"][0]["name"] == job]
                [psa] = copy["status"]["admission"]["podSetAssignments"]
                placement = psa["topologyAssignment"]
                assert placement["levels"] == ["kubernetes.io/hostname"], placement
                pods = [p for p in await items("pods", cluster) if p["metadata"]["name"].startswith(f"{job}-")]
                assert len(pods) == (2 if job == "tas-sample-job" else 3), pods
                assert {(p["spec"].get("nodeName"), p["status"].get("phase")) for p in pods} == {("worker", "Running")}
                other = [c for c in WORKERS.values() if c != cluster]
                assert not [p for c in other for p in await items("pods", c) if p["metadata"]["name"].startswith(f"{job}-")]
            assert await items("pods") == []  # nothing runs on the manager
            return True

        await eventually(running_where_placed, timeout=60, interval=0.5,
                         what="each job's pods running on the node its worker placed them on")
    finally:
        down = await kq("down", "--dir", "s", cwd=tmp_path, timeout=60)
        if (tmp_path / "s" / "stack.json").exists():
            await stop_stack(tmp_path / "s", grace_s=2.0)
    assert down.code == 0, down
