"""The pods-ready core: deadlines, evictions with their requeue state, deactivation, backoff end."""

from __future__ import annotations

from typing import Any

import pytest

from services.podsready.core.model import (
    Deactivate,
    Evict,
    FinishBackoff,
    Key,
    PodsReadyConfig,
    RequeueStateOut,
    Timer,
    WorkloadView,
)
from services.podsready.core.timing import (
    backoff_seconds,
    format_time,
    jitter_fraction,
    next_timer,
    on_due,
)
from services.podsready.core.tracker import Tracker

T0 = 1_800_000_000.0  # admission time of the table's workloads
K = Key("manager", "ns", "w1")
CFG = PodsReadyConfig(timeout_s=4.0, recovery_timeout_s=2.0, backoff_base_s=1, backoff_max_s=3600, jitter=0.0)


def view(**kw: Any) -> WorkloadView:
    base: dict[str, Any] = dict(key=K, uid="u1", resource_version="1", quota_reserved=True, admitted=True, admitted_at=T0,
                admitted_at_text=format_time(T0), pods_ready_status="False", pods_ready_reason="WaitForStart",
                pods_ready_at=T0)
    base.update(kw)
    return WorkloadView(**base)


@pytest.mark.parametrize(
    "v, cfg, want",
    [
        pytest.param(view(), CFG, Timer(key=K, at=T0 + 4, purpose="WaitForStart"), id="waits-to-start-from-admission"),
        pytest.param(view(pods_ready_status=None, pods_ready_reason=""), CFG,
                     Timer(key=K, at=T0 + 4, purpose="WaitForStart"), id="no-condition-yet-is-waiting-to-start"),
        pytest.param(view(pods_ready_reason="PodsReady"), CFG, Timer(key=K, at=T0 + 4, purpose="WaitForStart"),
                     id="legacy-reason"),
        pytest.param(view(pods_ready_status="True", pods_ready_reason="Started"), CFG, None, id="ready-no-timer"),
        pytest.param(view(pods_ready_reason="WaitForRecovery", pods_ready_at=T0 + 10), CFG,
                     Timer(key=K, at=T0 + 12, purpose="WaitForRecovery"), id="recovery-from-last-transition"),
        pytest.param(view(pods_ready_reason="WaitForRecovery", pods_ready_at=T0 + 10),
                     PodsReadyConfig(timeout_s=4.0, recovery_timeout_s=None), None, id="recovery-timeout-off"),
        pytest.param(view(admitted=False, admitted_at=None), CFG, None, id="not-admitted"),
        pytest.param(view(evicted=True), CFG, None, id="already-evicted"),
        pytest.param(view(active=False), CFG, None, id="deactivated"),
        pytest.param(view(finished=True), CFG, None, id="finished"),
        pytest.param(view(deleting=True), CFG, None, id="being-deleted"),
        pytest.param(view(admitted=False, quota_reserved=False, evicted=True, requeued_status="False",
                          requeued_reason="PodsReadyTimeout", requeue_count=1, requeue_at=T0 + 9,
                          requeue_at_text=format_time(T0 + 9)), CFG,
                     Timer(key=K, at=T0 + 9, purpose="Backoff"), id="backoff-until-requeueAt"),
        pytest.param(view(admitted=False, evicted=True, requeued_status="False", requeued_reason="PodsReadyTimeout",
                          requeue_at=T0 + 9), CFG, None, id="backoff-waits-for-the-quota-release"),
        pytest.param(view(admitted=False, quota_reserved=False, requeued_status="False", requeued_reason="Preempted"),
                     CFG, None, id="other-eviction-no-backoff"),
    ],
)
def test_next_timer(v: WorkloadView, cfg: PodsReadyConfig, want: Timer | None) -> None:
    assert next_timer(v, cfg) == want


@pytest.mark.parametrize(
    "count, base, cap, want",
    [
        pytest.param(1, 1, 3600, 1.0, id="first"),
        pytest.param(2, 1, 3600, 2.0, id="second-doubles"),
        pytest.param(5, 1, 3600, 16.0, id="fifth"),
        pytest.param(5, 10, 60, 60.0, id="capped"),
        pytest.param(1, 100, 60, 100.0, id="first-step-is-not-capped-as-in-kueue"),
        pytest.param(3, 60, 0, 240.0, id="zero-cap-means-no-cap"),
        pytest.param(200, 1, 3600, 3600.0, id="huge-count"),
        pytest.param(3, 0, 3600, 0.0, id="zero-base"),
    ],
)
def test_backoff_growth_and_cap(count: int, base: int, cap: int, want: float) -> None:
    cfg = PodsReadyConfig(timeout_s=1, recovery_timeout_s=None, backoff_base_s=base, backoff_max_s=cap, jitter=0.0)
    assert backoff_seconds(cfg, count, "u") == want


def test_jitter_is_deterministic_and_small() -> None:
    cfg = PodsReadyConfig(timeout_s=1, recovery_timeout_s=None, backoff_base_s=60)
    a, b = backoff_seconds(cfg, 1, "uid-a"), backoff_seconds(cfg, 1, "uid-a")
    assert a == b and 60.0 <= a < 60.006
    assert jitter_fraction("uid-a", 1) != jitter_fraction("uid-a", 2) != jitter_fraction("uid-b", 1)
    assert all(0 <= jitter_fraction(f"u{i}", i) < 1 for i in range(100))


def test_timeout_evicts_with_next_requeue_state() -> None:
    v = view(requeue_count=1)
    d = on_due(v, Timer(key=K, at=T0 + 4, purpose="WaitForStart"), CFG, now=T0 + 4.2)
    assert d == Evict(id=f"evict:u1:{format_time(T0)}:2", key=K, uid="u1", cause="WaitForStart",
                      message="Exceeded the PodsReady timeout ns/w1",
                      requeue_state=RequeueStateOut(count=2, requeue_at=format_time(T0 + 6.2)))


def test_limit_exceeded_deactivates() -> None:
    cfg = PodsReadyConfig(timeout_s=4.0, recovery_timeout_s=None, backoff_limit_count=2)
    at = Timer(key=K, at=T0 + 4, purpose="WaitForStart")
    assert isinstance(on_due(view(requeue_count=1), at, cfg, T0 + 5), Evict)
    d = on_due(view(requeue_count=2), at, cfg, T0 + 5)
    assert d == Deactivate(id=f"deactivate:u1:{format_time(T0)}", key=K, uid="u1",
                           reason="DeactivatedDueToRequeuingLimitExceeded",
                           message="The workload is deactivated due to exceeding the maximum number of re-queuing retries")
    zero = PodsReadyConfig(timeout_s=4.0, recovery_timeout_s=None, backoff_limit_count=0)
    assert isinstance(on_due(view(), at, zero, T0 + 5), Deactivate)


def test_backoff_end() -> None:
    v = view(admitted=False, quota_reserved=False, evicted=True, requeued_status="False",
             requeued_reason="PodsReadyTimeout", requeue_count=1, requeue_at=T0 + 9, requeue_at_text="X")
    d = on_due(v, Timer(key=K, at=T0 + 9, purpose="Backoff"), CFG, T0 + 9)
    assert d == FinishBackoff(id="backoff:u1:1:X", key=K, uid="u1", requeue_at="X")


# --- the tracker: timers set, moved, cancelled; decisions once ---------------------------------------


def test_tracker_sets_then_fires_once() -> None:
    t = Tracker(CFG)
    c = t.observe(view(), now=T0 + 1)
    assert c.timers == [Timer(key=K, at=T0 + 4, purpose="WaitForStart")] and not c.decisions
    assert t.observe(view(), now=T0 + 2).empty()  # same state: nothing new
    early = t.due(K, now=T0 + 3)
    assert not early.decisions and early.timers == c.timers  # fired early: decide nothing, wait again
    fired = t.due(K, now=T0 + 4.01)
    assert [type(d) for d in fired.decisions] == [Evict] and not fired.cancelled and K not in t.timers
    assert t.due(K, now=T0 + 4.5).empty()  # the bus timer firing too: already issued


def test_tracker_ready_cancels() -> None:
    t = Tracker(CFG)
    t.observe(view(), now=T0)
    c = t.observe(view(resource_version="2", pods_ready_status="True", pods_ready_reason="Started"), now=T0 + 1)
    assert c.cancelled == [K] and not c.timers and not c.decisions
    assert t.due(K, T0 + 5).empty()


def test_tracker_forget_stops_timer() -> None:
    t = Tracker(CFG)
    t.observe(view(), now=T0)
    assert t.forget(K).cancelled == [K]
    assert t.due(K, T0 + 5).empty() and len(t) == 0


def test_tracker_recovery_moves_timer() -> None:
    t = Tracker(CFG)
    t.observe(view(pods_ready_status="True", pods_ready_reason="Started"), now=T0 + 1)
    c = t.observe(view(resource_version="3", pods_ready_reason="WaitForRecovery", pods_ready_at=T0 + 5), now=T0 + 5)
    assert c.timers == [Timer(key=K, at=T0 + 7, purpose="WaitForRecovery")]
    c = t.observe(view(resource_version="4", pods_ready_status="True", pods_ready_reason="Recovered"), now=T0 + 6)
    assert c.cancelled == [K]


def test_tracker_overdue_after_rebuild_decides_at_once() -> None:
    t = Tracker(CFG)
    c = t.observe(view(), now=T0 + 10)
    assert len(c.decisions) == 1 and not c.timers


def test_tracker_new_incarnation_decides_again() -> None:
    t = Tracker(CFG)
    assert t.observe(view(), now=T0 + 10).decisions
    assert t.observe(view(uid="u2", resource_version="9"), now=T0 + 10).decisions


def test_tracker_replay_is_deterministic() -> None:
    events = [(view(), T0), (view(resource_version="2"), T0 + 1), (view(resource_version="3"), T0 + 5)]

    def run() -> list:
        t = Tracker(CFG)
        return [t.observe(v, now) for v, now in events]

    assert run() == run()


def test_due_until_decides_every_deadline_passed_in_time_order() -> None:
    t = Tracker(CFG)
    keys = [Key("manager", "ns", f"w{i}") for i in range(4)]
    for i, k in enumerate(keys):  # deadlines T0+4 .. T0+7
        t.observe(view(key=k, uid=f"u{i}", admitted_at=T0 + i, admitted_at_text=format_time(T0 + i)), now=T0)
    t.observe(view(key=keys[1], uid="u1", resource_version="2", pods_ready_status="True", pods_ready_reason="Started",
                   admitted_at=T0 + 1, admitted_at_text=format_time(T0 + 1)), now=T0 + 1)  # w1 ready: no deadline
    assert t.next_at() == T0 + 4
    out = t.due_until(T0 + 6.1)
    assert [d.key.name for d in out.decisions] == ["w0", "w2"]
    assert t.next_at() == T0 + 7 and t.due_until(T0 + 6.5).empty()
