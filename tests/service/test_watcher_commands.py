"""Commands from the bus applied to kubesim by the watcher: applied, refused, retried through 409s."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from support.kubesim_fixtures import SimControl, SimSpec
from support.wait import eventually
from support.watcher_harness import Outcomes, create, read_typed, running_watcher, send

from kq.api import constants as k
from kq.api.kueue import Admission, ClusterQueueStatus, PodSetAssignment, Workload
from kq.api.meta import find_condition
from kq.kube import KubeClient
from kq.messages import (
    AdmitWorkload,
    EvictWorkload,
    Fence,
    FinishWorkload,
    SetAdmissionCheckState,
    SetClusterQueueStatus,
    SetWorkloadPending,
)
from kq.runtime import Bus
from kubesim.server import KubeSim
from services.watcher.core import workload_status as ws

pytestmark = pytest.mark.timeout(90)
C = "c1"
KUBESIM = SimSpec(seed=5)


@pytest.fixture
async def world(kube: KubeClient) -> Workload:
    await create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    await create(kube, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f1"}})
    await create(kube, {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "f1", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}})
    return await create(kube, {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w1", "namespace": "demo"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}}}]}})


ADMISSION = Admission(cluster_queue="cq", pod_set_assignments=(
    PodSetAssignment(name="main", flavors={"cpu": "f1"}, resource_usage={"cpu": "1"}, count=1),))


def admit(wl: Workload, id: str, epoch: int = 0, uid: str | None = None) -> AdmitWorkload:
    return AdmitWorkload(id=id, cluster=C, writer="admission", epoch=epoch, namespace="demo", name="w1",
                         uid=uid or wl.metadata.uid, admission=ADMISSION)


async def outcome(outcomes: Outcomes, cmd_id: str):
    return await eventually(lambda: outcomes.by_id.get(cmd_id), timeout=10, what=f"outcome of {cmd_id}")


async def test_admit_is_applied_and_reported(bus: Bus, sim: KubeSim, kube: KubeClient, world: Workload,
                                             tmp_path: Path) -> None:
    async with Outcomes(bus, "admission", C) as outcomes, running_watcher(bus, sim, tmp_path, [C]):
        await send(bus, admit(world, "a1"))
        out = await outcome(outcomes, "a1")
        assert (out.applied, out.reason, out.writer, out.cluster) == (True, "", "admission", C)
        wl = await read_typed(kube, "workload", "demo", "w1")
        assert wl.status.admission == ADMISSION
        assert ws.has_quota_reservation(wl) and ws.is_admitted(wl)
        assert out.resource_version == wl.metadata.resource_version

        # The same decision again (a retry with a new id): nothing to do, reported as applied.
        await send(bus, admit(world, "a1-again"))
        again = await outcome(outcomes, "a1-again")
        assert (again.applied, again.reason) == (True, "AlreadyApplied")
        assert (await read_typed(kube, "workload", "demo", "w1")).metadata.resource_version == wl.metadata.resource_version


@pytest.mark.parametrize(
    "epoch,uid,want",
    [
        pytest.param(4, None, "StaleEpoch", id="stale-epoch-after-fence"),
        pytest.param(5, "not-the-uid", "UidMismatch", id="other-incarnation"),
    ],
)
async def test_refused_commands_change_nothing(bus: Bus, sim: KubeSim, kube: KubeClient, world: Workload,
                                               tmp_path: Path, epoch: int, uid: str | None, want: str) -> None:
    async with Outcomes(bus, "admission", C) as outcomes, running_watcher(bus, sim, tmp_path, [C]):
        await send(bus, Fence(id="fence-5", cluster=C, writer="admission", epoch=5))
        assert (await outcome(outcomes, "fence-5")).applied
        await send(bus, admit(world, "late", epoch=epoch, uid=uid))
        out = await outcome(outcomes, "late")
        assert (out.applied, out.reason) == (False, want)
        wl = await read_typed(kube, "workload", "demo", "w1")
        assert wl.status.admission is None and wl.metadata.resource_version == world.metadata.resource_version
        # The current holder is obeyed.
        await send(bus, admit(world, "current", epoch=5))
        assert (await outcome(outcomes, "current")).applied


async def test_conflict_storm_is_reread_and_replanned(bus: Bus, sim: KubeSim, kube: KubeClient, world: Workload,
                                                      control: SimControl, tmp_path: Path) -> None:
    async with Outcomes(bus, "admission", C) as outcomes, running_watcher(bus, sim, tmp_path, [C]):
        await control.fault(C, {"type": "errors", "code": 409, "count": 5, "verbs": ["patch"],
                                "resources": ["workloads/status"]})
        await send(bus, admit(world, "a-storm"))
        out = await outcome(outcomes, "a-storm")
        assert out.applied
        assert sim.cluster(C).faults.describe()["errors"] == [], "the 409s were not all answered"
        wl = await read_typed(kube, "workload", "demo", "w1")
        assert wl.status.admission == ADMISSION
        # Exactly one QuotaReserved condition: re-planning never stacked writes.
        assert [c.type for c in wl.status.conditions].count(k.WORKLOAD_QUOTA_RESERVED) == 1


async def test_eviction_of_a_job_less_workload_releases_quota(bus: Bus, sim: KubeSim, kube: KubeClient,
                                                              world: Workload, tmp_path: Path) -> None:
    async with Outcomes(bus, "admission", C) as outcomes, running_watcher(bus, sim, tmp_path, [C]):
        await send(bus, admit(world, "a"))
        assert (await outcome(outcomes, "a")).applied
        await send(bus, EvictWorkload(id="e", cluster=C, writer="admission", namespace="demo", name="w1",
                                      uid=world.metadata.uid, reason=k.EVICTED_BY_PREEMPTION,
                                      message="Preempted to accommodate a workload (UID: x)",
                                      preemption_reason="InClusterQueue"))
        assert (await outcome(outcomes, "e")).applied

        async def released() -> Workload:
            wl = await read_typed(kube, "workload", "demo", "w1")
            assert wl.status.admission is None, wl.status
            return wl

        wl = await eventually(released, timeout=10, what="quota released")
        conds = wl.status.conditions
        assert find_condition(conds, k.WORKLOAD_EVICTED).status == "True"  # type: ignore[union-attr]  # absent fails the test too
        assert find_condition(conds, k.WORKLOAD_PREEMPTED).reason == "InClusterQueue"  # type: ignore[union-attr]  # absent fails the test too
        assert find_condition(conds, k.WORKLOAD_REQUEUED).status == "True"  # type: ignore[union-attr]  # absent fails the test too
        assert find_condition(conds, k.WORKLOAD_QUOTA_RESERVED).status == "False"  # type: ignore[union-attr]  # absent fails the test too
        assert wl.status.scheduling_stats is not None
        assert [(e.reason, e.count) for e in wl.status.scheduling_stats.evictions] == [("Preempted", 1)]

        # Now pending again: the scheduler's reason is recorded, once.
        pending = SetWorkloadPending(id="p", cluster=C, writer="admission", namespace="demo", name="w1",
                                     uid=world.metadata.uid, reason="Pending", message="insufficient quota")
        await send(bus, pending)
        assert (await outcome(outcomes, "p")).applied
        qr = find_condition((await read_typed(kube, "workload", "demo", "w1")).status.conditions, k.WORKLOAD_QUOTA_RESERVED)
        assert qr is not None and (qr.reason, qr.message) == ("Pending", "insufficient quota")


async def test_cluster_queue_status(bus: Bus, sim: KubeSim, kube: KubeClient, world: Workload, tmp_path: Path) -> None:
    status = ClusterQueueStatus(pending_workloads=3, reserving_workloads=1, admitted_workloads=1)
    async with Outcomes(bus, "admission", C) as outcomes, running_watcher(bus, sim, tmp_path, [C]):
        await send(bus, SetClusterQueueStatus(id="s1", cluster=C, writer="admission", name="cq", status=status))
        assert (await outcome(outcomes, "s1")).applied
        cq = await read_typed(kube, "clusterqueue", None, "cq")
        assert (cq.status.pending_workloads, cq.status.reserving_workloads, cq.status.admitted_workloads) == (3, 1, 1)
        await send(bus, SetClusterQueueStatus(id="s2", cluster=C, writer="admission", name="cq", status=status))
        out = await outcome(outcomes, "s2")
        assert (out.applied, out.reason) == (True, "Unchanged")
        await send(bus, SetClusterQueueStatus(id="s3", cluster=C, writer="admission", name="nope", status=status))
        out = await outcome(outcomes, "s3")
        assert (out.applied, out.reason) == (False, "NotFound")


async def test_a_pending_reason_already_written_is_concluded_on_the_cache(
        bus: Bus, sim: KubeSim, kube: KubeClient, world: Workload, tmp_path: Path) -> None:
    """The cache holds the watcher's own writes (write-through): the same pending reason again, sent
    by a decider whose mirror lagged, is Unchanged without a GET."""
    def pending(id: str) -> SetWorkloadPending:
        return SetWorkloadPending(id=id, cluster=C, writer="admission", namespace="demo", name="w1",
                                  uid=world.metadata.uid, reason="Pending", message="no quota")

    async with Outcomes(bus, "admission", C) as outcomes, running_watcher(bus, sim, tmp_path, [C]) as watchers:
        client = watchers[0].client
        gets: list[str] = []
        real_get = client.get

        async def counted_get(kind: str, namespace: str | None, name: str) -> bytes | None:
            gets.append(f"{kind} {namespace}/{name}")
            return await real_get(kind, namespace, name)

        client.get = counted_get  # type: ignore[method-assign]  # counting the watcher's reads
        await send(bus, pending("p1"))
        assert (await outcome(outcomes, "p1")).applied
        written = await read_typed(kube, "workload", "demo", "w1")
        cached = watchers[0].objects.get("workload", "demo", "w1")
        assert cached is not None and cached.metadata.resource_version == written.metadata.resource_version
        gets.clear()
        await send(bus, pending("p2"))
        out = await outcome(outcomes, "p2")
        assert (out.applied, out.reason) == (True, "Unchanged")
        assert gets == [], gets
        assert (await read_typed(kube, "workload", "demo", "w1")).metadata.resource_version == \
            written.metadata.resource_version


async def test_a_write_answered_not_found_is_refused_without_a_read(
        bus: Bus, sim: KubeSim, kube: KubeClient, world: Workload, tmp_path: Path) -> None:
    """A 404 to a write is the server's word that no object of that name, hence of the command's
    uid, exists: refused NotFound at once (MultiKueue copies deleted while their admission was on its way)."""
    async with Outcomes(bus, "admission", C) as outcomes, running_watcher(bus, sim, tmp_path, [C]) as watchers:
        client = watchers[0].client
        gets: list[str] = []
        real_get, real_patch = client.get, client.patch

        async def counted_get(kind: str, namespace: str | None, name: str) -> bytes | None:
            gets.append(f"{kind} {namespace}/{name}")
            return await real_get(kind, namespace, name)

        async def patch_after_delete(kind: str, namespace: str | None, name: str, *args, **kwargs) -> bytes:
            await kube.delete(kind, namespace, name)  # deleted after the plan, before the write lands
            return await real_patch(kind, namespace, name, *args, **kwargs)

        await eventually(lambda: watchers[0].objects.get("workload", "demo", "w1"), what="the cache holds w1")
        client.get = counted_get  # type: ignore[method-assign]  # counting the watcher's reads
        client.patch = patch_after_delete  # type: ignore[method-assign]
        await send(bus, admit(world, "a404"))
        out = await outcome(outcomes, "a404")
        assert (out.applied, out.reason) == (False, "NotFound")
        assert gets == [], gets


async def test_an_applied_finish_is_reported_applied(bus: Bus, sim: KubeSim, kube: KubeClient, world: Workload,
                                                     tmp_path: Path) -> None:
    """After its write the watcher plans the Finish again on what it wrote: that is the Finish done,
    not a refusal because the Workload is finished (it was, by this very command)."""
    def finish(id: str) -> FinishWorkload:
        return FinishWorkload(id=id, cluster=C, writer="dispatcher", namespace="demo", name="w1",
                              uid=world.metadata.uid, reason="Succeeded", message="done on the worker")

    async with Outcomes(bus, "dispatcher", C) as outcomes, running_watcher(bus, sim, tmp_path, [C]):
        await send(bus, finish("f1"))
        out = await outcome(outcomes, "f1")
        assert (out.applied, out.reason) == (True, "")
        wl = await read_typed(kube, "workload", "demo", "w1")
        assert ws.is_finished(wl) and out.resource_version == wl.metadata.resource_version
        await send(bus, finish("f2"))
        again = await outcome(outcomes, "f2")
        assert (again.applied, again.reason) == (True, "AlreadyFinished")


async def test_a_finished_workload_still_takes_the_record_of_where_it_ran(
        bus: Bus, sim: KubeSim, kube: KubeClient, world: Workload, tmp_path: Path) -> None:
    """The MultiKueue winner's check can reach the manager after the manager's own integration finished
    the Workload (its job ran on the worker and its status came back first): status.clusterName and
    the check are still written, the Workload stays finished, and nothing else gets through."""
    uid = world.metadata.uid
    await kube.patch("workload", "demo", "w1", {"status": {"admissionChecks": [
        {"name": "mk", "state": "Pending", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        patch_type="merge", subresource="status")

    def check(id: str, state: Literal["Ready", "Retry"], cluster: str | None) -> SetAdmissionCheckState:
        return SetAdmissionCheckState(id=id, cluster=C, writer="dispatcher", namespace="demo", name="w1", uid=uid,
                                      check="mk", state=state, message=f'The workload was admitted on "{cluster}"',
                                      cluster_name=cluster)

    async with Outcomes(bus, "dispatcher", C) as outcomes, running_watcher(bus, sim, tmp_path, [C]):
        await send(bus, FinishWorkload(id="f1", cluster=C, writer="dispatcher", namespace="demo", name="w1", uid=uid,
                                       reason="Succeeded", message="done on the worker"))
        assert (await outcome(outcomes, "f1")).applied
        await send(bus, check("c1", "Ready", "worker-1"))
        out = await outcome(outcomes, "c1")
        assert (out.applied, out.reason) == (True, "")
        wl = await read_typed(kube, "workload", "demo", "w1")
        assert ws.is_finished(wl) and wl.status.cluster_name == "worker-1"
        assert [(c.name, c.state) for c in wl.status.admission_checks] == [("mk", "Ready")]
        assert not ws.is_admitted(wl) and out.resource_version == wl.metadata.resource_version
        await send(bus, check("c2", "Ready", "worker-2"))
        await send(bus, check("c3", "Retry", None))
        for id, reason in (("c2", "ClusterNameImmutable"), ("c3", "Finished")):
            refused = await outcome(outcomes, id)
            assert (refused.applied, refused.reason) == (False, reason)
        after = await read_typed(kube, "workload", "demo", "w1")
        assert after.metadata.resource_version == wl.metadata.resource_version
