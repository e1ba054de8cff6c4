"""Kueue's Workload status transitions: conditions, eviction accounting, releasing quota."""

from __future__ import annotations

from typing import Literal

import pytest
from msgspec.structs import replace
from unit.watcher.watcher_builders import EARLIER, NOW, admission, admitted, evicted, plain_workload

from kq.api import constants as k
from kq.api.kueue import AdmissionCheckState, SchedulingStats, WorkloadSchedulingStatsEviction
from kq.api.meta import Condition, find_condition
from services.watcher.core import workload_status as ws


def _c(
    status: Literal["True", "False", "Unknown"], reason: str = "R", message: str = "m", ltt: str | None = EARLIER
) -> Condition:
    return Condition(type="T", status=status, reason=reason, message=message, last_transition_time=ltt)


@pytest.mark.parametrize(
    "existing,new,want",
    [
        pytest.param((), _c("True", ltt=None), (_c("True", ltt=NOW),), id="absent-appended-with-now"),
        pytest.param((_c("True"),), _c("True", reason="R2", ltt=None), (_c("True", reason="R2", ltt=EARLIER),),
                     id="same-status-keeps-transition-time"),
        pytest.param((_c("True"),), _c("False", ltt=None), (_c("False", ltt=NOW),), id="status-flip-moves-time"),
        pytest.param((_c("True"),), _c("True", ltt=None), (_c("True"),), id="identical-unchanged"),
    ],
)
def test_set_condition(existing: tuple, new: Condition, want: tuple) -> None:
    assert ws.set_condition(existing, new, NOW) == want


def test_quota_reservation_resets_active_eviction_and_admits() -> None:
    wl = evicted(admitted(plain_workload()))
    wl = ws.finish_eviction(wl, EARLIER)
    again = ws.set_quota_reservation(wl, admission("cq2"), NOW, admitted=True)
    conds = again.status.conditions
    assert find_condition(conds, k.WORKLOAD_QUOTA_RESERVED).status == "True"  # type: ignore[union-attr]  # absent fails the test too
    assert find_condition(conds, k.WORKLOAD_ADMITTED).status == "True"  # type: ignore[union-attr]  # absent fails the test too
    ev = find_condition(conds, k.WORKLOAD_EVICTED)
    assert ev is not None and ev.status == "False" and ev.reason == "QuotaReserved"
    assert ev.message == "Previously: preempted by ns/high"
    pre = find_condition(conds, k.WORKLOAD_PREEMPTED)
    assert pre is not None and pre.status == "False"
    assert again.status.admission == admission("cq2")


@pytest.mark.parametrize(
    "reason,want_reason,want_cause",
    [
        pytest.param(k.EVICTED_BY_PREEMPTION, "Preempted", "", id="preempted"),
        pytest.param("DeactivatedDueToRequeuingLimitExceeded", "Deactivated", "RequeuingLimitExceeded",
                     id="deactivated-with-cause"),
    ],
)
def test_evict_counts_per_reason(reason: str, want_reason: str, want_cause: str) -> None:
    wl = admitted(plain_workload())
    wl = replace(wl, status=replace(wl.status, scheduling_stats=SchedulingStats(evictions=(
        WorkloadSchedulingStatsEviction(reason="Preempted", count=2),))))
    out = ws.evict(wl, reason, "msg", NOW)
    counts = {(e.reason, e.underlying_cause): e.count for e in out.status.scheduling_stats.evictions}  # type: ignore[union-attr]  # absent fails the test too
    base = {("Preempted", ""): 2}
    base[(want_reason, want_cause)] = base.get((want_reason, want_cause), 0) + 1
    assert counts == base
    assert find_condition(out.status.conditions, k.WORKLOAD_EVICTED) == Condition(
        type=k.WORKLOAD_EVICTED, status="True", reason=reason, message="msg", last_transition_time=NOW, observed_generation=1)
    assert out.status.admission == wl.status.admission  # quota kept until the job stops


def test_evict_resets_admission_checks_and_nomination() -> None:
    wl = admitted(plain_workload())
    wl = replace(wl, status=replace(wl.status, cluster_name="worker-1", nominated_cluster_names=("worker-1",),
                                    admission_checks=(AdmissionCheckState(name="ac", state="Ready"),
                                                      AdmissionCheckState(name="r", state="Retry", retry_count=1))))
    out = ws.evict(wl, k.EVICTED_BY_ADMISSION_CHECK, "m", NOW)
    assert out.status.cluster_name is None and out.status.nominated_cluster_names == ()
    assert [(c.name, c.state, c.retry_count, c.message) for c in out.status.admission_checks] == [
        ("ac", "Pending", None, "Reset to Pending after eviction. Previously: Ready"),
        ("r", "Pending", 2, "Reset to Pending after eviction. Previously: Retry"),
    ]


@pytest.mark.parametrize(
    "reason,requeued",
    [
        pytest.param(k.EVICTED_BY_PREEMPTION, "True", id="preempted-requeued"),
        pytest.param(k.EVICTED_DUE_TO_NODE_FAILURES, "True", id="node-failures-requeued"),
        pytest.param(k.EVICTED_BY_PODS_READY_TIMEOUT, "False", id="pods-ready-timeout-waits-backoff"),
    ],
)
def test_finish_eviction_releases_quota(reason: str, requeued: str) -> None:
    wl = ws.evict(admitted(plain_workload()), reason, "why", EARLIER)
    out = ws.finish_eviction(wl, NOW)
    conds = out.status.conditions
    assert out.status.admission is None
    qr = find_condition(conds, k.WORKLOAD_QUOTA_RESERVED)
    assert qr is not None and (qr.status, qr.reason, qr.message) == ("False", k.REASON_PENDING_EVALUATION, "why")
    adm = find_condition(conds, k.WORKLOAD_ADMITTED)
    assert adm is not None and (adm.status, adm.reason) == ("False", k.REASON_NO_RESERVATION)
    rq = find_condition(conds, k.WORKLOAD_REQUEUED)
    assert rq is not None and (rq.status, rq.reason) == (requeued, reason)


def test_finish_is_idempotent() -> None:
    wl = ws.finish(admitted(plain_workload()), k.FINISHED_SUCCEEDED, "ok", EARLIER)
    assert ws.finish(wl, k.FINISHED_FAILED, "later", NOW) is wl


@pytest.mark.parametrize("past, want", [pytest.param(None, 10, id="first"), pytest.param(5, 15, id="adds-up")])
def test_releasing_an_admitted_workload_accumulates_its_execution_time(past: int | None, want: int) -> None:
    wl = admitted(plain_workload())  # Admitted since EARLIER, released at NOW: 10 s
    wl = replace(wl, status=replace(wl.status, accumulated_past_execution_time_seconds=past))
    out = ws.finish_eviction(ws.evict(wl, k.EVICTED_BY_PREEMPTION, "why", EARLIER), NOW)
    assert out.status.accumulated_past_execution_time_seconds == want


def test_releasing_a_reservation_that_was_never_admitted_adds_nothing() -> None:
    wl = ws.set_quota_reservation(plain_workload(), admission(), EARLIER, admitted=False)
    out = ws.finish_eviction(ws.evict(wl, k.EVICTED_BY_PREEMPTION, "why", EARLIER), NOW)
    assert out.status.accumulated_past_execution_time_seconds is None
