"""Logging and tracing for every kq process, set up once by the service runtime.

Logs: structlog, one JSON object per line with service, instance, level, timestamp
(and trace_id/span_id inside a span), to stderr and, when config.log_dir is set, to
<log_dir>/<service>-<instance>.log. Records from stdlib logging (libraries) are
rendered the same way.

Traces: an OpenTelemetry TracerProvider with resource service.name; trace context
travels in NATS headers as W3C `traceparent`/`tracestate`. The bus injects it on
publish and continues it around each consumed message (kq.runtime), so service
code never touches it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import Token
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context, attach, detach
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, NoOpTracer, Span, SpanContext, SpanKind, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from kq.api.constants import TRACEPARENT_ANNOTATION
from kq.config import Config

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
_PROPAGATOR = TraceContextTextMapPropagator()
_EMPTY_CONTEXT = Context()


class ObservabilityError(ValueError):
    pass


# -- logging -------------------------------------------------------------------------------


class _TeeSink:
    """structlog logger that writes each rendered line to several files."""

    def __init__(self, files: list[IO[str]]) -> None:
        self._files = files

    def msg(self, message: str) -> None:
        for f in self._files:
            try:
                f.write(message + "\n")
                f.flush()
            except ValueError:  # closed at interpreter exit
                pass

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


def _static_fields(service: str, instance: str) -> structlog.types.Processor:
    def add(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        event.setdefault("service", service)
        event.setdefault("instance", instance)
        return event

    return add


def _add_trace_ids(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        event["trace_id"] = format(ctx.trace_id, "032x")
        event["span_id"] = format(ctx.span_id, "016x")
    return event


class _StdlibBridge(logging.Handler):
    """Send library records (nats, asyncio, ...) through structlog's pipeline."""

    def emit(self, record: logging.LogRecord) -> None:
        log = structlog.get_logger(record.name)
        level = record.levelname.lower()
        kw: dict[str, Any] = {"logger": record.name}
        if record.exc_info:
            kw["exc_info"] = record.exc_info
        getattr(log, level if level in _LEVELS or level == "critical" else "info")(record.getMessage(), **kw)


def log_file_path(log_dir: str, service: str, instance: str) -> Path:
    return Path(log_dir) / f"{service}-{instance}.log"


def configure_logging(service: str, instance: str, level: str = "info", log_dir: str | None = None) -> None:
    if level.lower() not in _LEVELS:
        raise ObservabilityError(f"logLevel: {level!r} is not one of {sorted(_LEVELS)}")
    files: list[IO[str]] = [sys.stderr]
    if log_dir:
        path = log_file_path(log_dir, service, instance)
        path.parent.mkdir(parents=True, exist_ok=True)
        files.append(open(path, "a", buffering=1, encoding="utf-8"))  # noqa: SIM115 - lives as long as the process
    sink = _TeeSink(files)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _static_fields(service, instance),
            _add_trace_ids,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level.lower()]),
        logger_factory=lambda *_args: sink,
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    for h in list(root.handlers):
        if isinstance(h, _StdlibBridge):
            root.removeHandler(h)
    root.addHandler(_StdlibBridge())
    root.setLevel(max(_LEVELS[level.lower()], logging.INFO))  # library debug noise stays out


def get_logger(name: str | None = None, **bound: Any) -> Any:
    log = structlog.get_logger(name) if name else structlog.get_logger()
    return log.bind(**bound) if bound else log


# -- tracing -------------------------------------------------------------------------------


def _otlp_exporter(endpoint: str | None) -> SpanExporter:
    """OTLP over HTTP/protobuf (a kq dependency). `endpoint` is the collector's base URL (traces go to
    <endpoint>/v1/traces); without it the standard OTEL_EXPORTER_OTLP_* variables decide."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if endpoint:
        return OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
    return OTLPSpanExporter()


def service_resource(service: str, instance: str) -> Resource:
    """service.name and service.instance.id, unless the standard OTEL_SERVICE_NAME /
    OTEL_RESOURCE_ATTRIBUTES set them (read by the SDK's detector)."""
    from_env = OTELResourceDetector().detect()
    return Resource.create({"service.name": service, "service.instance.id": instance}).merge(from_env)


def make_tracer_provider(
    service: str, instance: str, exporter: str = "none", *, span_exporter: SpanExporter | None = None,
    endpoint: str | None = None,
) -> TracerProvider:
    """A provider for one process; `span_exporter` overrides the configured one (tests)."""
    provider = TracerProvider(resource=service_resource(service, instance))
    if span_exporter is None:
        if exporter == "none":
            pass
        elif exporter == "console":
            span_exporter = ConsoleSpanExporter(out=sys.stderr)
        elif exporter == "otlp":
            span_exporter = _otlp_exporter(endpoint)
        else:
            raise ObservabilityError(f"otelExporter: {exporter!r} is not one of none, console, otlp")
    if span_exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(span_exporter))
    return provider


_IDS = RandomIdGenerator()


class UnrecordedTracer(NoOpTracer):
    """`otelExporter: none`: no span would ever be seen, so none is recorded (an SDK span costs about
    as much as handling a small message, and every message and decision had one). Trace context still
    flows: a message's or an object's parent passes through unchanged, and a root gets fresh ids, so
    log lines keep their trace_id and a Workload still gets its trace (one trace per workload)."""

    def start_span(self, name: str, context: Context | None = None, *args: Any, **kwargs: Any) -> Span:
        parent = trace.get_current_span(context).get_span_context()
        if parent.is_valid:
            return NonRecordingSpan(parent)
        return NonRecordingSpan(SpanContext(trace_id=_IDS.generate_trace_id(), span_id=_IDS.generate_span_id(),
                                            is_remote=False))


class UnrecordedTracerProvider(trace.TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> Tracer:
        return UnrecordedTracer()


def make_service_tracer_provider(service: str, instance: str, exporter: str = "none", *,
                                 endpoint: str | None = None) -> trace.TracerProvider:
    """A service process's provider: the SDK's when spans go somewhere, else spans are not recorded."""
    if exporter == "none":
        return UnrecordedTracerProvider()
    return make_tracer_provider(service, instance, exporter, endpoint=endpoint)


class Observability:
    """What a process set up: its tracer provider (the logging config is process-wide)."""

    def __init__(self, service: str, instance: str, tracer_provider: trace.TracerProvider) -> None:
        self.service = service
        self.instance = instance
        self.tracer_provider = tracer_provider

    @property
    def tracer(self) -> Tracer:
        return self.tracer_provider.get_tracer("kq")

    def shutdown(self) -> None:
        if isinstance(self.tracer_provider, TracerProvider):
            self.tracer_provider.shutdown()


def setup_observability(service: str, config: Config) -> Observability:
    configure_logging(service, config.instance, config.log_level, config.log_dir)
    provider = make_service_tracer_provider(service, config.instance, config.otel_exporter,
                                            endpoint=config.otel_endpoint)
    return Observability(service, config.instance, provider)


# -- trace context in NATS headers -------------------------------------------------------------


def inject_context(headers: dict[str, str] | None = None, context: Context | None = None) -> dict[str, str]:
    """Add the current (or given) trace context to `headers` as W3C traceparent; returns them."""
    if headers is None:
        headers = {}
    span_context = trace.get_current_span(context).get_span_context()
    if span_context == trace.INVALID_SPAN_CONTEXT:
        return headers
    # As the W3C propagator writes them, each traceparent formatted once (a batch's or a workload's
    # messages share one).
    headers["traceparent"] = _traceparent(span_context.trace_id, span_context.span_id, span_context.trace_flags)
    if span_context.trace_state:
        headers["tracestate"] = span_context.trace_state.to_header()
    return headers


@lru_cache(maxsize=1024)
def _traceparent(trace_id: int, span_id: int, flags: int) -> str:
    return f"00-{trace.format_trace_id(trace_id)}-{trace.format_span_id(span_id)}-{flags:02x}"


def extract_context(headers: Mapping[str, str] | None) -> Context:
    """The publisher's trace context from NATS headers (an empty context when absent)."""
    if not headers or "traceparent" not in headers:
        return _EMPTY_CONTEXT  # most messages (mirror records) carry none: skip the propagator's parse
    return _parsed(headers["traceparent"], headers.get("tracestate"))


@lru_cache(maxsize=8192)
def _parsed(traceparent: str, tracestate: str | None) -> Context:
    """A workload's messages share its trace context: parse each one once (a Context is immutable)."""
    carrier = {"traceparent": traceparent} if tracestate is None else {"traceparent": traceparent,
                                                                        "tracestate": tracestate}
    return _PROPAGATOR.extract(carrier)


def records_spans(tracer: Tracer) -> bool:
    """Whether spans from `tracer` go anywhere (not the no-op nor kq's UnrecordedTracer)."""
    return not isinstance(tracer, NoOpTracer)


def attach_message_context(headers: Mapping[str, str] | None) -> Token[Context] | None:
    """Make the publisher's trace context current without a span of its own (cheap: a message without
    a traceparent changes nothing and returns None); pass the token to detach_message_context."""
    if not headers or "traceparent" not in headers:
        return None
    return otel_context.attach(extract_context(headers))


def detach_message_context(token: Token[Context] | None) -> None:
    if token is not None:
        otel_context.detach(token)


@contextmanager
def current_span(tracer: Tracer, name: str, context: Context | None = None,
                 attributes: Mapping[str, Any] | None = None, kind: SpanKind = SpanKind.INTERNAL) -> Iterator[Span]:
    """tracer.start_as_current_span, minus the API's two nested context managers when nothing is
    recorded (per command they were ~3 % of the watcher's CPU, ~2 % in its Job reconciles)."""
    if isinstance(tracer, UnrecordedTracer):
        span = tracer.start_span(name, context=context)
        token = attach(trace.set_span_in_context(span))
        try:
            yield span
        finally:
            detach(token)
        return
    with tracer.start_as_current_span(name, context=context, kind=kind, attributes=attributes) as span:
        yield span


def consumer_span(
    tracer: Tracer, name: str, headers: Mapping[str, str] | None, attributes: Mapping[str, Any] | None = None
) -> AbstractContextManager[Span]:
    """A span for handling one message, continuing the publisher's trace."""
    if isinstance(tracer, UnrecordedTracer):
        context = extract_context(headers)
        if headers and "traceparent" in headers and trace.get_current_span(context).get_span_context().is_valid:
            # Unrecorded, the span would be the publisher's own span context (UnrecordedTracer): make
            # the parsed (cached) context current as it is (per command ~3 % of the watcher's CPU).
            return _Current(context)
        # No parent: a fresh root made current, as current_span would, without its two generator-based
        # context managers (queue status commands carry no trace: ~2 % of the watcher's CPU).
        return _Current(trace.set_span_in_context(tracer.start_span(name, context=context)))
    return _consumer_span(tracer, name, headers, attributes)


class _Current:
    """A context made current for a `with` block; its span is what the block sees."""

    __slots__ = ("_context", "_token")

    def __init__(self, context: Context) -> None:
        self._context = context

    def __enter__(self) -> Span:
        self._token = attach(self._context)
        return trace.get_current_span(self._context)

    def __exit__(self, *exc: object) -> None:
        detach(self._token)


@contextmanager
def _consumer_span(
    tracer: Tracer, name: str, headers: Mapping[str, str] | None, attributes: Mapping[str, Any] | None = None
) -> Iterator[Span]:
    with current_span(tracer, name, extract_context(headers), attributes, SpanKind.CONSUMER) as span:
        yield span


# -- one trace per workload: its context kept on the object ---------------------------------------

# The Workload carries the trace context of the Job observation that created it (annotation
# TRACEPARENT_ANNOTATION), so every later step (admission's decision, the watcher's writes) joins
# that trace, whichever process takes it.


def context_from_annotations(annotations: Mapping[str, str] | None) -> Context:
    """The trace context an object carries (an empty context when it carries none)."""
    tp = (annotations or {}).get(TRACEPARENT_ANNOTATION)
    return extract_context({"traceparent": tp} if tp else None)


def current_traceparent() -> str | None:
    return inject_context({}).get("traceparent")


def headers_for(span: Span) -> dict[str, str]:
    """NATS headers carrying `span` as the parent of whatever handles the message."""
    return inject_context({}, trace.set_span_in_context(span))
