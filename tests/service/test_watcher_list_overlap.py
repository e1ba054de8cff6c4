"""A paged list can carry an object newer than the list's own resourceVersion (kubesim serves later
pages as the store is now), and the watch that follows from the list's resourceVersion delivers that
state again: the watcher hands each state to the mirror once (the restart test's duplicate)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from support.kubesim_fixtures import kube_client
from support.wait import eventually
from support.watcher_harness import create

import kq.kube
from kq.mirror import SyncMarker
from kq.runtime import Bus
from kubesim.api_http import ApiServer
from kubesim.resources import RESOURCES
from kubesim.server import KubeSim
from services.watcher.listwatch import KindLoop
from services.watcher.mirror import MirrorIndex, MirrorPublisher, Record
from services.watcher.objects import ClusterObjects

pytestmark = pytest.mark.timeout(60)
C = "c1"
FLAVORS = next(r for r in RESOURCES if r.plural == "resourceflavors")


class SpyPublisher(MirrorPublisher):
    """The real publisher, remembering every record handed to it."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.handed: list[tuple[str, str, bool]] = []

    async def put(self, item: Record | SyncMarker) -> None:
        if isinstance(item, Record):
            self.handed.append((item.name, item.resource_version, item.deleted))
        await super().put(item)


async def test_a_state_listed_on_a_later_page_is_not_published_again_from_the_watch(
        bus: Bus, sim: KubeSim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kube = await kube_client(sim, tmp_path, C)
    try:
        for name in ("f1", "f2"):
            await create(kube, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}})
        monkeypatch.setattr(kq.kube, "_LIST_PAGE", 1)
        original = ApiServer._list
        touched: list[str] = []

        def list_then_change_f2(self: ApiServer, cluster: Any, t: Any, q: Any) -> Any:
            resp = original(self, cluster, t, q)
            if t.rt is FLAVORS and not q.get("continue") and not touched:  # between page 1 and page 2
                entry = cluster.store.modify(FLAVORS, "", "f2", lambda o: o["metadata"].setdefault("labels", {}).update(x="1"))
                touched.append(entry.obj["metadata"]["resourceVersion"])
            return resp

        monkeypatch.setattr(ApiServer, "_list", list_then_change_f2)

        publisher = SpyPublisher(bus, C, batch=64, queue_size=1000)
        loop = KindLoop(kube, C, "resourceflavor", namespace=None, index=MirrorIndex(), publisher=publisher,
                        objects=ClusterObjects(C), on_change=lambda *a: None, watch_timeout_s=30, retry_base_s=0.05,
                        retry_max_s=0.5)
        tasks = [asyncio.create_task(publisher.run()), asyncio.create_task(loop.run())]
        try:
            async def synced_and_watching() -> bool:
                return "resourceflavor" in publisher.synced and bool(touched) and int(loop.last_rv or 0) >= int(touched[0])

            await eventually(synced_and_watching, timeout=20, what="listed, and the watch past f2's change")
            await create(kube, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f3"}})
            await eventually(lambda: any(n == "f3" for n, _, _ in publisher.handed), timeout=20,
                             what="a later change handed over (the watch has passed f2's event)")
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        f2 = [h for h in publisher.handed if h[0] == "f2"]
        assert f2 == [("f2", touched[0], False)], publisher.handed
    finally:
        await kube.close()
