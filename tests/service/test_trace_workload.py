"""One trace per workload (kq.obs): the watcher's reconcile of a new Job starts it, the Workload carries
it, admission's decision joins it, and the watcher's command execution continues from that decision.
Real nats-server and kubesim; the watcher and admission in-process on their own bus connections,
recording into one in-memory exporter."""

from __future__ import annotations

import asyncio
from contextlib import suppress
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from service.test_admission_service import FAST, job_doc, make_world, read_job, wait_deciding, workload_of_job
from support.wait import eventually
from support.watcher_harness import cluster_configs, create, read_typed, running_watcher

from kq.api.constants import TRACEPARENT_ANNOTATION
from kq.config import Config, NatsConfig
from kq.kube import KubeClient
from kq.runtime import Bus
from kubesim.server import KubeSim
from services.admission.service import main as admission_main

pytestmark = pytest.mark.timeout(120)
C = "c1"


async def test_one_trace_spans_watcher_admission_watcher_for_a_job(bus: Bus, nats_config: NatsConfig, sim: KubeSim,
                                                                   kube: KubeClient, tmp_path: Path) -> None:
    # `bus`: a clean JetStream with kq's streams; the services below get traced connections of their own.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    await make_world(kube, cpu="4")
    watcher_bus = await Bus.connect(nats_config, "watcher", tracer_provider=provider)
    admission_bus = await Bus.connect(nats_config, "admission", tracer_provider=provider)
    config = Config(nats=nats_config, clusters=cluster_configs(sim, tmp_path, [C]))
    admission = asyncio.create_task(admission_main(admission_bus, config, FAST))
    try:
        async with running_watcher(watcher_bus, sim, tmp_path, [C]):
            await wait_deciding(admission_bus, admission)
            job = await create(kube, job_doc("traced", runtime="1h", parallelism=1))
            wl_name = await workload_of_job(kube, job)

            async def unsuspended() -> bool:
                assert (await read_job(kube, "traced")).spec.suspend is False
                return True

            await eventually(unsuspended, timeout=30, what="the job admitted and unsuspended")
            wl = await read_typed(kube, "workload", "demo", wl_name)
            traceparent = wl.metadata.annotations[TRACEPARENT_ANNOTATION]

            def connected() -> list[ReadableSpan]:
                spans = list(exporter.get_finished_spans())
                (decide,) = [s for s in spans if s.name == "admission.decide Admitted"
                             and s.attributes is not None and s.attributes["kq.workload"] == f"demo/{wl_name}"]
                assert decide.context is not None and decide.parent is not None
                trace_id = decide.context.trace_id
                assert traceparent.split("-")[1] == format(trace_id, "032x")
                mine = [s for s in spans if s.context is not None and s.context.trace_id == trace_id]
                by_id = {s.context.span_id: s for s in mine if s.context is not None}
                # watcher: the reconcile that created the workload is the decision's parent, and the trace's root
                parent = by_id[decide.parent.span_id]
                assert parent.name == "watcher.reconcile job" and parent.parent is None
                # watcher again: the admit command's execution is the decision's child
                admit = [s for s in mine if s.name == "watcher.command AdmitWorkload"]
                assert admit and all(s.parent is not None and s.parent.span_id == decide.context.span_id
                                     for s in admit), admit
                # and the job's unsuspension afterwards joins the same trace
                assert sum(s.name == "watcher.reconcile job" for s in mine) >= 2, [s.name for s in mine]
                return mine

            mine = await eventually(connected, timeout=20, what="one connected trace for the job")
            names = {s.name for s in mine}
            # The admission's Events ride on the AdmitWorkload command (kq.messages.EventNote): no RecordEvent span.
            assert {"watcher.reconcile job", "admission.decide Admitted", "watcher.command AdmitWorkload"} <= names, names
    finally:
        admission.cancel()
        with suppress(asyncio.CancelledError, Exception):
            await admission
        await admission_bus.close()
        await watcher_bus.close()
        provider.shutdown()
