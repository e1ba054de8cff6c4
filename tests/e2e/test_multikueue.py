"""MultiKueue through the whole local stack as processes (manager + two workers).

- The dispatcher is killed with SIGKILL while jobs are being dispatched and started again: every
  job still runs exactly once (one Job created, in one worker) and never in two workers at once,
  as the workers' own API servers show (kq.bench.job_ledger).
- The retention scenario kept out of scenarios/ (the shared structural checker does not know the
  objectRetentionPolicies key) runs here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from support.wait import eventually

from kq.api.kueue import Workload
from kq.api.meta import condition_is_true, find_condition
from kq.bench.job_ledger import JobLedger
from kq.kube import KubeClient
from kq.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[2]
KUEUE = "kueue.x-k8s.io/v1beta2"
JOBS = 24


def _setup(manager: bool) -> list[dict]:
    objs: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
                        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}}]
    cq: dict = {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "100" if manager else "3"}]}]}]}}
    if manager:
        for w in ("worker-1", "worker-2"):
            objs.append({"apiVersion": KUEUE, "kind": "MultiKueueCluster", "metadata": {"name": w}, "spec": {
                "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": f"{w}-kubeconfig"}}}})
        objs.append({"apiVersion": KUEUE, "kind": "MultiKueueConfig", "metadata": {"name": "mk"},
                     "spec": {"clusters": ["worker-1", "worker-2"]}})
        objs.append({"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": "mk"}, "spec": {
            "controllerName": "kueue.x-k8s.io/multikueue",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mk"}}})
        cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "mk"}]}
    objs.append(cq)
    objs.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"namespace": "ns", "name": "lq"},
                 "spec": {"clusterQueue": "cq"}})
    return objs


def _job(i: int) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"namespace": "ns", "name": f"j-{i:02d}", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": True, "managedBy": "kueue.x-k8s.io/multikueue", "parallelism": 1, "completions": 1,
                     "template": {"metadata": {"annotations": {"kq.dev/runtime": "1s"}}, "spec": {
                         "restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}}


async def _create(client: KubeClient, obj: dict) -> None:
    ns = obj["metadata"].get("namespace")
    kind = obj["kind"]
    await client.create(kind, ns, obj)


async def _dispatcher_leader(stack: Stack) -> str:
    """The instance holding the dispatcher's lease (health "ready"; the standby says "standby")."""
    from kq.stack.health import instance_status

    for inst in ("0", "1"):
        st = await instance_status(stack.bus.nc, "dispatcher", inst)
        if st is not None and st.status == "ready":
            return inst
    raise AssertionError("no dispatcher instance is leading")


async def _workloads(client: KubeClient) -> list[Workload]:
    raws, _ = await client.list("workload", namespace="ns")
    return [msgspec.json.decode(r, type=Workload) for r in raws]


@pytest.mark.parametrize("standby", [False, True], ids=["restarted", "hot-standby"])
async def test_dispatcher_killed_mid_run_every_job_runs_exactly_once(tmp_path: Path, standby: bool) -> None:
    """SIGKILL mid-run, then either the same instance is started again or a hot standby (a second
    instance waiting on the lease) takes over."""
    config = {"multiKueue": {"gcInterval": "1s", "origin": "mk", "workerLostTimeout": "30s"}}
    replicas = {"dispatcher": 2} if standby else {}
    async with Stack(tmp_path / "stack", kueue_config=config, log_level="warning", replicas=replicas) as stack:
        clients = {c: await KubeClient.from_kubeconfig(stack.kubeconfig(c)) for c in ("manager", "worker-1", "worker-2")}
        try:
            for c, client in clients.items():
                for obj in _setup(c == "manager"):
                    await _create(client, obj)
            async with JobLedger({c: clients[c] for c in ("worker-1", "worker-2")}) as ledger:
                for i in range(JOBS):
                    await _create(clients["manager"], _job(i))

                async def some_admitted() -> bool:
                    wls = await _workloads(clients["manager"])
                    return sum(condition_is_true(w.status.conditions, "Admitted") for w in wls) >= 4

                await eventually(some_admitted, timeout=60, interval=0.05, what="first jobs dispatched")
                leader = await _dispatcher_leader(stack) if standby else "0"
                assert await stack.kill("dispatcher", leader) != 0  # SIGKILL
                if not standby:
                    await stack.start("dispatcher")

                async def all_finished() -> list[Workload]:
                    wls = await _workloads(clients["manager"])
                    done = [w for w in wls if condition_is_true(w.status.conditions, "Finished")]
                    assert len(done) == JOBS, f"{len(done)} of {JOBS} finished"
                    return done

                done = await eventually(all_finished, timeout=150, interval=0.2, what="every job finished")
                finished = [find_condition(w.status.conditions, "Finished") for w in done]
                assert all(c is not None and c.reason == "Succeeded" for c in finished), finished
                assert all(w.status.cluster_name in ("worker-1", "worker-2") for w in done)
                assert ledger.overlaps == [], ledger.overlaps
                ran = {name: clusters for (_, name), clusters in ledger.created.items()}
                assert sorted(ran) == [f"j-{i:02d}" for i in range(JOBS)], sorted(ran)
                assert ledger.ran_more_than_once() == {}
                # ...and each ran where the manager says it did.
                where = {w.metadata.owner_references[0].name: w.status.cluster_name for w in done}
                assert {name: clusters[0] for name, clusters in ran.items()} == where
        finally:
            for client in clients.values():
                await client.close()


def test_retention_after_finished(tmp_path: Path) -> None:
    path = REPO / "tests" / "e2e" / "multikueue" / "mk-retention-after-finished.yaml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KQ_")}
    proc = subprocess.run([sys.executable, "-m", "kq.cli.main", "scenario", "run", str(path), "--json",
                           "--workdir", str(tmp_path / "stack")], capture_output=True, text=True, timeout=150,
                          cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert json.loads(proc.stdout)["ok"] is True


async def test_lost_worker_stops_its_copy_before_the_job_runs_elsewhere(tmp_path: Path) -> None:
    """The manager loses the worker running j-00 (a partition: the worker itself keeps working).
    The worker stops its copy when the manager's lease on it runs out; only after that, past
    workerLostTimeout, does the manager run the job on the other worker. Never in two at once."""
    import aiohttp

    from kq.kube import REMOTE_USER_AGENT

    # 16 s: the shortest workerLostTimeout with a lease (core/model.py LEASE_MIN_TIMEOUT_S).
    config = {"multiKueue": {"gcInterval": "1s", "origin": "mk", "workerLostTimeout": "16s"}}
    async with Stack(tmp_path / "stack", kueue_config=config, log_level="warning") as stack:
        clients = {c: await KubeClient.from_kubeconfig(stack.kubeconfig(c)) for c in ("manager", "worker-1", "worker-2")}
        try:
            for c, client in clients.items():
                for obj in _setup(c == "manager"):
                    await _create(client, obj)
            async with JobLedger({c: clients[c] for c in ("worker-1", "worker-2")}) as ledger:
                job = _job(0)
                job["spec"]["template"]["metadata"]["annotations"]["kq.dev/runtime"] = "120s"
                await _create(clients["manager"], job)

                async def running_on() -> str:
                    (wl,) = await _workloads(clients["manager"])
                    assert condition_is_true(wl.status.conditions, "Admitted") and wl.status.cluster_name
                    assert ledger.live[("ns", "j-00")], "not running yet"
                    return wl.status.cluster_name

                first = await eventually(running_on, timeout=60, interval=0.05, what="j-00 running")
                other = "worker-2" if first == "worker-1" else "worker-1"
                async with aiohttp.ClientSession() as http:
                    url = f"{stack.kubesim_url}/kubesim/clusters/{first}"
                    async with http.post(f"{url}/disconnect", json={"userAgentPrefix": REMOTE_USER_AGENT}) as r:
                        assert r.status == 200

                    async def moved() -> bool:
                        (wl,) = await _workloads(clients["manager"])
                        return wl.status.cluster_name == other and ledger.live[("ns", "j-00")] == {other}

                    await eventually(moved, timeout=60, interval=0.05, what=f"j-00 running on {other}")
                    assert ledger.overlaps == [], ledger.overlaps
                    assert ledger.created[("ns", "j-00")] == [first, other]
                    async with http.post(f"{url}/reconnect", json={}) as r:
                        assert r.status == 200

                async def stale_copy_gone() -> bool:
                    return not ledger.seen[("ns", "j-00")] - {other}

                await eventually(stale_copy_gone, timeout=30, interval=0.1, what=f"j-00 removed from {first}")
                assert ledger.overlaps == [], ledger.overlaps
        finally:
            for client in clients.values():
                await client.close()
