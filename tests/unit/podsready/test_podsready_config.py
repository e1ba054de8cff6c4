"""waitForPodsReady configuration: Kueue's names, bad values refused naming the field, and what
the core gets; the shell's mapping of decisions to commands and bus timers."""

from __future__ import annotations

import pytest

from kq.config import ConfigError, WaitForPodsReady, parse_config
from kq.messages import DeactivateWorkload, EvictWorkload, FinishRequeueBackoff, command_decoder, encoder
from services.podsready import outputs
from services.podsready.core.model import Deactivate, Evict, FinishBackoff, Key, RequeueStateOut
from services.podsready.service import core_config, enabled


@pytest.mark.parametrize(
    "text, field",
    [
        pytest.param("{timeout: -1s}", "waitForPodsReady.timeout", id="negative-timeout"),
        pytest.param("{timeout: soon}", "waitForPodsReady.timeout", id="unparsable-timeout"),
        pytest.param("{timeout: 2s, recoveryTimeout: -5s}", "waitForPodsReady.recoveryTimeout", id="negative-recovery"),
        pytest.param("{timeout: 2s, recoveryTimeout: 1x}", "waitForPodsReady.recoveryTimeout", id="unparsable-recovery"),
        pytest.param("{requeuingStrategy: {backoffBaseSeconds: -1}}", "backoffBaseSeconds", id="negative-base"),
        pytest.param("{requeuingStrategy: {backoffMaxSeconds: -1}}", "backoffMaxSeconds", id="negative-max"),
        pytest.param("{requeuingStrategy: {backoffLimitCount: -2}}", "backoffLimitCount", id="negative-limit"),
        pytest.param("{requeuingStrategy: {timestamp: Admission}}", "timestamp", id="bad-timestamp"),
        pytest.param("{timeOut: 2s}", "timeOut", id="unknown-field"),
    ],
)
def test_bad_configuration_is_refused_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(f"kueue: {{waitForPodsReady: {text}}}")
    assert field in str(e.value)


def _wfpr(text: str) -> WaitForPodsReady:
    cfg = parse_config(f"kueue: {{waitForPodsReady: {text}}}").kueue.wait_for_pods_ready
    assert cfg is not None
    return cfg


@pytest.mark.parametrize(
    "text, timeout, recovery, base, cap, limit",
    [
        pytest.param("{timeout: 2s}", 2.0, 2.0, 60, 3600, None, id="recovery-defaults-to-timeout"),
        pytest.param("{timeout: 2s, recoveryTimeout: 0s}", 2.0, None, 60, 3600, None, id="recovery-off"),
        pytest.param("{timeout: 1m30s, recoveryTimeout: 500ms, requeuingStrategy: {backoffBaseSeconds: 1, "
                     "backoffMaxSeconds: 8, backoffLimitCount: 3}}", 90.0, 0.5, 1, 8, 3, id="everything"),
    ],
)
def test_core_config(text: str, timeout: float, recovery: float | None, base: int, cap: int, limit: int | None) -> None:
    c = core_config(_wfpr(text))
    assert (c.timeout_s, c.recovery_timeout_s, c.backoff_base_s, c.backoff_max_s, c.backoff_limit_count) == (
        timeout, recovery, base, cap, limit)


def test_enabled_by_presence_or_v1beta1_enable() -> None:
    assert enabled(_wfpr("{timeout: 2s}"))
    assert enabled(_wfpr("{enable: true}"))
    assert not enabled(_wfpr("{enable: false}"))
    assert not enabled(None)


K = Key("c1", "ns", "w1")


@pytest.mark.parametrize(
    "decision, kind",
    [
        pytest.param(Evict(id="evict:u:t:1", key=K, uid="u", cause="WaitForStart", message="m",
                           requeue_state=RequeueStateOut(count=1, requeue_at="2026-01-01T00:00:01Z")),
                     EvictWorkload, id="evict"),
        pytest.param(Deactivate(id="deactivate:u:t", key=K, uid="u", reason="DeactivatedDueToRequeuingLimitExceeded",
                                message="m"), DeactivateWorkload, id="deactivate"),
        pytest.param(FinishBackoff(id="backoff:u:1:t", key=K, uid="u", requeue_at="t"), FinishRequeueBackoff,
                     id="finish-backoff"),
    ],
)
def test_decisions_become_typed_commands(decision, kind) -> None:
    out = outputs.command(decision, epoch=7)
    cmd = command_decoder.decode(encoder.encode(out.payload))
    assert isinstance(cmd, kind) and cmd.epoch == 7 and cmd.writer == "podsready" and cmd.uid == "u"
    assert out.subject == "kq.v1.cmd.c1.workload.podsready" and out.msg_id == f"podsready|e7|c1|{decision.id}"
    if isinstance(cmd, EvictWorkload):
        assert cmd.reason == "PodsReadyTimeout" and cmd.requeue_state is not None and cmd.requeue_state.count == 1


@pytest.mark.parametrize(
    "at, want",
    [(10.0, 10.0), (10.01, 10.25), (10.25, 10.25), (10.26, 10.5), (10.999, 11.0)],
)
def test_bus_timer_buckets(at: float, want: float) -> None:
    assert outputs.bucket_of(at, 0.25) == pytest.approx(want)


def test_bus_timer_is_a_message_schedule() -> None:
    out = outputs.schedule(1_800_000_000.25)
    assert out.headers is not None and out.headers["Nats-Schedule"] == "@at 2027-01-15T08:00:00.250Z"
    assert out.headers["Nats-Schedule-Target"] == "kq.v1.timer.fire.podsready.1800000000250"
    assert out.subject == "kq.v1.timer.sched.podsready.1800000000250"
