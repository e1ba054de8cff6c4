"""Objects written straight into the cluster that kq cannot read (no `kq apply` in front): the watcher
says so on them, naming the field, keeps going with everything else, and takes it back when fixed.

A ClusterQueue with a misspelt field gets Active=False/InvalidSpec; a Workload whose spec does not
fit gets QuotaReserved=False/Misconfigured; a ResourceFlavor (no status in Kueue) and a Job get a
Warning Event. Meanwhile a good Job still gets its Workload. Fixing the ClusterQueue removes the
condition kq set and nothing else on its status.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from support.wait import eventually
from support.watcher_harness import create, read_typed, running_watcher

from kq.api import constants as k
from kq.kube import KubeClient
from kq.runtime import Bus
from kubesim.server import KubeSim
from services.watcher.core.job_pods import workload_name

pytestmark = pytest.mark.timeout(90)
C = "c1"
TYPO = "spec.resourceGroups[0].flavors[0].resources[0].nominalQouta"


def cq_doc(name: str, quota_field: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", quota_field: "4"}]}]}]}}


def job_doc(name: str, tolerations: Any = ()) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "demo", "labels": {k.QUEUE_NAME_LABEL: "lq"}},
            "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
                "restartPolicy": "Never", "tolerations": tolerations,
                "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}}}}


async def _raw(kube: KubeClient, kind: str, ns: str | None, name: str) -> dict[str, Any]:
    raw = await kube.get(kind, ns, name)
    assert raw is not None, f"{kind} {name} is gone"
    return msgspec.json.decode(raw)


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", ()) if c.get("type") == type_), None)


async def _events_on(kube: KubeClient, name: str) -> list[dict[str, Any]]:
    items, _ = await kube.list("event", None)
    return [e for e in map(msgspec.json.decode, items) if e.get("involvedObject", {}).get("name") == name]


async def test_undecodable_objects_get_a_condition_or_event_naming_the_field(bus: Bus, sim: KubeSim,
                                                                              kube: KubeClient,
                                                                              tmp_path: Path) -> None:
    await create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    await kube.create("clusterqueue", None, msgspec.json.encode(cq_doc("bad-cq", "nominalQouta")))
    await kube.create("resourceflavor", None, msgspec.json.encode(
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "bad-rf"},
         "spec": {"nodeLabels": {"zone": 5}}}))
    await kube.create("workload", "demo", msgspec.json.encode(
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "bad-wl", "namespace": "demo"},
         "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": "two", "template": {"spec": {
             "containers": [{"name": "c", "image": "pause"}]}}}]}}))
    await kube.create("job", "demo", msgspec.json.encode(job_doc("bad-job", "all")))
    async with running_watcher(bus, sim, tmp_path, [C]):
        async def cq_marked() -> dict[str, Any]:
            cond = _condition(await _raw(kube, "clusterqueue", None, "bad-cq"), "Active")
            assert cond is not None and (cond["status"], cond["reason"]) == ("False", "InvalidSpec"), cond
            return cond

        cond = await eventually(cq_marked, timeout=20, what="Active=False on the bad ClusterQueue")
        assert TYPO in cond["message"], cond["message"]

        async def wl_marked() -> dict[str, Any]:
            c = _condition(await _raw(kube, "workload", "demo", "bad-wl"), "QuotaReserved")
            assert c is not None and (c["status"], c["reason"]) == ("False", "Misconfigured"), c
            return c

        assert "spec.podSets[0].count" in (await eventually(wl_marked, timeout=20, what="bad Workload"))["message"]

        for name, field in (("bad-rf", "spec.nodeLabels"), ("bad-job", "spec.template.spec.tolerations")):
            async def evented(name: str = name) -> dict[str, Any]:
                (ev,) = await _events_on(kube, name)
                return ev

            ev = await eventually(evented, timeout=20, what=f"an Event on {name}")
            assert (ev["type"], ev["reason"]) == ("Warning", "InvalidSpec") and field in ev["message"], ev

        # Everything else goes on: a good Job gets its Workload.
        good = await create(kube, job_doc("good-job"))

        async def good_workload() -> bool:
            assert await read_typed(kube, "workload", "demo", workload_name("good-job", good.metadata.uid))
            return True

        await eventually(good_workload, timeout=20, what="the good Job's Workload")

        # The owner fixes the typo: kq's condition goes, the rest of the status stays.
        other = {"type": "Other", "status": "True", "reason": "Mine", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}
        obj = await _raw(kube, "clusterqueue", None, "bad-cq")
        await kube.patch("clusterqueue", None, "bad-cq", {"status": {"conditions": [
            *obj["status"]["conditions"], other]}}, patch_type="merge", subresource="status")
        await kube.patch("clusterqueue", None, "bad-cq", {"spec": cq_doc("bad-cq", "nominalQuota")["spec"]}, patch_type="merge")

        async def cleared() -> bool:
            conditions = (await _raw(kube, "clusterqueue", None, "bad-cq"))["status"]["conditions"]
            assert [c["type"] for c in conditions] == ["Other"], conditions
            return True

        await eventually(cleared, timeout=20, what="the InvalidSpec condition removed")
