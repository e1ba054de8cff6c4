"""otelExporter none: no span is recorded, but trace context still flows (kq.obs.UnrecordedTracer)."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

from kq.config import Config
from kq.obs import UnrecordedTracerProvider, extract_context, inject_context, make_service_tracer_provider

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_without_an_exporter_the_parent_passes_through_and_a_root_gets_fresh_ids() -> None:
    provider = make_service_tracer_provider("watcher", "0", Config().otel_exporter)
    assert isinstance(provider, UnrecordedTracerProvider)
    tracer = provider.get_tracer("kq")
    with tracer.start_as_current_span("child", context=extract_context({"traceparent": PARENT})) as span:
        assert not span.is_recording()
        assert inject_context({}) == {"traceparent": PARENT}
    with tracer.start_as_current_span("root") as a, tracer.start_as_current_span("inner") as b:
        assert a.get_span_context().is_valid
        assert b.get_span_context().trace_id == a.get_span_context().trace_id


def test_with_an_exporter_spans_are_the_sdks() -> None:
    provider = make_service_tracer_provider("watcher", "0", "console")
    assert isinstance(provider, TracerProvider)
    provider.shutdown()


def test_a_message_without_trace_context_parses_nothing() -> None:
    assert extract_context({"Nats-Msg-Id": "x"}) == extract_context(None) == {}
