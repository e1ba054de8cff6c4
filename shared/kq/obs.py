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
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import structlog
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Span, SpanKind, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from kq.config import Config

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
_PROPAGATOR = TraceContextTextMapPropagator()


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


def _otlp_exporter() -> SpanExporter:
    # The OTLP exporters are optional installs, absent from kq's own dependencies.
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found]  # optional
            OTLPSpanExporter,
        )
    except ImportError:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]  # optional
                OTLPSpanExporter,
            )
        except ImportError:
            raise ObservabilityError(
                "otelExporter: 'otlp' needs the opentelemetry-exporter-otlp package, which is not installed"
            ) from None
    return OTLPSpanExporter()  # endpoint from the standard OTEL_EXPORTER_OTLP_* variables


def make_tracer_provider(
    service: str, instance: str, exporter: str = "none", *, span_exporter: SpanExporter | None = None
) -> TracerProvider:
    """A provider for one process; `span_exporter` overrides the configured one (tests)."""
    provider = TracerProvider(resource=Resource.create({"service.name": service, "service.instance.id": instance}))
    if span_exporter is None:
        if exporter == "none":
            pass
        elif exporter == "console":
            span_exporter = ConsoleSpanExporter(out=sys.stderr)
        elif exporter == "otlp":
            span_exporter = _otlp_exporter()
        else:
            raise ObservabilityError(f"otelExporter: {exporter!r} is not one of none, console, otlp")
    if span_exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(span_exporter))
    return provider


class Observability:
    """What a process set up: its tracer provider (the logging config is process-wide)."""

    def __init__(self, service: str, instance: str, tracer_provider: TracerProvider) -> None:
        self.service = service
        self.instance = instance
        self.tracer_provider = tracer_provider

    @property
    def tracer(self) -> Tracer:
        return self.tracer_provider.get_tracer("kq")

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()


def setup_observability(service: str, config: Config) -> Observability:
    configure_logging(service, config.instance, config.log_level, config.log_dir)
    provider = make_tracer_provider(service, config.instance, config.otel_exporter)
    return Observability(service, config.instance, provider)


# -- trace context in NATS headers -------------------------------------------------------------


def inject_context(headers: dict[str, str] | None = None, context: Context | None = None) -> dict[str, str]:
    """Add the current (or given) trace context to `headers` as W3C traceparent; returns them."""
    if headers is None:
        headers = {}
    _PROPAGATOR.inject(headers, context=context)
    return headers


def extract_context(headers: Mapping[str, str] | None) -> Context:
    """The publisher's trace context from NATS headers (an empty context when absent)."""
    return _PROPAGATOR.extract(headers or {})


@contextmanager
def consumer_span(
    tracer: Tracer, name: str, headers: Mapping[str, str] | None, attributes: Mapping[str, Any] | None = None
) -> Iterator[Span]:
    """A span for handling one message, continuing the publisher's trace."""
    with tracer.start_as_current_span(
        name, context=extract_context(headers), kind=SpanKind.CONSUMER, attributes=attributes
    ) as span:
        yield span
