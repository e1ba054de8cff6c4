"""WATCH: initial state, resume, bookmarks, selectors, 410 Gone and cut streams, as kubernetes-asyncio sees them."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import aiohttp
import pytest
from contract.sim_objects import KUEUE, MERGE, api_client, workload_body
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException
from support.kubesim_fixtures import SimControl
from support.wait import eventually

from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(30)


class Collector:
    """Runs one kubernetes-asyncio watch in a task and keeps (type, name, rv) of every event."""

    def __init__(self, func: Any, *args: Any, **kwargs: Any) -> None:
        self.w = watch.Watch()
        self.events: list[tuple[str, str, str]] = []
        self.error: BaseException | None = None
        self.task = asyncio.create_task(self._run(func, *args, **kwargs))

    async def _run(self, func: Any, *args: Any, **kwargs: Any) -> None:
        try:
            async for ev in self.w.stream(func, *args, **kwargs):
                raw = ev["raw_object"]
                self.events.append((ev["type"], raw["metadata"].get("name", ""), raw["metadata"]["resourceVersion"]))
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            self.error = e

    def kinds(self, skip_bookmarks: bool = True) -> list[tuple[str, str]]:
        return [(t, n) for t, n, _ in self.events if not (skip_bookmarks and t == "BOOKMARK")]

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.w.close()


async def test_watch_starts_with_current_objects_then_follows(core: CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    c = Collector(core.list_namespaced_config_map, "default")
    try:
        await eventually(lambda: c.kinds() == [("ADDED", "a")], what="initial ADDED")
        await core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
        await core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}}, _content_type=MERGE)
        await core.delete_namespaced_config_map("b", "default")
        await core.create_namespaced_config_map("kube-system", {"metadata": {"name": "elsewhere"}})
        want = [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
        await eventually(lambda: c.kinds() == want, what=f"events, have {c.events}")
        rvs = [int(rv) for _, _, rv in c.events]
        assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)
    finally:
        await c.stop()


async def test_resume_replays_what_was_missed(core: CoreV1Api) -> None:
    first = await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    await core.patch_namespaced_config_map("a", "default", {"data": {"k": "1"}}, _content_type=MERGE)
    await core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    c = Collector(core.list_namespaced_config_map, "default", resource_version=first.metadata.resource_version,
                  timeout_seconds=1)
    try:
        await asyncio.wait_for(c.task, 5)
        assert c.error is None
        assert c.kinds() == [("MODIFIED", "a"), ("ADDED", "b")]
    finally:
        await c.stop()


async def test_bookmarks_periodically_and_at_the_end(core: CoreV1Api) -> None:
    cm = await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    c = Collector(core.list_namespaced_config_map, "default", resource_version=cm.metadata.resource_version,
                  allow_watch_bookmarks=True, timeout_seconds=1)
    try:
        await asyncio.wait_for(c.task, 5)  # the server ends the watch after timeoutSeconds
        assert c.error is None
        types = [t for t, _, _ in c.events]
        assert types.count("BOOKMARK") >= 3 and types[-1] == "BOOKMARK"
        assert c.events[-1][2] == cm.metadata.resource_version
    finally:
        await c.stop()


async def test_selector_watch_sees_objects_enter_and_leave(custom: CustomObjectsApi) -> None:
    c = Collector(custom.list_namespaced_custom_object, *KUEUE, "default", "workloads", label_selector="tier=gold")
    try:
        body = workload_body("w1")
        body["metadata"]["labels"] = {"tier": "gold"}
        await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", body)
        await custom.create_namespaced_custom_object(*KUEUE, "default", "workloads", workload_body("w2"))
        for tier in ("silver", "gold"):
            await custom.patch_namespaced_custom_object(
                *KUEUE, "default", "workloads", "w1", {"metadata": {"labels": {"tier": tier}}}, _content_type=MERGE)
        want = [("ADDED", "w1"), ("DELETED", "w1"), ("ADDED", "w1")]
        # 15 s: under make test's load this once saw no event within 5 s (6 of 6 pass alone)
        await eventually(lambda: c.kinds() == want, timeout=15, what=f"events, have {c.events}")
    finally:
        await c.stop()


async def test_expired_history_is_410_gone(core: CoreV1Api, control: SimControl) -> None:
    old = await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    await core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    await control.post("clusters/manager/faults", {"type": "expire-history"})
    # Without timeout_seconds kubernetes-asyncio retries a 410 once with the same rv, then raises.
    c = Collector(core.list_namespaced_config_map, "default", resource_version=old.metadata.resource_version)
    try:
        await asyncio.wait_for(c.task, 5)
        assert isinstance(c.error, ApiException) and c.error.status == 410, c.error
    finally:
        await c.stop()
    # A resume from the current resourceVersion still works.
    now = (await core.list_namespaced_config_map("default")).metadata.resource_version
    c = Collector(core.list_namespaced_config_map, "default", resource_version=now, timeout_seconds=1)
    try:
        await asyncio.wait_for(c.task, 5)
        assert c.error is None
    finally:
        await c.stop()


async def test_410_is_an_error_event_with_a_status(sim: KubeSim, core: CoreV1Api, control: SimControl) -> None:
    old = await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    await core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    await control.post("clusters/manager/faults", {"type": "expire-history"})
    url = f"{sim.url}/clusters/manager/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession() as s, s.get(
        url, params={"watch": "true", "resourceVersion": old.metadata.resource_version},
        timeout=aiohttp.ClientTimeout(total=5)) as r:
        assert r.status == 200
        lines = (await r.read()).splitlines()
    assert len(lines) == 1
    ev = json.loads(lines[0])
    assert ev["type"] == "ERROR"
    assert {k: ev["object"][k] for k in ("kind", "apiVersion", "status", "reason", "code")} == {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410}
    assert ev["object"]["message"].startswith("too old resource version")


async def test_history_window_is_bounded(tmp_path: Any) -> None:
    sim = KubeSim(["manager"], history_size=5, seed=1)
    await sim.start()
    kube = await api_client(sim, "manager", tmp_path)
    try:
        core = CoreV1Api(kube)
        first = await core.create_namespaced_config_map("default", {"metadata": {"name": "c0"}})
        for i in range(1, 8):
            await core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
        c = Collector(core.list_namespaced_config_map, "default", resource_version=first.metadata.resource_version,
                      timeout_seconds=1)
        await asyncio.wait_for(c.task, 5)
        assert isinstance(c.error, ApiException) and c.error.status == 410
        await c.stop()
        recent = (await core.read_namespaced_config_map("c4", "default")).metadata.resource_version
        c = Collector(core.list_namespaced_config_map, "default", resource_version=recent, timeout_seconds=1)
        await asyncio.wait_for(c.task, 5)
        assert c.error is None and c.kinds() == [("ADDED", "c5"), ("ADDED", "c6"), ("ADDED", "c7")]
        await c.stop()
    finally:
        await kube.close()
        await sim.stop()


async def test_cut_mid_stream_raises_client_payload_error(core: CoreV1Api, control: SimControl) -> None:
    await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    c = Collector(core.list_namespaced_config_map, "default")
    try:
        await eventually(lambda: c.kinds() == [("ADDED", "a")])
        res = await control.post("clusters/manager/faults", {"type": "cut-watches", "midStream": True})
        assert res["watchesCut"] == 1
        await asyncio.wait_for(c.task, 5)
        assert isinstance(c.error, aiohttp.ClientPayloadError), repr(c.error)
    finally:
        await c.stop()


async def test_clean_cut_ends_the_stream_and_the_client_resumes(core: CoreV1Api, control: SimControl) -> None:
    await core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    c = Collector(core.list_namespaced_config_map, "default")  # no timeout: kubernetes-asyncio reconnects
    try:
        await eventually(lambda: c.kinds() == [("ADDED", "a")])
        await control.post("clusters/manager/faults", {"type": "cut-watches", "midStream": False})
        await core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
        await eventually(lambda: c.kinds() == [("ADDED", "a"), ("ADDED", "b")], what=f"have {c.events}")
        assert c.error is None
    finally:
        await c.stop()
    # With timeout_seconds the client does not reconnect: the iteration just ends.
    c = Collector(core.list_namespaced_config_map, "default", timeout_seconds=30)
    try:
        await eventually(lambda: len(c.kinds()) == 2)
        await control.post("clusters/manager/faults", {"type": "cut-watches"})
        await asyncio.wait_for(c.task, 5)
        assert c.error is None
    finally:
        await c.stop()
