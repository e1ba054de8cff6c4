"""Kueue's TAS docs examples (site/static/examples/tas/), unchanged, on `kq up` with labelled Nodes:
the queues with a Topology and a TAS flavor (`kq apply`), then the required, preferred and
unconstrained sample Jobs (`kq create`). Each is admitted with a topology assignment, its pods
are created gated, released by the ungater onto their domains, and bound there by kubesim's
scheduler: every pod of the required example lands in one rack."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import TypedDict

import msgspec
import pytest
from e2e.test_cli_stack import kq
from support.wait import eventually

from kq.api.topology import topology_domains
from kq.api.workload import Workload
from kq.kube import KubeClient
from kq.stack import stop_stack


class Placed(TypedDict):
    racks: set[str]  # the racks its pods landed on
    pods: int


pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
# Kueue's checkout (its examples are used as they are, never copied here).
KUEUE_TAS = Path(os.environ.get("KUEUE_SRC", "/work/kueue-src")) / "site" / "static" / "examples" / "tas"
OURS = REPO / "examples" / "tas"
# Kueue's own files where a Kueue checkout is at hand (unchanged, as a user applies them); elsewhere (CI)
# kq's copies of their shape in examples/tas/.
SETUP, JOB = ((KUEUE_TAS / "sample-queues.yaml", "sample-job-{}.yaml") if KUEUE_TAS.is_dir()
              else (OURS / "queues.yaml", "job-{}.yaml"))
TAS_DIR = KUEUE_TAS if KUEUE_TAS.is_dir() else OURS
NODES = REPO / "examples" / "tas" / "nodes.yaml"
RACK = "cloud.provider.com/topology-rack"
GATE = "kueue.x-k8s.io/topology"


async def test_kueue_tas_examples_are_placed_and_land_where_assigned(tmp_path: Path) -> None:
    up = await kq("up", "--dir", "s", "--timeout", "120", cwd=tmp_path, timeout=150)
    client: KubeClient | None = None
    try:
        assert up.code == 0, up
        setup = await kq("apply", "--dir", "s", "-f", str(NODES), "-f", str(SETUP),
                         cwd=tmp_path)
        assert setup.code == 0, setup
        jobs = {}
        for kind in ("required", "preferred", "unconstrained"):
            created = await kq("create", "--dir", "s", "-f", str(TAS_DIR / JOB.format(kind)), cwd=tmp_path)
            assert created.code == 0, created
            jobs[kind] = created.out.split()[0].split("/", 1)[1]
        client = await KubeClient.from_kubeconfig(str(tmp_path / "s" / "kubeconfigs" / "manager.kubeconfig"))

        async def placed() -> dict[str, Placed]:
            nodes = {n["metadata"]["name"]: n["metadata"]["labels"]
                     for n in (msgspec.json.decode(r) for r in (await client.list("node"))[0])}
            pods = [msgspec.json.decode(r) for r in (await client.list("pod", "default"))[0]]
            wls = [msgspec.json.decode(r, type=Workload) for r in (await client.list("workload", "default"))[0]]
            out: dict[str, Placed] = {}
            for kind, job in jobs.items():
                [wl] = [w for w in wls if w.metadata.name.startswith(f"job-{job}-")]
                assert wl.status.admission is not None, f"{kind}: not admitted yet"
                [psa] = wl.status.admission.pod_set_assignments
                assert psa.topology_assignment is not None, f"{kind}: admitted without a topology assignment"
                mine = [p for p in pods if p["metadata"].get("labels", {}).get("job-name") == job]
                assert len(mine) == psa.count, f"{kind}: {len(mine)} pods, want {psa.count}"
                assert all(p["spec"].get("nodeName") and not p["spec"].get("schedulingGates") for p in mine), \
                    f"{kind}: pods not all ungated and bound yet"
                # Each pod is on a node of the domain the ungater gave it, and per host the counts
                # are the assignment's (hostname is the Topology's lowest level).
                on = Counter(p["spec"]["nodeName"] for p in mine)
                want = {d.values[-1]: d.count for d in topology_domains(psa.topology_assignment)}
                assert dict(on) == want, f"{kind}: pods on {dict(on)}, assignment {want}"
                assert all(p["spec"]["nodeSelector"].get("kubernetes.io/hostname") == p["spec"]["nodeName"]
                           for p in mine)
                out[kind] = {"racks": {nodes[n][RACK] for n in on}, "pods": len(mine)}
            return out

        got = await eventually(placed, timeout=90, interval=0.5, what="every example admitted and its pods placed")
        assert len(got["required"]["racks"]) == 1, got  # podset-required-topology: rack
        assert got["required"]["pods"] == 10 and got["preferred"]["pods"] == 40 and got["unconstrained"]["pods"] == 6
    finally:
        if client is not None:
            await client.close()
        down = await kq("down", "--dir", "s", cwd=tmp_path, timeout=60)
        if (tmp_path / "s" / "stack.json").exists():
            await stop_stack(tmp_path / "s", grace_s=2.0)
    assert down.code == 0, down
