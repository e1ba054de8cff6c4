"""kq.obs.consumer_span without an exporter: the publisher's trace continues, a message without one
gets a fresh root, and the context before the block comes back after it."""

from __future__ import annotations

from opentelemetry import trace

from kq.obs import UnrecordedTracerProvider, consumer_span, headers_for


def _current() -> trace.SpanContext:
    return trace.get_current_span().get_span_context()


def test_a_message_without_a_trace_gets_a_fresh_root_and_the_context_comes_back() -> None:
    tracer = UnrecordedTracerProvider().get_tracer("t")
    before = _current()
    with consumer_span(tracer, "a", None) as a:
        first = _current()
        assert first.is_valid and a.get_span_context() == first
    assert _current() == before
    with consumer_span(tracer, "b", {"other": "header"}):
        second = _current()
    assert second.is_valid and second.trace_id != first.trace_id
    assert _current() == before


def test_a_message_with_a_trace_continues_it() -> None:
    tracer = UnrecordedTracerProvider().get_tracer("t")
    with consumer_span(tracer, "root", None) as root:
        headers = headers_for(root)
    with consumer_span(tracer, "child", headers):
        assert _current().trace_id == root.get_span_context().trace_id
    assert not _current().is_valid
