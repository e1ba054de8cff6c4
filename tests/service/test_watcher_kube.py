"""kq.kube against kubesim over HTTP: the verbs, paging, watch resume and its failure modes, typed errors."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

import aiohttp
import msgspec
import pytest
from support.kubesim_fixtures import SimControl, SimSpec

from kq import kube
from kq.api.core import Namespace
from kq.api.kueue import ResourceFlavor
from kq.kube import KubeClient, WatchEvent
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(60)
C = "c1"
KUBESIM = SimSpec(seed=9)


@pytest.fixture
def client(kube: KubeClient) -> KubeClient:
    return kube


def flavor(name: str, **spec) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def rf(raw: bytes) -> ResourceFlavor:
    return msgspec.json.decode(raw, type=ResourceFlavor)


async def test_verbs_and_preconditions(client: KubeClient) -> None:
    created = rf(await client.create("resourceflavor", None, flavor("f", nodeLabels={"a": "1"})))
    assert created.metadata.uid and created.metadata.resource_version
    with pytest.raises(kube.AlreadyExists):
        await client.create("resourceflavor", None, flavor("f"))

    merged = rf(await client.patch("resourceflavor", None, "f", {"spec": {"nodeLabels": {"b": "2"}}}, patch_type="merge"))
    assert merged.spec.node_labels == {"a": "1", "b": "2"}
    jsonp = rf(await client.patch("resourceflavor", None, "f", [{"op": "remove", "path": "/spec/nodeLabels/a"}],
                                  patch_type="json"))
    assert jsonp.spec.node_labels == {"b": "2"}
    with pytest.raises(kube.Conflict):  # a stale resourceVersion in a merge patch is a precondition
        await client.patch("resourceflavor", None, "f",
                           {"metadata": {"resourceVersion": created.metadata.resource_version}, "spec": {"nodeLabels": {}}},
                           patch_type="merge")
    with pytest.raises(kube.BadRequest):  # custom resources take no strategic merge patch (415)
        await client.patch("resourceflavor", None, "f", {"spec": {}}, patch_type="strategic")

    stale = msgspec.structs.replace(created, spec=msgspec.structs.replace(created.spec, node_labels={"c": "3"}))
    with pytest.raises(kube.Conflict):
        await client.replace("resourceflavor", None, "f", stale)
    current = rf(await client.get("resourceflavor", None, "f") or b"")
    replaced = rf(await client.replace("resourceflavor", None, "f",
                                       msgspec.structs.replace(stale, metadata=current.metadata)))
    assert replaced.spec.node_labels == {"c": "3"}

    with pytest.raises(kube.Conflict):
        await client.delete("resourceflavor", None, "f", preconditions={"uid": "someone-else"})
    await client.delete("resourceflavor", None, "f", preconditions={"uid": created.metadata.uid})
    assert await client.get("resourceflavor", None, "f") is None
    with pytest.raises(kube.NotFound):
        await client.delete("resourceflavor", None, "f")


async def test_list_pages_through_everything(client: KubeClient) -> None:
    for i in range(1203):
        await client.create("resourceflavor", None, flavor(f"f{i:04d}"))
    items, rv = await client.list("resourceflavor")
    names = sorted(rf(raw).metadata.name for raw in items)
    assert names == [f"f{i:04d}" for i in range(1203)]
    assert int(rv) >= max(int(rf(raw).metadata.resource_version) for raw in items)
    nss, _ = await client.list("namespace")
    assert "default" in {msgspec.json.decode(r, type=Namespace).metadata.name for r in nss}


async def _collect(client: KubeClient, rv: str, n: int, **kw: Any) -> list[WatchEvent]:
    out: list[WatchEvent] = []
    async with aclosing(client.watch("resourceflavor", rv, **kw)) as events:
        async for ev in events:
            if ev.type != "BOOKMARK":
                out.append(ev)
            if len(out) == n:
                break
    return out


async def test_watch_resumes_from_a_resource_version(client: KubeClient) -> None:
    _, rv = await client.list("resourceflavor")
    await client.create("resourceflavor", None, flavor("a"))
    await client.patch("resourceflavor", None, "a", {"spec": {"nodeLabels": {"x": "y"}}}, patch_type="merge")
    await client.delete("resourceflavor", None, "a")
    events = await asyncio.wait_for(_collect(client, rv, 3, timeout_s=5), 10)
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert rf(events[1].raw).spec.node_labels == {"x": "y"}


async def test_watch_sends_bookmarks_and_ends_cleanly(client: KubeClient) -> None:
    _, rv = await client.list("resourceflavor")
    seen = [ev async for ev in client.watch("resourceflavor", rv, timeout_s=1)]
    assert seen and {e.type for e in seen} == {"BOOKMARK"}
    assert all(msgspec.json.decode(e.raw)["metadata"]["resourceVersion"] for e in seen)


async def test_watch_from_expired_history_is_gone(client: KubeClient, control: SimControl) -> None:
    _, rv = await client.list("resourceflavor")
    await client.create("resourceflavor", None, flavor("a"))
    await control.fault(C, {"type": "expire-history"})
    with pytest.raises(kube.Gone):
        await asyncio.wait_for(_collect(client, rv, 1, timeout_s=5), 10)


@pytest.mark.parametrize("mid_stream,error", [pytest.param(True, kube.StreamBroken, id="mid-chunk"),
                                              pytest.param(False, None, id="clean")])
async def test_cut_watch(client: KubeClient, control: SimControl, mid_stream: bool, error: type | None) -> None:
    _, rv = await client.list("resourceflavor")

    first = asyncio.Event()

    async def watch_all() -> list[WatchEvent]:
        out = []
        async for ev in client.watch("resourceflavor", rv, timeout_s=30, bookmarks=False):
            out.append(ev)
            first.set()
        return out

    task = asyncio.create_task(watch_all())
    await client.create("resourceflavor", None, flavor("a"))
    await asyncio.wait_for(first.wait(), 10)  # the watch is open and streaming
    await control.fault(C, {"type": "cut-watches", "midStream": mid_stream})
    if error is None:
        assert isinstance(await asyncio.wait_for(task, 10), list)
    else:
        with pytest.raises(error):
            await asyncio.wait_for(task, 10)


async def test_errors_are_typed(client: KubeClient, control: SimControl, sim: KubeSim) -> None:
    await control.fault(C, {"type": "errors", "code": 429, "count": 1, "verbs": ["get"], "retryAfterSeconds": 2})
    with pytest.raises(kube.Throttled) as throttled:
        await client.get("resourceflavor", None, "x")
    assert throttled.value.retry_after == 2.0
    await control.fault(C, {"type": "errors", "code": 503, "count": 1, "verbs": ["list"]})
    with pytest.raises(kube.ServerError):
        await client.list("resourceflavor")
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{sim.url}/kubesim/clusters/{C}/disconnect"):
            pass
        with pytest.raises(kube.Unreachable):
            await client.get("resourceflavor", None, "x")
        async with s.post(f"{sim.url}/kubesim/clusters/{C}/reconnect"):
            pass
    assert await client.get("resourceflavor", None, "x") is None
