"""`kq up` -> `kq apply` -> `kq get` (from the bus mirror) -> `kq down`, as a user runs them:
each command its own process, the stack detached in between, nothing left behind."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path

import aiohttp
import pytest
from support.wait import eventually

from kq.stack import is_alive, read_state, stop_stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# The shape of Kueue's own config map (tests/unit/fixtures): accepted whole, unused fields listed.
KUEUE_CONFIG = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "kueue-manager-config.yaml"


class Run:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"exit {self.code}\nstdout:\n{self.out}\nstderr:\n{self.err}"


async def kq(*args: str, cwd: Path, timeout: float = 60.0) -> Run:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "kq.cli", *args, cwd=cwd,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"kq {' '.join(args)} did not finish within {timeout}s") from None
    return Run(proc.returncode or 0, out.decode(), err.decode())


def table(text: str) -> list[dict[str, str]]:
    """Rows of a kubectl-like table as dicts; columns start where the header has 3+ spaces before a name."""
    lines = text.splitlines()
    starts = [0] + [m.end() for m in re.finditer(r" {3,}", lines[0])]
    bounds = list(zip(starts, [*starts[1:], None], strict=False))
    names = [lines[0][s:e].strip() for s, e in bounds]
    return [{n: ln[s:e].strip() for n, (s, e) in zip(names, bounds, strict=False)} for ln in lines[1:]]


async def test_up_refuses_a_bad_kueue_configuration_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "kueue.yaml"
    bad.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady: {timeout: -5m}\n")
    up = await kq("up", "--kueue-config", str(bad), cwd=tmp_path)
    assert up.code == 1, up
    assert "waitForPodsReady.timeout: negative duration '-5m'" in up.err
    assert not (tmp_path / ".kq" / "stack" / "stack.json").exists()


async def test_up_refuses_a_nats_cluster_without_nodes(tmp_path: Path) -> None:
    up = await kq("up", "--nats-cluster", "0", cwd=tmp_path)
    assert up.code == 1, up
    assert "--nats-cluster: want 1 to 5 nodes, got 0" in up.err
    assert not (tmp_path / ".kq" / "stack" / "stack.json").exists()


async def test_up_apply_get_down(tmp_path: Path) -> None:
    # The default state dir, .kq/stack under the current directory: no --dir anywhere.
    up = await kq("up", "--timeout", "120", "--kueue-config", str(KUEUE_CONFIG), cwd=tmp_path, timeout=150)
    state_dir = tmp_path / ".kq" / "stack"
    try:
        assert up.code == 0, up
        assert "stack is up" in up.out
        unused = next(ln for ln in up.out.splitlines() if ln.startswith("kueue configuration: kq does not use "))
        assert "health.healthProbeBindAddress" in unused and "featureGates.TopologyAwareScheduling" in unused
        assert "fairSharing" not in unused and "integrations.frameworks[batch/job]" not in unused
        assert "kueue configuration fields kq does not use" in (state_dir / "logs" / "watcher.log").read_text()
        state = read_state(state_dir)
        assert {"nats-server", "kubesim", "watcher"} <= {p.name for p in state.processes}
        assert all(is_alive(p) for p in state.processes)
        second = await kq("up", cwd=tmp_path)
        assert second.code == 1 and "already running" in second.err, second

        status = await kq("status", cwd=tmp_path)
        assert status.code == 0, status
        procs = {r["PROCESS"]: r for r in table(status.out.split("\n\n", 1)[1])}
        assert procs["watcher"]["STATE"] == "running"
        # Every service serves /readyz and /metrics on a port of its own (KQ_HTTP_PORT=0).
        assert (procs["watcher"]["READY"], procs["admission"]["READY"]) == ("ready", "ready"), status.out
        assert procs["watcher"]["RESTARTS"] == "0" and procs["supervisor"]["STATE"] == "running"

        # Supervision: a watcher killed with SIGKILL is started again (as the kubelet restarts a
        # container) and `kq status` counts the restart.
        old_pid = int(procs["watcher"]["PID"])
        os.kill(old_pid, signal.SIGKILL)

        async def restarted() -> dict[str, str]:
            st = await kq("status", cwd=tmp_path)
            row = {r["PROCESS"]: r for r in table(st.out.split("\n\n", 1)[1])}["watcher"]
            assert (st.code, row["RESTARTS"], row["STATE"], row["READY"]) == (0, "1", "running", "ready"), st
            return row

        row = await eventually(restarted, timeout=30, what="the killed watcher restarted")
        assert int(row["PID"]) != old_pid
        status = await kq("status", cwd=tmp_path)
        procs = {r["PROCESS"]: r for r in table(status.out.split("\n\n", 1)[1])}
        metrics_urls = {name: procs[name]["METRICS"] for name in ("watcher", "admission")}

        applied = await kq("apply", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"), cwd=tmp_path)
        assert applied.code == 0, applied
        assert applied.out.splitlines() == [
            "resourceflavor.kueue.x-k8s.io/default-flavor created",
            "clusterqueue.kueue.x-k8s.io/cluster-queue created",
            "localqueue.kueue.x-k8s.io/user-queue created",
        ]
        again = await kq("apply", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"), cwd=tmp_path)
        assert again.code == 0, again
        assert [ln.rsplit(" ", 1)[1] for ln in again.out.splitlines()] == ["unchanged"] * 3

        async def listed(kind: str, *extra: str) -> list[dict[str, str]]:
            got = await kq("get", kind, *extra, cwd=tmp_path)
            assert got.code == 0, got
            return table(got.out) if got.out else []

        cqs = await eventually(lambda: listed("cq"), timeout=20, what="kq get cq shows the mirror")
        assert [(r["NAME"], r["COHORT"]) for r in cqs] == [("cluster-queue", "")]

        async def scraped() -> bool:
            async with aiohttp.ClientSession() as http:
                async with http.get(metrics_urls["admission"]) as r:
                    text = await r.text()
                assert ('kueue_cluster_queue_nominal_quota{cluster_queue="cluster-queue",cohort="",'
                        'flavor="default-flavor",replica_role="leader",resource="cpu"} 9.0') in text, text[-2000:]
                async with http.get(metrics_urls["watcher"]) as r:
                    text = await r.text()
                assert 'kq_bus_message_latency_seconds_count{consumer=' in text, text[-2000:]
            return True

        await eventually(scraped, timeout=20, what="admission and watcher metrics over HTTP")
        lqs = await eventually(lambda: listed("localqueues", "-A"), timeout=20)
        assert [(r["NAMESPACE"], r["NAME"], r["CLUSTERQUEUE"]) for r in lqs] == [("default", "user-queue",
                                                                                   "cluster-queue")]
        rfs = await eventually(lambda: listed("rf"), timeout=20)
        assert [r["NAME"] for r in rfs] == ["default-flavor"]

        as_json = await kq("get", "clusterqueue", "cluster-queue", "-o", "json", cwd=tmp_path)
        assert as_json.code == 0, as_json
        obj = json.loads(as_json.out)
        assert (obj["kind"], obj["metadata"]["name"]) == ("ClusterQueue", "cluster-queue")
        assert obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "9"

        other = await kq("get", "cq", "--cluster", "worker-1", cwd=tmp_path)
        assert (other.code, other.out) == (0, ""), other  # applied to the manager only
        assert "No resources found" in other.err
        empty = await kq("get", "cq", "--cluster", "worker-1", "-o", "json", cwd=tmp_path)
        assert empty.code == 0 and json.loads(empty.out)["items"] == [] and not empty.err, empty  # as kubectl: a List
    finally:
        down = await kq("down", cwd=tmp_path, timeout=60)
        if (state_dir / "stack.json").exists():  # the command failed: never leave processes behind
            await stop_stack(state_dir, grace_s=2.0)
    assert down.code == 0, down
    assert "stack is down" in down.out
    assert not (state_dir / "stack.json").exists()
    assert [p.name for p in state.processes if is_alive(p)] == []
    again_down = await kq("down", cwd=tmp_path)
    assert again_down.code == 0 and "nothing to stop" in again_down.err
