"""waitForPodsReady in the watcher: the PodsReady condition from the Job's pods, the eviction's
requeue state, and the end of the requeue backoff (table-driven)."""

from __future__ import annotations

from typing import Literal, TypedDict

import pytest
from msgspec.structs import replace
from unit.watcher.watcher_builders import EARLIER, NOW, admitted, job, merge_apply, workload_for

from kq.api import constants as k
from kq.api.core import Job
from kq.api.kueue import Workload
from kq.api.meta import find_condition
from kq.api.workload import RequeueState
from kq.messages import EvictWorkload, FinishRequeueBackoff
from services.watcher.core import job_pods as jp
from services.watcher.core import workload_status as ws
from services.watcher.core.commands import plan_command
from services.watcher.core.jobs import reconcile_job
from services.watcher.core.writes import Refusal, Skip, Write


class _WorkloadFields(TypedDict):
    cluster: str
    writer: str
    namespace: str
    name: str
    uid: str


_W = _WorkloadFields(cluster="c", writer="podsready", namespace="ns", name="w1", uid="wl-uid")


def running(ready: int, succeeded: int = 0, parallelism: int = 2, completions: int | None = None) -> Job:
    j = job(suspend=False, parallelism=parallelism, completions=completions, active=parallelism)
    return replace(j, status=replace(j.status, ready=ready, succeeded=succeeded))


@pytest.mark.parametrize(
    "j, want",
    [
        pytest.param(running(2), True, id="all-ready"),
        pytest.param(running(1), False, id="one-missing"),
        pytest.param(running(1, succeeded=1), True, id="ready-plus-succeeded"),
        pytest.param(running(1, parallelism=4, completions=1), True, id="completions-below-parallelism"),
        pytest.param(replace(running(0), status=replace(running(0).status, ready=None)), False, id="ready-unset"),
    ],
)
def test_job_pods_ready(j: Job, want: bool) -> None:
    assert jp.pods_ready(j) is want


def _pods_ready(wl: Workload) -> tuple[str, str] | None:
    c = find_condition(wl.status.conditions, k.WORKLOAD_PODS_READY)
    return (c.status, c.reason) if c is not None else None


def _with_ready(wl: Workload, status: Literal["True", "False"], reason: str) -> Workload:
    return replace(wl, status=replace(wl.status, conditions=(
        *wl.status.conditions, ws._cond(wl, k.WORKLOAD_PODS_READY, status, reason, "m"))))


BASE = admitted(workload_for(job()))


@pytest.mark.parametrize(
    "wl, ready, want",
    [
        pytest.param(workload_for(job()), False, ("False", "WaitForStart"), id="not-admitted"),
        pytest.param(workload_for(job()), True, ("False", "WaitForStart"), id="not-admitted-even-if-ready"),
        pytest.param(BASE, False, ("False", "WaitForStart"), id="admitted-waiting"),
        pytest.param(BASE, True, ("True", "Started"), id="started"),
        pytest.param(_with_ready(BASE, "True", "Started"), False, ("False", "WaitForRecovery"), id="lost-readiness"),
        pytest.param(_with_ready(BASE, "False", "WaitForRecovery"), False, ("False", "WaitForRecovery"),
                     id="still-recovering"),
        pytest.param(_with_ready(BASE, "False", "WaitForRecovery"), True, ("True", "Recovered"), id="recovered"),
        pytest.param(_with_ready(BASE, "True", "Recovered"), False, ("False", "WaitForRecovery"), id="lost-again"),
        pytest.param(_with_ready(BASE, "False", "PodsReady"), False, ("False", "WaitForStart"), id="legacy-reason"),
    ],
)
def test_pods_ready_condition(wl: Workload, ready: bool, want: tuple[str, str]) -> None:
    assert _pods_ready(ws.sync_pods_ready(wl, ready, NOW)) == want


def test_pods_ready_unchanged_is_not_rewritten() -> None:
    wl = ws.sync_pods_ready(BASE, True, EARLIER)
    assert ws.sync_pods_ready(wl, True, NOW) is wl


def test_reconcile_writes_pods_ready_only_when_enabled() -> None:
    j = running(2)
    wl = admitted(workload_for(j))
    assert isinstance(reconcile_job(j, wl, {}, {}, NOW), Skip)
    step = reconcile_job(j, wl, {}, {}, NOW, wait_for_pods_ready=True)
    assert isinstance(step, Write) and step.subresource == "status"
    after = merge_apply(wl, step.patch)
    assert _pods_ready(after) == ("True", "Started")
    c = find_condition(after.status.conditions, k.WORKLOAD_PODS_READY)
    assert c is not None and c.last_transition_time == NOW and c.message == ws.PODS_READY_MESSAGE
    assert isinstance(reconcile_job(j, after, {}, {}, NOW, wait_for_pods_ready=True), Skip)


def test_evict_writes_the_requeue_state() -> None:
    wl = _with_ready(BASE, "False", "WaitForStart")
    rs = RequeueState(count=2, requeue_at="2026-01-01T00:00:14Z")
    cmd = EvictWorkload(id="e", reason="PodsReadyTimeout", message="Exceeded the PodsReady timeout ns/w1",
                        requeue_state=rs, underlying_cause="WaitForStart", **_W)
    wl = replace(wl, metadata=replace(wl.metadata, name="w1", uid="wl-uid"))
    plan = plan_command(cmd, wl, 0, NOW)
    assert isinstance(plan, Write)
    after = merge_apply(wl, plan.patch)
    assert after.status.requeue_state == rs
    ev = find_condition(after.status.conditions, k.WORKLOAD_EVICTED)
    assert ev is not None and (ev.status, ev.reason) == ("True", "PodsReadyTimeout")
    stats = after.status.scheduling_stats
    assert stats is not None and [(e.reason, e.underlying_cause, e.count) for e in stats.evictions] == [
        ("PodsReadyTimeout", "WaitForStart", 1)]


def _in_backoff(
    requeue_at: str | None, reason: str = "PodsReadyTimeout", status: Literal["True", "False"] = "False"
) -> Workload:
    wl = replace(workload_for(job()), metadata=replace(workload_for(job()).metadata, name="w1", uid="wl-uid"))
    wl = replace(wl, status=replace(wl.status, requeue_state=RequeueState(count=1, requeue_at=requeue_at),
                                    conditions=(ws._cond(wl, k.WORKLOAD_REQUEUED, status, reason, "x"),)))
    return wl


@pytest.mark.parametrize(
    "wl, requeue_at, want",
    [
        pytest.param(_in_backoff(EARLIER), EARLIER, "write", id="backoff-over"),
        pytest.param(_in_backoff("2026-01-01T00:01:00Z"), "2026-01-01T00:01:00Z", "BackoffNotOver", id="too-early"),
        pytest.param(_in_backoff(EARLIER), "2025-01-01T00:00:00Z", "NotInBackoff", id="another-backoff"),
        pytest.param(_in_backoff(EARLIER, reason="Preempted"), EARLIER, "NotWaiting", id="not-ours"),
        pytest.param(_in_backoff(EARLIER, status="True"), EARLIER, "NotWaiting", id="already-requeued"),
    ],
)
def test_finish_backoff(wl: Workload, requeue_at: str, want: str) -> None:
    plan = plan_command(FinishRequeueBackoff(id="b", requeue_at=requeue_at, **_W), wl, 0, NOW)
    if want == "write":
        assert isinstance(plan, Write)
        after = merge_apply(wl, plan.patch)
        assert after.status.requeue_state == RequeueState(count=1)
        c = find_condition(after.status.conditions, k.WORKLOAD_REQUEUED)
        assert c is not None and (c.status, c.reason) == ("True", "BackoffFinished")
    else:
        assert isinstance(plan, (Refusal, Skip)) and plan.reason == want
