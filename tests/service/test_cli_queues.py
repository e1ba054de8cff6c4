"""kueuectl's verbs in kq (`kq create clusterqueue|localqueue|resourceflavor`, `kq stop|resume`) against an
in-process kubesim through a kubeconfig, read back from the API server."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kq.api.kueue import ClusterQueue, LocalQueue, ResourceFlavor, Workload
from kq.cli.main import _run, build_parser
from kq.cli.objects import Streams
from kq.kube import KubeClient
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(60)
KUEUE = "kueue.x-k8s.io/v1beta2"


async def kq(kubeconfig: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await _run(build_parser().parse_args([*argv, "--kubeconfig", str(kubeconfig), "--cluster", "c1"]),
                      Streams(out, err))
    return code, out.getvalue(), err.getvalue()


async def read(kube: KubeClient, kind: str, ns: str | None, name: str, typ: type[Any]) -> Any:
    raw = await kube.get(kind, ns, name)
    assert raw is not None, f"{kind} {name} missing"
    return msgspec.json.decode(raw, type=typ)


async def test_create_queues_and_flavors_from_flags(sim: KubeSim, kube: KubeClient, tmp_path: Path) -> None:
    kc = sim.kubeconfig("c1", tmp_path / "c1.kubeconfig")
    code, out, err = await kq(kc, "create", "resourceflavor", "gpu-a", "--node-labels", "pool=a,gpu=h100",
                              "--node-taints", "gpu=true:NoSchedule")
    assert (code, out.strip()) == (0, "resourceflavor.kueue.x-k8s.io/gpu-a created"), err
    rf: ResourceFlavor = await read(kube, "resourceflavor", None, "gpu-a", ResourceFlavor)
    assert rf.spec.node_labels == {"pool": "a", "gpu": "h100"}
    assert [(t.key, t.value, t.effect) for t in rf.spec.node_taints] == [("gpu", "true", "NoSchedule")]

    code, out, err = await kq(kc, "create", "cq", "team-a", "--cohort", "org", "--queuing-strategy", "StrictFIFO",
                              "--nominal-quota", "gpu-a:cpu=8,memory=32Gi;spot:cpu=4,memory=16Gi",
                              "--borrowing-limit", "gpu-a:cpu=2", "--lending-limit", "spot:memory=8Gi",
                              "--reclaim-within-cohort", "Any", "--preemption-within-cluster-queue", "LowerPriority")
    assert code == 0, err
    cq: ClusterQueue = await read(kube, "clusterqueue", None, "team-a", ClusterQueue)
    assert (cq.spec.cohort_name, cq.spec.queueing_strategy) == ("org", "StrictFIFO")
    assert (cq.spec.preemption.reclaim_within_cohort, cq.spec.preemption.within_cluster_queue) == ("Any",
                                                                                                   "LowerPriority")
    (group,) = cq.spec.resource_groups  # both flavors cover cpu and memory: one group, flavors in order
    assert group.covered_resources == ("cpu", "memory")
    quotas = {(f.name, r.name): (str(r.nominal_quota), r.borrowing_limit, r.lending_limit)
              for f in group.flavors for r in f.resources}
    assert quotas == {("gpu-a", "cpu"): ("8", "2", None), ("gpu-a", "memory"): ("32Gi", None, None),
                      ("spot", "cpu"): ("4", None, None), ("spot", "memory"): ("16Gi", None, "8Gi")}

    code, _, err = await kq(kc, "create", "lq", "team-a-queue", "-n", "default", "-c", "missing")
    assert code == 1 and "ClusterQueue 'missing' does not exist" in err
    assert await kube.get("localqueue", "default", "team-a-queue") is None
    code, out, err = await kq(kc, "create", "localqueue", "team-a-queue", "-n", "default", "-c", "team-a")
    assert (code, out.strip()) == (0, "localqueue.kueue.x-k8s.io/team-a-queue created"), err
    lq: LocalQueue = await read(kube, "localqueue", "default", "team-a-queue", LocalQueue)
    assert lq.spec.cluster_queue == "team-a"


@pytest.mark.parametrize(("argv", "named"), [
    (("create", "cq", "bad", "--nominal-quota", "default:cpu=four"), "nominalQuota"),
    (("create", "cq", "bad", "--nominal-quota", "default-cpu=4"), "--nominal-quota"),
    (("create", "cq", "bad", "--nominal-quota", "default:cpu=4", "--borrowing-limit", "default:memory=1Gi"),
     "needs a nominal quota"),
    (("create", "rf", "bad", "--node-taints", "gpu"), "--node-taints"),
    (("create", "lq", "bad"), "-c/--clusterqueue"),
    (("create", "pods", "bad"), "clusterqueue|localqueue|resourceflavor"),
    (("stop", "pods", "x"), "workload|localqueue|clusterqueue"),
], ids=["bad-quantity", "bad-quota-syntax", "limit-without-quota", "bad-taint", "lq-without-cq", "bad-kind",
        "stop-bad-kind"])
async def test_bad_flags_are_refused_naming_them_and_change_nothing(sim: KubeSim, kube: KubeClient, tmp_path: Path,
                                                                   argv: tuple[str, ...], named: str) -> None:
    kc = sim.kubeconfig("c1", tmp_path / "c1.kubeconfig")
    code, out, err = await kq(kc, *argv)
    assert code != 0 and named in err, (out, err)
    for kind in ("clusterqueue", "resourceflavor"):
        assert await kube.get(kind, None, "bad") is None
    assert await kube.get("localqueue", "default", "bad") is None


async def test_stop_and_resume_set_what_kueue_reads(sim: KubeSim, kube: KubeClient, tmp_path: Path) -> None:
    kc = sim.kubeconfig("c1", tmp_path / "c1.kubeconfig")
    assert (await kq(kc, "create", "cq", "cq", "--nominal-quota", "default:cpu=4"))[0] == 0
    assert (await kq(kc, "create", "lq", "lq", "-c", "cq"))[0] == 0
    await kube.create("workload", "default", {
        "apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "wl", "namespace": "default"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}})

    code, out, err = await kq(kc, "stop", "workload", "wl")
    assert (code, out.strip()) == (0, "workload.kueue.x-k8s.io/wl stopped"), err
    assert (await read(kube, "workload", "default", "wl", Workload)).spec.active is False
    code, out, _ = await kq(kc, "resume", "wl", "wl")
    assert (code, out.strip()) == (0, "workload.kueue.x-k8s.io/wl resumed")
    assert (await read(kube, "workload", "default", "wl", Workload)).spec.active is True

    assert (await kq(kc, "stop", "localqueue", "lq"))[0] == 0
    assert (await read(kube, "localqueue", "default", "lq", LocalQueue)).spec.stop_policy == "HoldAndDrain"
    assert (await kq(kc, "stop", "cq", "cq", "--keep-already-running"))[0] == 0
    assert (await read(kube, "clusterqueue", None, "cq", ClusterQueue)).spec.stop_policy == "Hold"
    assert (await kq(kc, "resume", "cq", "cq"))[0] == 0
    assert (await read(kube, "clusterqueue", None, "cq", ClusterQueue)).spec.stop_policy == "None"

    code, _, err = await kq(kc, "stop", "cq", "nope")
    assert code == 1 and 'clusterqueues "nope" not found' in err
    code, _, err = await kq(kc, "resume", "lq", "lq", "--keep-already-running")
    assert code == 1 and "--keep-already-running" in err
