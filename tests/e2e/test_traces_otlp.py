"""Traces end to end, as an operator collects them: the services run as their own processes (kq's local
stack), export over OTLP/HTTP to a receiver in this test (the standard OTEL_* variables), and every
workload's spans, from every process, form one connected trace."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from support.wait import eventually
from support.watcher_harness import create, read_typed

from kq.api.constants import QUEUE_NAME_LABEL, TRACEPARENT_ANNOTATION
from kq.api.core import Job
from kq.api.registry import decode_object
from kq.kube import KubeClient
from kq.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
KUEUE = "kueue.x-k8s.io/v1beta2"
JOBS = ("alpha", "beta", "gamma")


class Span:
    def __init__(self, service: str, name: str, trace_id: str, span_id: str, parent: str,
                 attributes: dict[str, str]) -> None:
        self.service, self.name, self.trace_id, self.span_id, self.parent = service, name, trace_id, span_id, parent
        self.attributes = attributes

    def __repr__(self) -> str:
        return f"{self.service}:{self.name}"


@asynccontextmanager
async def otlp_receiver() -> AsyncIterator[tuple[str, list[Span]]]:
    """An OTLP/HTTP trace receiver (protobuf, as the SDK's exporter sends) on a free port."""
    spans: list[Span] = []

    async def traces(req: web.Request) -> web.Response:
        export = ExportTraceServiceRequest.FromString(await req.read())
        for rs in export.resource_spans:
            service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), "?")
            for ss in rs.scope_spans:
                for s in ss.spans:
                    spans.append(Span(service, s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                                      {a.key: a.value.string_value for a in s.attributes}))
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", spans
    finally:
        await runner.cleanup()


def job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "labels": {QUEUE_NAME_LABEL: "lq"}},
            "spec": {"parallelism": 1, "completions": 1, "template": {
                "metadata": {"annotations": {"kq.dev/runtime": "1h"}},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}}}}


async def make_world(kube: KubeClient) -> None:
    await create(kube, {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}})
    await create(kube, {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "8"}]}]}]}})
    await create(kube, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "default"},
                        "spec": {"clusterQueue": "cq"}})


async def test_every_process_exports_one_connected_trace_per_workload(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    async with otlp_receiver() as (endpoint, spans):
        # What an operator sets on the Deployments; the stack's processes inherit this environment.
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "200")  # export every 200 ms instead of 5 s
        async with Stack(tmp_path / "s", clusters=[("manager", "manager")], services=["watcher", "admission"],
                         timeout_s=90) as stack:
            kube = await KubeClient.from_kubeconfig(stack.kubeconfig("manager"))
            try:
                await make_world(kube)
                for name in JOBS:
                    await create(kube, job(name))

                async def all_running() -> bool:
                    for name in JOBS:
                        j: Job = await read_typed(kube, "job", "default", name)
                        assert j.spec.suspend is False, f"{name} not started yet"
                    return True

                await eventually(all_running, timeout=60, interval=0.2, what="every job admitted and started")
                items, _ = await kube.list("workload", namespace="default")
                workloads = [decode_object("workload", raw) for raw in items]
            finally:
                await kube.close()

            trace_of = {f"default/{w.metadata.name}": w.metadata.annotations[TRACEPARENT_ANNOTATION].split("-")[1]
                        for w in workloads}
            assert len(trace_of) == len(JOBS) and len(set(trace_of.values())) == len(JOBS), trace_of

            def connected() -> dict[str, list[Span]]:
                by_trace: dict[str, list[Span]] = defaultdict(list)
                for s in spans:
                    by_trace[s.trace_id].append(s)
                out = {}
                for wl, trace_id in trace_of.items():
                    mine = by_trace[trace_id]
                    ids = {s.span_id for s in mine}
                    roots = [s for s in mine if not s.parent]
                    assert len(roots) == 1 and roots[0].name == "watcher.reconcile job", \
                        (wl, roots, f"{len(spans)} spans received in all")
                    orphans = [s for s in mine if s.parent and s.parent not in ids]
                    assert not orphans, (wl, orphans)  # every span hangs off the one root
                    assert {s.service for s in mine} >= {"watcher", "admission"}, (wl, mine)
                    decided = [s for s in mine if s.name == "admission.decide Admitted"]
                    assert decided and all(s.attributes.get("kq.workload") == wl for s in decided), (wl, decided)
                    assert any(s.name == "watcher.command AdmitWorkload" for s in mine), (wl, mine)
                    out[wl] = mine
                return out

            traces = await eventually(connected, timeout=30, interval=0.3, what="one connected trace per workload")
    assert set(traces) == set(trace_of)
