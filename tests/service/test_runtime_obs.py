"""Logging and tracing setup: JSON lines with service/instance/level (and trace ids), clear errors."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from kq.obs import ObservabilityError, configure_logging, get_logger, make_tracer_provider

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_json_log_lines_to_file_with_service_fields_and_trace_ids(tmp_path: Path, restore_logging: None) -> None:
    configure_logging("admission", "a-1", "info", str(tmp_path))
    log = get_logger("kq.test", cohort="root")
    log.debug("hidden at info")
    log.info("plain", n=1)
    with make_tracer_provider("admission", "a-1").get_tracer("t").start_as_current_span("s") as span:
        log.warning("in span")
    logging.getLogger("nats.aio.client").error("library says %s", "hi")
    lines = read_lines(tmp_path / "admission-a-1.log")
    assert [(ln["event"], ln["level"]) for ln in lines] == [("plain", "info"), ("in span", "warning"),
                                                           ("library says hi", "error")]
    assert all(ln["service"] == "admission" and ln["instance"] == "a-1" and "timestamp" in ln for ln in lines)
    assert lines[0]["n"] == 1 and lines[0]["cohort"] == "root" and "trace_id" not in lines[0]
    assert lines[1]["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert lines[2]["logger"] == "nats.aio.client"


@pytest.mark.parametrize(
    "call,needle",
    [
        pytest.param(lambda: configure_logging("s", "0", "loud"), "logLevel", id="level"),
        pytest.param(lambda: make_tracer_provider("s", "0", "jaeger"), "otelExporter", id="exporter"),
    ],
)
def test_bad_settings_name_the_field(call, needle: str, restore_logging: None) -> None:
    with pytest.raises(ObservabilityError, match=needle):
        call()


def test_otlp_is_installed_and_takes_the_configured_endpoint() -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = make_tracer_provider("s", "0", "otlp", endpoint="http://collector.example:4318/")
    try:
        processors = provider._active_span_processor._span_processors  # the SDK keeps them there
        (exporter,) = [p.span_exporter for p in processors]  # type: ignore[attr-defined]  # BatchSpanProcessor's
        assert isinstance(exporter, OTLPSpanExporter)
        assert exporter._endpoint == "http://collector.example:4318/v1/traces"
    finally:
        provider.shutdown()


def test_provider_names_the_service() -> None:
    provider = make_tracer_provider("tas", "t-2", "console")
    attrs = provider.resource.attributes
    assert (attrs["service.name"], attrs["service.instance.id"]) == ("tas", "t-2")
    provider.shutdown()


def test_the_standard_otel_variables_win_over_kqs_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from kq.obs import service_resource

    plain = service_resource("admission", "i0").attributes
    assert (plain["service.name"], plain["service.instance.id"]) == ("admission", "i0")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "kq-admission-prod")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod,service.instance.id=pod-7")
    named = service_resource("admission", "i0").attributes
    assert (named["service.name"], named["service.instance.id"], named["deployment.environment"]) == (
        "kq-admission-prod", "pod-7", "prod")
