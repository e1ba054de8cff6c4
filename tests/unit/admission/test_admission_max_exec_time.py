"""kueue.x-k8s.io/max-exec-time-seconds (spec.maximumExecutionTimeSeconds): Kueue deactivates an
admitted workload once its admitted time, over all its admissions, reaches the limit. The
deadline comes from the record (Admitted's time + limit - accumulated), so it survives a restart."""

from __future__ import annotations

import msgspec
import pytest
from admission_builders import cq, flavor, lq, wl
from admission_world import World, world

from services.admission.core import AdmissionCheck, Namespace, SchedulerState, Workload

REASON = "DeactivatedDueToMaximumExecutionTimeExceeded"
MESSAGE = "The workload is deactivated due to exceeding the maximum execution time"


def job(name: str, max_s: int | None, cpu: str = "1", at: float = 0.0) -> Workload:
    w = wl(f"default/{name}").queue("cq").at(at).pods("main", 1, cpu=cpu).obj()
    return msgspec.structs.replace(w, max_execution_s=max_s)


def deactivations_until(w: World, end: float, step: float = 0.5) -> list[tuple[float, str, str, str]]:
    out = []
    t = w.now
    while t <= end:
        r = w.step(t)
        out += [(t, d.workload, d.reason, d.message) for d in r.deactivations]
        t += step
    return out


@pytest.mark.parametrize("past, admitted_at, limit, due", [
    pytest.param(0, 1.0, 10, 11.0, id="first-admission"),
    pytest.param(4, 1.0, 10, 7.0, id="earlier-admissions-count"),
])
def test_an_admitted_workload_is_deactivated_when_its_time_is_up(past: int, admitted_at: float, limit: int,
                                                                 due: float) -> None:
    w = world(cq("cq").flavor("default", cpu="4").obj())
    w.apply(msgspec.structs.replace(job("a", limit), past_execution_s=past))
    w.settle(admitted_at)
    assert w.status("default/a") == "admitted"
    assert w.state.next_wakeup() == due
    assert deactivations_until(w, 13.0) == [(due, "default/a", REASON, MESSAGE)]


def test_a_workload_over_its_time_at_admission_is_deactivated_in_the_next_cycle() -> None:
    w = world(cq("cq").flavor("default", cpu="4").obj())
    w.apply(msgspec.structs.replace(job("a", 10), past_execution_s=12))
    w.step(1.0)  # admitted at 1 (its earlier admissions used 12 s of 10)
    r = w.step(1.0)
    assert [(d.workload, d.reason) for d in r.deactivations] == [("default/a", REASON)]
    w.settle(1.0)
    assert w.status("default/a") == "deactivated" and w.records["default/a"].admission is None


def test_the_deadline_survives_a_restart() -> None:
    w = world(cq("cq").flavor("default", cpu="4").obj())
    w.apply(job("a", 10))
    w.settle(1.0)
    fresh = SchedulerState()  # a new leader replays the mirror
    for obj in (Namespace(name="default"), flavor("default"), w.state.cqs["cq"].spec, lq("default/cq", "cq"),
                w.records["default/a"]):
        fresh.apply(obj)
    assert fresh.next_wakeup() == 11.0
    assert fresh.schedule(10.9).deactivations == ()
    assert [d.reason for d in fresh.schedule(11.0).deactivations] == [REASON]


def test_quota_is_held_until_the_deactivated_job_stopped() -> None:
    w = world(cq("cq").flavor("default", cpu="4").obj())
    w.apply(job("a", 10, cpu="4"))
    w.settle(1.0)
    w.apply(job("b", None, cpu="4", at=2.0))
    r = w.step(11.0)
    assert [d.workload for d in r.deactivations] == ["default/a"] and r.admissions == ()
    w.step(11.5)
    assert w.records["default/b"].admission is None  # a's job is still stopping
    w.release()
    w.settle(12.0)
    assert (w.status("default/a"), w.status("default/b")) == ("deactivated", "admitted")


@pytest.mark.parametrize("limit", [pytest.param(None, id="no-limit"), pytest.param(5, id="checks-not-ready")])
def test_no_deadline_unless_admitted_with_a_limit(limit: int | None) -> None:
    w = world(AdmissionCheck(name="prov"), cq("cq").flavor("default", cpu="4").check("prov").obj())
    w.apply(job("a", limit))
    w.settle(1.0)
    assert w.status("default/a") == "quotaReserved"
    assert w.state.next_wakeup() is None
    assert deactivations_until(w, 20.0) == []


def test_time_of_an_earlier_admission_counts_after_a_preemption() -> None:
    w = world(cq("cq").flavor("default", cpu="4").preemption(within="LowerPriority").obj())
    w.apply(job("a", 10, cpu="4"))
    w.settle(1.0)  # admitted at 1
    w.apply(msgspec.structs.replace(wl("default/high").queue("cq").at(5.0).priority(10).pods("main", 1, cpu="4")
                                    .obj()))
    w.settle(5.0)  # a preempted at 5 after running 4 s
    assert w.records["default/a"].past_execution_s == 4
    w.finish("default/high")
    w.settle(8.0)  # a admitted again at 8: 6 s left
    assert w.status("default/a") == "admitted"
    assert w.state.next_wakeup() == 14.0
