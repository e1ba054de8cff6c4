"""The dispatcher's view of a worker (services/dispatcher/remotes.py) against kubesim: the answer to
its own create, read after the watch delivered later versions, never replaces them.

The 15,000-job benchmark's straggler: three copies admitted on their workers within the
milliseconds the dispatcher took to read its creates' answers; the answers (no status) were
written over the admitted versions, and as nothing else happens to an admitted copy until it
wins, the manager's check stayed Pending until the dispatcher was restarted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from support.kubesim_fixtures import SimSpec
from support.wait import eventually

from kq.api import constants as k
from kq.api.kueue import KubeConfig, Workload
from kq.api.meta import condition_is_true
from kq.api.registry import decode_object
from kq.kube import KubeClient
from kq.remote_clusters import KubeconfigSource
from kubesim.server import KubeSim
from services.dispatcher.remotes import RemoteCluster

KUBESIM = SimSpec(namespaces=("ns",))
NsName = tuple[str, str]


def copy_doc(name: str) -> dict[str, Any]:
    return {"apiVersion": k.KUEUE_API_VERSION, "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "labels": {k.MULTIKUEUE_ORIGIN_LABEL: "mk"}},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}}


ADMITTED = {"status": {"conditions": [
    {"type": k.WORKLOAD_QUOTA_RESERVED, "status": "True", "reason": "QuotaReserved", "message": "",
     "lastTransitionTime": "2026-01-01T00:00:00Z"},
    {"type": k.WORKLOAD_ADMITTED, "status": "True", "reason": "Admitted", "message": "",
     "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def admitted(wl: Workload | None) -> bool:
    return wl is not None and condition_is_true(wl.status.conditions, k.WORKLOAD_ADMITTED)


@pytest.fixture
def changed() -> list[set[NsName]]:
    """The workload keys the view said it changed, call by call (the term reconciles those)."""
    return []


@pytest.fixture
def progressed() -> list[set[NsName]]:
    """The workload keys whose worker Job only moved its status along (the term reconciles those later)."""
    return []


@pytest.fixture
async def remote(sim: KubeSim, tmp_path: Path, kube: KubeClient, changed: list[set[NsName]],
                 progressed: list[set[NsName]]) -> AsyncIterator[RemoteCluster]:
    path = sim.kubeconfig("c1", tmp_path / "worker.kubeconfig")
    rc = RemoteCluster("c1", KubeConfig(location=str(path), location_type="Path"), KubeconfigSource(None, "kq-system"),
                       "mk", lambda _c, keys: changed.append(keys), lambda _c: None,
                       retry_base_s=0.05, retry_max_s=0.2, watch_timeout_s=5.0, resync_s=0.2,
                       on_progress=lambda _c, keys: progressed.append(keys))
    task = asyncio.create_task(rc.run())
    try:
        await eventually(lambda: rc.available, timeout=10.0, what="connected and listed")
        yield rc
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_create_answer_read_after_the_watch_moved_on_does_not_hide_the_admission(
        kube: KubeClient, remote: RemoteCluster) -> None:
    answer = await kube.create("workload", "ns", copy_doc("w1"))
    await kube.patch("workload", "ns", "w1", ADMITTED, patch_type="merge", subresource="status")
    await eventually(lambda: admitted(remote.workloads.get(("ns", "w1"))), what="the watch delivered the admission")
    assert not remote.remember("workload", answer)  # the dispatcher reads its create's answer only now
    assert admitted(remote.workloads.get(("ns", "w1")))


async def test_a_create_answer_for_a_copy_already_deleted_does_not_bring_it_back(
        kube: KubeClient, remote: RemoteCluster) -> None:
    answer = await kube.create("workload", "ns", copy_doc("w2"))
    await eventually(lambda: ("ns", "w2") in remote.workloads, what="the watch delivered the copy")
    await kube.delete("workload", "ns", "w2")
    await eventually(lambda: ("ns", "w2") not in remote.workloads, what="the watch delivered the deletion")
    assert not remote.remember("workload", answer)
    assert ("ns", "w2") not in remote.workloads


async def test_the_answer_to_a_later_write_is_taken_before_its_echo(kube: KubeClient, remote: RemoteCluster) -> None:
    await kube.create("workload", "ns", copy_doc("w3"))
    await eventually(lambda: ("ns", "w3") in remote.workloads, what="the watch delivered the copy")
    patched = await kube.patch("workload", "ns", "w3", ADMITTED, patch_type="merge", subresource="status")
    remote.remember("workload", patched)  # taken, unless the watch delivered the same version first
    assert admitted(remote.workloads.get(("ns", "w3")))


async def test_a_view_gone_wrong_is_corrected_by_the_next_resync(
        kube: KubeClient, remote: RemoteCluster, changed: list[set[NsName]]) -> None:
    answer = await kube.create("workload", "ns", copy_doc("w4"))
    gone = await kube.create("workload", "ns", copy_doc("w5"))
    await kube.patch("workload", "ns", "w4", ADMITTED, patch_type="merge", subresource="status")
    await kube.delete("workload", "ns", "w5")
    await eventually(lambda: admitted(remote.workloads.get(("ns", "w4"))) and ("ns", "w5") not in remote.workloads,
                     what="the watch delivered the admission and the deletion")
    # What a lost or overwritten event leaves behind: an older version, and a deleted copy still held.
    remote.workloads[("ns", "w4")] = decode_object("workload", answer)
    remote.workloads[("ns", "w5")] = decode_object("workload", gone)
    changed.clear()
    await eventually(lambda: admitted(remote.workloads.get(("ns", "w4"))) and ("ns", "w5") not in remote.workloads,
                     timeout=10.0, what="the resync corrected the view")
    assert {("ns", "w4"), ("ns", "w5")} <= set().union(*changed)  # and their workloads are reconciled


async def test_a_copy_we_deleted_leaves_the_view_at_once_and_comes_back_only_if_the_watch_shows_it(
        kube: KubeClient, remote: RemoteCluster) -> None:
    await kube.create("workload", "ns", copy_doc("w6"))
    await eventually(lambda: ("ns", "w6") in remote.workloads, what="the watch delivered the copy")
    remote.forget("workload", "ns", "w6")  # the term's delete went through (here the server still has it,
    assert ("ns", "w6") not in remote.workloads  # as with a finalizer): no decision deletes it twice meanwhile
    await kube.patch("workload", "ns", "w6", ADMITTED, patch_type="merge", subresource="status")
    await eventually(lambda: admitted(remote.workloads.get(("ns", "w6"))), what="the watch shows the copy again")


async def test_the_echoes_of_our_own_create_and_delete_reconcile_nothing(
        kube: KubeClient, remote: RemoteCluster, changed: list[set[NsName]]) -> None:
    with remote.own_write("workload", "ns", "w7"):  # as the term writes (its echo may come before the answer)
        answer = await kube.create("workload", "ns", copy_doc("w7"))
        remote.remember("workload", answer)  # the term's create: its answer is in the view
    created_rv = int(decode_object("workload", answer).metadata.resource_version)
    await eventually(lambda: remote._seen.get("workload", 0) >= created_rv, what="the watch passed the creation")
    with remote.own_write("workload", "ns", "w7"):
        await kube.delete("workload", "ns", "w7")
        remote.forget("workload", "ns", "w7")  # the term's delete went through
    await kube.create("workload", "ns", copy_doc("w8"))  # a copy created by someone else: a change
    await eventually(lambda: ("ns", "w8") in remote.workloads, what="the watch delivered w8")
    assert ("ns", "w7") not in set().union(*changed), changed  # neither echo was a change of the view
    assert ("ns", "w8") in set().union(*changed)


async def test_the_echoes_of_our_writes_still_in_flight_reconcile_nothing(
        kube: KubeClient, remote: RemoteCluster, changed: list[set[NsName]]) -> None:
    # Under load the watch can deliver the echo before the term has read its call's answer.
    with remote.own_write("workload", "ns", "w9"):
        answer = await kube.create("workload", "ns", copy_doc("w9"))
        await eventually(lambda: ("ns", "w9") in remote.workloads, what="the echo of the create, answer unread")
        remote.remember("workload", answer)
    with remote.own_write("workload", "ns", "w9"):
        await kube.delete("workload", "ns", "w9")
        await eventually(lambda: ("ns", "w9") not in remote.workloads, what="the echo of the delete, answer unread")
        remote.forget("workload", "ns", "w9")
    await kube.create("workload", "ns", copy_doc("w10"))  # someone else's create: a change
    await eventually(lambda: ("ns", "w10") in remote.workloads, what="the watch delivered w10")
    assert ("ns", "w9") not in set().union(*changed), changed
    assert ("ns", "w10") in set().union(*changed)


async def test_only_a_change_a_decision_reads_reconciles(
        kube: KubeClient, remote: RemoteCluster, changed: list[set[NsName]]) -> None:
    await kube.create("workload", "ns", copy_doc("w11"))
    await eventually(lambda: ("ns", "w11") in remote.workloads, what="the watch delivered the copy")
    changed.clear()
    # An adoption by its Job (owner reference and job-uid label, as Kueue's job reconciler writes
    # them) and a finalizer: nothing the dispatcher decides on.
    job = decode_object("job", await kube.create("job", "ns", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j11", "namespace": "ns"},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "i"}]}}}}))
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j11", "uid": job.metadata.uid, "controller": True}
    await kube.patch("workload", "ns", "w11", {"metadata": {
        "ownerReferences": [owner], "finalizers": ["x/y"], "labels": {k.JOB_UID_LABEL: job.metadata.uid}}},
                     patch_type="merge")
    await kube.patch("workload", "ns", "w11", ADMITTED, patch_type="merge", subresource="status")
    await eventually(lambda: admitted(remote.workloads.get(("ns", "w11"))), what="the watch delivered the admission")
    held = remote.workloads[("ns", "w11")]
    assert held.metadata.owner_references and held.metadata.finalizers  # the view holds the adoption too
    assert held.metadata.labels[k.JOB_UID_LABEL] == job.metadata.uid
    assert [keys for keys in changed if ("ns", "w11") in keys] == [{("ns", "w11")}]  # the admission only


async def test_the_echo_of_a_version_held_and_a_deletion_are_not_decoded(
        kube: KubeClient, remote: RemoteCluster, changed: list[set[NsName]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Every copy's create is answered (remembered) and then echoed by the watch, and every copy is
    # deleted: decoding those again was a third of the view's decodes per MultiKueue job.
    import services.dispatcher.remotes as remotes_module

    decoded: list[str] = []

    def counting(kind: str, raw: bytes) -> Any:
        decoded.append(kind)
        return decode_object(kind, raw)

    monkeypatch.setattr(remotes_module, "decode_object", counting)
    for attempt in range(5):  # the case under test: the answer is read before the watch's echo
        if attempt:
            await kube.delete("workload", "ns", "w12")
            await eventually(lambda: ("ns", "w12") not in remote.workloads, what="the earlier try deleted")
            decoded.clear()
        with remote.own_write("workload", "ns", "w12"):
            answer = await kube.create("workload", "ns", copy_doc("w12"))
            if remote.remember("workload", answer):
                break
    else:
        pytest.fail("the watch delivered the creation before its answer was read, five times in a row")
    created_rv = int(decode_object("workload", answer).metadata.resource_version)
    await eventually(lambda: remote._seen.get("workload", 0) >= created_rv, what="the watch passed the creation")
    assert decoded == ["workload"]  # the answer only, not its echo
    await kube.patch("workload", "ns", "w12", ADMITTED, patch_type="merge", subresource="status")
    await eventually(lambda: admitted(remote.workloads.get(("ns", "w12"))), what="the watch delivered the admission")
    assert decoded == ["workload", "workload"]  # a version the view did not hold is decoded
    await kube.delete("workload", "ns", "w12")
    await eventually(lambda: ("ns", "w12") not in remote.workloads, what="the watch delivered the deletion")
    assert decoded == ["workload", "workload"]  # a deletion is not
    assert {("ns", "w12")} in changed  # someone else's admission and deletion are changes


def job_doc(name: str, copy_name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "ns", "labels": {
        k.MULTIKUEUE_ORIGIN_LABEL: "mk", k.PREBUILT_WORKLOAD_LABEL: copy_name}},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "i"}]}}}}


@pytest.mark.parametrize("adopted", [True, False], ids=["adopted-copy-goes-with-its-job", "copy-deleted-itself"])
async def test_deleting_a_copy_and_its_job(kube: KubeClient, remote: RemoteCluster, monkeypatch: pytest.MonkeyPatch,
                                           adopted: bool) -> None:
    # The winner's copy, adopted by its Job, is removed by the garbage collector with the Job (a
    # DELETE of it too found it gone, once a job); a copy nothing owns is deleted itself.
    name = f"w-{adopted}".lower()
    job = decode_object("job", await kube.create("job", "ns", job_doc(f"j-{name}", name)))
    await kube.create("workload", "ns", copy_doc(name))
    if adopted:
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job.metadata.name, "uid": job.metadata.uid,
                 "controller": True}
        await kube.patch("workload", "ns", name, {"metadata": {"ownerReferences": [owner]}}, patch_type="merge")
    await eventually(lambda: remote.job_for("ns", name) is not None and bool(
        (wl := remote.workloads.get(("ns", name))) and bool(wl.metadata.owner_references) == adopted),
                     what="the view holds the Job and the copy")
    assert remote.client is not None
    deleted: list[tuple[str, str]] = []
    real = remote.client.delete

    async def spy(kind: str, namespace: str, obj: str, **kw: Any) -> Any:
        deleted.append((kind, obj))
        return await real(kind, namespace, obj, **kw)

    monkeypatch.setattr(remote.client, "delete", spy)
    await remote.delete_copy("ns", name)
    assert deleted == [("job", job.metadata.name)] + ([] if adopted else [("workload", name)])
    assert ("ns", name) not in remote.workloads and remote.job_for("ns", name) is None

    async def copy_gone() -> bool:
        return (await kube.get("workload", "ns", name)) is None

    await eventually(copy_gone, what="the copy is gone from its worker")


async def test_a_worker_jobs_status_moving_along_can_wait_its_finish_cannot(
        kube: KubeClient, remote: RemoteCluster, changed: list[set[NsName]], progressed: list[set[NsName]]) -> None:
    # Only the status copy onto the manager's Job reads a running Job's status (the term reconciles it
    # a moment later, as Kueue batches remote events); a finished one finishes the manager's workload.
    def reported(to: list[set[NsName]]) -> bool:
        return any(("ns", "w-run") in keys for keys in to)

    await kube.create("job", "ns", job_doc("j-run", "w-run"))
    await eventually(lambda: remote.job_for("ns", "w-run") is not None, what="the view holds the Job")
    changed.clear()
    running = {"status": {"active": 1, "startTime": "2026-01-01T00:00:00Z"}}
    await kube.patch("job", "ns", "j-run", running, patch_type="merge", subresource="status")
    await eventually(lambda: reported(progressed), what="the progress reported apart")
    assert not reported(changed)
    done = {"status": {"active": 0, "succeeded": 1, "conditions": [
        {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}]}}
    await kube.patch("job", "ns", "j-run", done, patch_type="merge", subresource="status")
    await eventually(lambda: reported(changed), what="the finish reported as a change")
