"""Kueue's documentation examples for each job framework, in their shape (examples/integrations/), on
`kq up` after Kueue's quick-start queues: each is queued (gated or suspended until admitted), gets its
Workload, is admitted, runs on kubesim's nodes, and finishes (or keeps running, for serving).

One stack for the module; the tests apply into the quick start's `default` namespace and look only at
their own Workloads (by name prefix), and at the quota left once batch objects finish."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from e2e.test_cli_stack import EXAMPLES, table
from support.wait import eventually

from kq.kueue_config import INSTALLED_FRAMEWORKS
from kq.stack import read_state, stop_stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
SAMPLES = EXAMPLES / "integrations"


class Run:
    def __init__(self, p: subprocess.CompletedProcess[str]) -> None:
        self.code, self.out, self.err = p.returncode, p.stdout, p.stderr

    def __repr__(self) -> str:
        return f"exit {self.code}\nstdout:\n{self.out}\nstderr:\n{self.err}"


def _kq(d: Path, *args: str, stdin: str | None = None) -> Run:
    return Run(subprocess.run([sys.executable, "-m", "kq.cli", *args, "--dir", str(d)], capture_output=True,
                              text=True, timeout=60, input=stdin))


async def kq(d: Path, *args: str, stdin: str | None = None) -> Run:
    return await asyncio.to_thread(_kq, d, *args, stdin=stdin)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("integrations") / "stack"
    # Kueue's release manifest leaves kubeflow.org/pytorchjob out; its PyTorchJob guide has users add it.
    config = d.parent / "kueue-config.yaml"
    frameworks = "".join(f"  - {f}\n" for f in (*INSTALLED_FRAMEWORKS, "kubeflow.org/pytorchjob"))
    config.write_text(f"apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nintegrations:\n"
                      f"  frameworks:\n{frameworks}")
    up = subprocess.run([sys.executable, "-m", "kq.cli", "up", "--dir", str(d), "--sleep-scale", "0.05",
                         "--kueue-config", str(config), "--timeout", "120"], capture_output=True, text=True,
                        timeout=150)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        setup = _kq(d, "apply", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"))
        assert setup.code == 0, setup
        yield d
    finally:
        if (d / "stack.json").exists():
            asyncio.run(stop_stack(d, grace_s=5.0))


async def rows(d: Path, kind: str) -> list[dict[str, str]]:
    got = await kq(d, "get", kind, "-n", "default")
    assert got.code == 0, got
    return table(got.out) if got.out.strip() else []


async def created_names(d: Path, sample: str) -> list[str]:
    done = await kq(d, "create", "-f", str(SAMPLES / sample))
    assert done.code == 0, done
    return [line.split()[0].split("/", 1)[1] for line in done.out.splitlines()]


async def wait_workloads(d: Path, prefix: str, states: set[str], count: int = 1,
                         timeout: float = 60) -> list[dict[str, str]]:
    async def check() -> list[dict[str, str]]:
        mine = [r for r in await rows(d, "workloads") if r["NAME"].startswith(prefix)]
        assert len(mine) == count and {r["STATE"] for r in mine} <= states, mine
        return mine

    return await eventually(check, timeout=timeout, interval=0.5, what=f"workloads {prefix}* in {states}")


async def pod_states(d: Path, prefix: str) -> dict[str, str]:
    return {r["NAME"]: r["STATUS"] for r in await rows(d, "pods") if r["NAME"].startswith(prefix)}


async def test_jobset_sample_is_queued_admitted_and_finishes(stack: Path) -> None:
    [name] = await created_names(stack, "sample-jobset.yaml")
    await wait_workloads(stack, f"jobset-{name}-", {"Admitted", "Finished"})
    [wl] = await wait_workloads(stack, f"jobset-{name}-", {"Finished"})
    assert wl["QUEUE"] == "user-queue" and wl["RESERVED IN"] == "cluster-queue", wl
    # Its Jobs ran their pods (one per replicated Job) to the end.
    pods = await pod_states(stack, f"{name}-")
    assert sorted(p.rsplit("-", 1)[0] for p in pods) == [f"{name}-driver-0", f"{name}-workers-0"], pods
    assert set(pods.values()) == {"Succeeded"}, pods


async def test_plain_pod_sample_is_gated_until_admitted_and_finishes(stack: Path) -> None:
    [name] = await created_names(stack, "sample-pod.yaml")
    [wl] = await wait_workloads(stack, f"pod-{name}-", {"Finished"})
    assert wl["ADMITTED"] == "True", wl

    async def succeeded() -> dict[str, str]:
        got = await pod_states(stack, name)
        assert got == {name: "Succeeded"}, got
        return got

    await eventually(succeeded, timeout=30, interval=0.5, what="the pod succeeds")


async def test_pod_group_waits_for_its_last_member_then_runs_as_one(stack: Path) -> None:
    leader, worker = (SAMPLES / "sample-pod-group.yaml").read_text().split("\n---\n")
    first = await kq(stack, "create", "-f", "-", stdin=leader)
    assert first.code == 0, first
    # One member of two: gated, no Workload for the group yet.
    lead = first.out.split()[0].split("/", 1)[1]

    async def gated() -> dict[str, str]:
        got = await pod_states(stack, lead)
        assert got == {lead: "SchedulingGated"}, got
        return got

    await eventually(gated, timeout=30, interval=0.5, what="the first member is gated")
    assert not [r for r in await rows(stack, "workloads") if r["NAME"] == "sample-group"]
    second = await kq(stack, "create", "-f", "-", stdin=worker)
    assert second.code == 0, second
    [wl] = await wait_workloads(stack, "sample-group", {"Finished"})
    assert wl["ADMITTED"] == "True", wl
    states = await pod_states(stack, "sample-")
    assert sorted(states.values()) == ["Succeeded", "Succeeded"], states


async def test_deployment_sample_pods_are_admitted_and_keep_serving(stack: Path) -> None:
    done = await kq(stack, "apply", "-f", str(SAMPLES / "sample-deployment.yaml"))
    assert done.code == 0, done
    await wait_workloads(stack, "pod-nginx-deployment-", {"Admitted"}, count=3)

    async def running() -> dict[str, str]:
        got = await pod_states(stack, "nginx-deployment-")
        assert len(got) == 3 and set(got.values()) == {"Running"}, got
        return got

    await eventually(running, timeout=30, interval=0.5, what="the Deployment's three pods run")


async def test_statefulset_sample_is_admitted_as_one_group_and_keeps_serving(stack: Path) -> None:
    done = await kq(stack, "apply", "-f", str(SAMPLES / "sample-statefulset.yaml"))
    assert done.code == 0, done
    await wait_workloads(stack, "statefulset-nginx-statefulset-", {"Admitted"})

    async def running() -> dict[str, str]:
        got = await pod_states(stack, "nginx-statefulset-")
        assert got == {f"nginx-statefulset-{i}": "Running" for i in range(3)}, got
        return got

    await eventually(running, timeout=60, interval=0.5, what="the StatefulSet's three pods run in order")


async def test_leaderworkerset_sample_runs_each_group_as_one_workload(stack: Path) -> None:
    done = await kq(stack, "apply", "-f", str(SAMPLES / "sample-leaderworkerset.yaml"))
    assert done.code == 0, done
    await wait_workloads(stack, "leaderworkerset-nginx-leaderworkerset-", {"Admitted"}, count=2)

    async def running() -> dict[str, str]:
        got = await pod_states(stack, "nginx-leaderworkerset-")
        assert len(got) == 6 and set(got.values()) == {"Running"}, got
        return got

    await eventually(running, timeout=60, interval=0.5, what="two groups of a leader and two workers run")


async def finish(d: Path, workload: str) -> None:
    """The training script (or the Ray job) ends: kubesim's finish hook on the Workload's object."""
    url = f"{read_state(d).kubesim_url}/kubesim/clusters/manager/finish"
    async with aiohttp.ClientSession() as http, http.post(url, json={"namespace": "default", "name": workload}) as r:
        assert r.status == 200, await r.text()


async def test_pytorchjob_sample_is_queued_admitted_runs_its_replicas_and_finishes(stack: Path) -> None:
    done = await kq(stack, "apply", "-f", str(SAMPLES / "sample-pytorchjob.yaml"))
    assert done.code == 0, done
    [wl] = await wait_workloads(stack, "pytorchjob-pytorch-simple-", {"Admitted"})
    assert wl["QUEUE"] == "user-queue", wl

    async def running() -> dict[str, str]:
        got = await pod_states(stack, "pytorch-simple-")
        assert got == {"pytorch-simple-master-0": "Running", "pytorch-simple-worker-0": "Running"}, got
        return got

    await eventually(running, timeout=30, interval=0.5, what="the master and the worker run")
    await finish(stack, wl["NAME"])
    await wait_workloads(stack, "pytorchjob-pytorch-simple-", {"Finished"})
    # The AppWrapper sample wraps a PyTorchJob of the same name: make room for it.
    gone = await kq(stack, "delete", "-f", str(SAMPLES / "sample-pytorchjob.yaml"))
    assert gone.code == 0, gone

    async def no_pods() -> bool:
        left = await pod_states(stack, "pytorch-simple-")
        assert not left, left
        return True

    await eventually(no_pods, timeout=30, interval=0.5, what="the PyTorchJob's pods removed")


async def test_rayjob_sample_runs_its_cluster_and_submitter_then_finishes(stack: Path) -> None:
    done = await kq(stack, "apply", "-n", "default", "-f", str(SAMPLES / "sample-rayjob.yaml"))
    assert done.code == 0, done
    [wl] = await wait_workloads(stack, "rayjob-rayjob-sample-", {"Admitted"})

    async def running() -> dict[str, str]:
        got = await pod_states(stack, "rayjob-sample-")
        cluster = sorted(n for n in got if n.startswith("rayjob-sample-raycluster-"))
        assert cluster == ["rayjob-sample-raycluster-head", "rayjob-sample-raycluster-small-group-worker-0"], got
        assert len(got) == 3 and set(got.values()) == {"Running"}, got  # and the submitter Job's pod
        return got

    await eventually(running, timeout=30, interval=0.5, what="head, worker and submitter run")
    await finish(stack, wl["NAME"])
    await wait_workloads(stack, "rayjob-rayjob-sample-", {"Finished"})

    async def shut_down() -> bool:
        left = {n: s for n, s in (await pod_states(stack, "rayjob-sample-raycluster-")).items()}
        assert not left, left  # shutdownAfterJobFinishes: the cluster and its pods are gone
        return True

    await eventually(shut_down, timeout=30, interval=0.5, what="the RayCluster shut down")


async def test_trainjob_runs_the_jobset_of_its_runtime_and_finishes(stack: Path) -> None:
    done = await kq(stack, "apply", "-f", str(SAMPLES / "sample-trainjob.yaml"))
    assert done.code == 0, done
    [wl] = await wait_workloads(stack, "trainjob-pytorch-distributed-", {"Admitted"})

    async def running() -> dict[str, str]:
        got = await pod_states(stack, "pytorch-distributed-node-0-")
        assert len(got) == 2 and set(got.values()) == {"Running"}, got  # numNodes: 2
        return got

    await eventually(running, timeout=30, interval=0.5, what="two trainer nodes run")
    await finish(stack, wl["NAME"])
    await wait_workloads(stack, "trainjob-pytorch-distributed-", {"Finished"})


async def test_appwrapper_sample_runs_its_wrapped_pytorchjob_and_finishes(stack: Path) -> None:
    done = await kq(stack, "apply", "-n", "default", "-f", str(SAMPLES / "sample-appwrapper.yaml"))
    assert done.code == 0, done
    [wl] = await wait_workloads(stack, "appwrapper-sample-appwrapper-pytorch-job-", {"Admitted"})

    async def running() -> dict[str, str]:
        got = await pod_states(stack, "pytorch-simple-")
        running = {n: s for n, s in got.items() if s == "Running"}
        assert set(running) == {"pytorch-simple-master-0", "pytorch-simple-worker-0"}, got
        return got

    await eventually(running, timeout=30, interval=0.5, what="the wrapped PyTorchJob's pods run")
    await finish(stack, wl["NAME"])
    await wait_workloads(stack, "appwrapper-sample-appwrapper-pytorch-job-", {"Finished"})


async def test_a_framework_kq_lacks_is_refused_not_run_unqueued(stack: Path) -> None:
    service = ("apiVersion: ray.io/v1\nkind: RayService\nmetadata:\n  name: rayservice-sample\n"
               "  labels: {kueue.x-k8s.io/queue-name: user-queue}\nspec: {}\n")
    refused = await kq(stack, "apply", "-f", "-", stdin=service)
    assert refused.code != 0, refused
    assert "ray.io/rayservice" in refused.err and "not available in kq" in refused.err, refused
