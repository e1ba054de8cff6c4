"""Trace context travels publish -> consume through NATS headers, hop after hop."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.wait import eventually

from kq import subjects
from kq.config import NatsConfig
from kq.obs import extract_context, inject_context
from kq.runtime import Bus, Delivery

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
async def traced_bus(bus: Bus, nats_config: NatsConfig, spans: InMemorySpanExporter):
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    b = await Bus.connect(nats_config, "traced", tracer_provider=provider)
    yield b
    await b.close()


def test_inject_extract_round_trip() -> None:
    provider = TracerProvider()
    with provider.get_tracer("t").start_as_current_span("x") as span:
        headers = inject_context({"Other": "kept"})
    assert headers["Other"] == "kept"
    assert headers["traceparent"].split("-")[1] == format(span.get_span_context().trace_id, "032x")
    ctx = trace.get_current_span(extract_context(headers)).get_span_context()
    assert (ctx.trace_id, ctx.span_id) == (span.get_span_context().trace_id, span.get_span_context().span_id)
    assert inject_context(None) == {}  # no active span: nothing to add
    assert not trace.get_current_span(extract_context({})).get_span_context().is_valid


async def test_trace_continues_across_two_hops(traced_bus: Bus, spans: InMemorySpanExporter) -> None:
    bus = traced_bus
    first = subjects.command_subject("c1", "workload")
    second = subjects.event_subject("c1", "workload", "ns", "w")
    seen: dict[str, trace.SpanContext] = {}

    async def hop1(d: Delivery) -> None:
        seen["hop1"] = trace.get_current_span().get_span_context()
        await bus.publish(second, b"caused", msg_id="caused-1")

    async def hop2(d: Delivery) -> None:
        seen["hop2"] = trace.get_current_span().get_span_context()

    tasks = [asyncio.create_task(bus.consume("hop1", subjects.COMMANDS_STREAM, first, hop1)),
             asyncio.create_task(bus.consume("hop2", subjects.EVENTS_STREAM, second, hop2))]
    try:
        with bus.tracer.start_as_current_span("decide") as root:
            await bus.publish(first, b"cmd", msg_id="cmd-1")
        await eventually(lambda: "hop2" in seen)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    trace_id = root.get_span_context().trace_id
    assert seen["hop1"].trace_id == trace_id == seen["hop2"].trace_id
    by_name = {s.name: s for s in spans.get_finished_spans()}
    hop1_span = by_name[f"consume {subjects.COMMANDS_STREAM}/hop1"]
    hop2_span = by_name[f"consume {subjects.EVENTS_STREAM}/hop2"]
    assert hop1_span.parent is not None and hop1_span.parent.span_id == root.get_span_context().span_id
    assert hop2_span.parent is not None and hop2_span.parent.span_id == hop1_span.context.span_id
    assert hop1_span.kind == trace.SpanKind.CONSUMER


async def test_batch_span_links_each_publisher(traced_bus: Bus, spans: InMemorySpanExporter) -> None:
    bus = traced_bus
    subject = subjects.command_subject("c1", "workload")
    roots = []
    for i in range(3):
        with bus.tracer.start_as_current_span(f"decide-{i}") as root:
            await bus.publish(subject, b"x", msg_id=f"m{i}")
        roots.append(root.get_span_context())
    handled: list[Delivery] = []

    async def handler_batch(ds: list[Delivery]) -> list[BaseException | None]:
        handled.extend(ds)
        return [None] * len(ds)

    task = asyncio.create_task(bus.consume_batches("b", subjects.COMMANDS_STREAM, subject, handler_batch))
    try:
        await eventually(lambda: len(handled) == 3)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    batch_spans = [s for s in spans.get_finished_spans() if s.name.startswith("consume-batch")]
    linked = sorted(link.context.span_id for s in batch_spans for link in s.links)
    assert linked == sorted(r.span_id for r in roots)


async def test_replay_records_no_span_per_message_but_handles_it_in_the_publishers_trace(
        traced_bus: Bus, spans: InMemorySpanExporter) -> None:
    """A service replays every record it follows, most of no interest to it: no span each (that cost
    as much as the handling); a decision its handler makes still joins the publisher's trace."""
    bus = traced_bus
    subject = subjects.event_subject("c1", "workload", "ns", "w")
    with bus.tracer.start_as_current_span("observe") as root:
        await bus.publish(subject, b"traced", msg_id="r-1")
    await bus.publish(subjects.event_subject("c1", "workload", "ns", "v"), b"plain", msg_id="r-2")
    seen: dict[bytes, trace.SpanContext] = {}

    async def handler(d: Delivery) -> None:
        seen[d.data] = trace.get_current_span().get_span_context()
        if d.data == b"traced":
            with bus.tracer.start_as_current_span("decide"):
                pass

    async with bus.replay(subjects.EVENTS_STREAM, subjects.event_filter("c1", "workload", "ns"), handler) as r:
        await r.wait_caught_up(timeout=10)
    assert (seen[b"traced"].trace_id, seen[b"traced"].span_id) == (root.get_span_context().trace_id,
                                                                    root.get_span_context().span_id)
    assert not seen[b"plain"].is_valid  # published outside any span: nothing to continue
    names = [s.name for s in spans.get_finished_spans()]
    assert not [n for n in names if n.startswith("replay")], names
    (decide,) = [s for s in spans.get_finished_spans() if s.name == "decide"]
    assert decide.parent is not None and decide.parent.span_id == root.get_span_context().span_id


async def test_without_a_recording_tracer_consume_passes_the_context_through_without_a_span(bus: Bus) -> None:
    subject = subjects.command_subject("c1", "workload")
    provider = TracerProvider()
    with provider.get_tracer("t").start_as_current_span("decide") as root:
        await bus.publish(subject, b"x", msg_id="u-1")
    seen: list[trace.SpanContext] = []

    async def handler(d: Delivery) -> None:
        seen.append(trace.get_current_span().get_span_context())

    task = asyncio.create_task(bus.consume("u", subjects.COMMANDS_STREAM, subject, handler))
    try:
        await eventually(lambda: len(seen) == 1)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert (seen[0].trace_id, seen[0].span_id) == (root.get_span_context().trace_id, root.get_span_context().span_id)
