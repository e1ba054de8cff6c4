"""The watcher's mirror against a real nats-server and an in-process kubesim: it converges to the API."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.kubesim_fixtures import SimSpec
from support.wait import eventually
from support.watcher_harness import (
    MirrorFollower,
    api_state,
    create,
    diff,
    mirror_state,
    running_watcher,
)

from kq import subjects
from kq.kube import KubeClient
from kq.mirror import decode_marker
from kq.runtime import Bus
from kubesim.server import KubeSim
from services.watcher.settings import WatcherSettings

pytestmark = pytest.mark.timeout(90)

KUBESIM = SimSpec(seed=11)
KINDS = ["namespace", "resourceflavor", "clusterqueue", "localqueue", "workload", "job"]


def ns(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def flavor(name: str) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


def secret(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "data": {"k": "dg=="}}


async def test_mirror_converges_to_api_state(bus: Bus, sim: KubeSim, kube: KubeClient, tmp_path: Path) -> None:
    for n in ("demo", "kq-system", "other"):
        await create(kube, ns(n))
    await create(kube, flavor("before-start"))
    await create(kube, secret("mine", "kq-system"))
    await create(kube, secret("not-mine", "other"))

    async with MirrorFollower(bus, "c1") as mirror, running_watcher(bus, sim, tmp_path, ["c1"]):
        async def converged() -> bool:
            d = diff(await api_state(kube, KINDS), mirror_state(mirror.view, "c1", KINDS))
            assert not d, d
            return True

        await eventually(converged, timeout=10, what="mirror after start")
        # Secrets (MultiKueue kubeconfigs among them) never go on the bus.
        assert not mirror_state(mirror.view, "c1", ["secret"])

        # Changes while running: creates, updates, deletes (tombstones) are all followed.
        for i in range(20):
            await create(kube, flavor(f"f{i}"))
        await kube.patch("resourceflavor", None, "f3", {"spec": {"nodeLabels": {"a": "b"}}}, patch_type="merge")
        await kube.delete("resourceflavor", None, "before-start")
        await kube.delete("resourceflavor", None, "f7")
        await eventually(converged, timeout=10, what="mirror after changes")
        gone = [r for r in mirror.seen if r.deleted and r.kind == "resourceflavor"]
        assert sorted(r.name for r in gone) == ["before-start", "f7"]

    # Every kind got a SyncMarker after its list, with the list's count.
    for kind in ("namespace", "resourceflavor"):
        msg = await bus.js.get_msg(subjects.OBJECTS_STREAM, subject=subjects.sync_subject("c1", kind), direct=True)
        marker = decode_marker(msg.subject or subjects.sync_subject("c1", kind), msg.data or b"")
        assert marker.cluster == "c1" and marker.kind == kind and marker.count >= 1


async def test_restart_republishes_only_what_changed(bus: Bus, sim: KubeSim, kube: KubeClient, tmp_path: Path) -> None:
    """A restarted watcher replays the mirror into its index: unchanged objects are not stored
    again, objects changed or deleted while it was away are (once)."""
    for i in range(10):
        await create(kube, flavor(f"f{i}"))
    settings = WatcherSettings(skip_kinds=("pod", "node"), retry_base_s=0.05, retry_max_s=0.5)
    async with running_watcher(bus, sim, tmp_path, ["c1"], settings):
        pass

    async def seq(name: str) -> int:
        m = await bus.js.get_msg(subjects.OBJECTS_STREAM, subject=subjects.object_subject("c1", "resourceflavor", None, name),
                                 direct=True)
        return int(m.seq or 0)

    before = {f"f{i}": await seq(f"f{i}") for i in range(10)}
    # While the watcher is down: one change, one delete, one create.
    await kube.patch("resourceflavor", None, "f1", {"spec": {"nodeLabels": {"x": "y"}}}, patch_type="merge")
    await kube.delete("resourceflavor", None, "f2")
    await create(kube, flavor("f10"))

    async with MirrorFollower(bus, "c1") as mirror:
        start = len(mirror.seen)
        async with running_watcher(bus, sim, tmp_path, ["c1"], settings) as (w,):
            kinds = ["resourceflavor"]

            async def converged() -> bool:
                d = diff(await api_state(kube, kinds), mirror_state(mirror.view, "c1", kinds))
                assert not d, d
                return True

            await eventually(converged, timeout=10, what="mirror after restart")
            assert w.publisher.published == 3, "only f1 (changed), f2 (tombstone) and f10 (new) are published again"
        after = {f"f{i}": await seq(f"f{i}") for i in (0, 3, 4, 5, 6, 7, 8, 9)}
        assert after == {k: v for k, v in before.items() if k in after}, "unchanged objects were stored again"
        new = [(r.name, r.deleted) for r in mirror.seen[start:] if r.kind == "resourceflavor"]
        assert sorted(new) == [("f1", False), ("f10", False), ("f2", True)]
