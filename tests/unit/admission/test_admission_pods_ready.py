"""waitForPodsReady.blockAdmission (Kueue scheduler waitForPodsReadyIfNeeded): while a workload
holding quota anywhere in the partition does not have PodsReady=True, nothing else is admitted;
a timeout eviction (quota released) or a deletion unblocks. Also: requeueState.requeueAt and
requeuingStrategy.timestamp in the queue order."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest
from admission_builders import cq, wl
from admission_world import World, world

from services.admission.core import AdmissionCheck, SchedulerConfig, Workload
from services.admission.core.workloads import order_timestamp

BLOCK = SchedulerConfig(block_admission=True)
WAITING = "waiting for all admitted workloads to be in PodsReady condition"


def job(name: str, queue: str, at: float = 0.0) -> Workload:
    return wl(f"default/{name}").queue(queue).at(at).pods("main", 1, cpu="1").obj()


def two_queues(config: SchedulerConfig = BLOCK) -> World:
    return world(cq("cq-a").flavor("default", cpu="4").obj(), cq("cq-b").flavor("default", cpu="4").obj(),
                 config=config)


def test_one_admission_at_a_time_across_cluster_queues() -> None:
    w = two_queues()
    w.apply(job("a", "cq-a"))
    w.apply(job("b", "cq-b", at=1.0))
    r = w.step(1.0)
    assert [d.workload for d in r.admissions] == ["default/a"]
    w.settle(1.0)
    assert w.statuses(["default/a", "default/b"]) == {"default/a": "admitted", "default/b": "pending"}
    assert (w.reasons["default/b"], w.messages["default/b"]) == ("WaitingForPodsReady", WAITING)
    assert not w.state.has_scheduling_work(2.0)  # waits without spinning
    w.update("default/a", pods_ready=True)
    w.settle(2.0)
    assert w.status("default/b") == "admitted"


def test_without_block_admission_both_are_admitted_at_once() -> None:
    w = two_queues(SchedulerConfig())
    w.apply(job("a", "cq-a"))
    w.apply(job("b", "cq-b", at=1.0))
    r = w.step(1.0)
    assert sorted(d.workload for d in r.admissions) == ["default/a", "default/b"]


def _timeout_eviction(w: World) -> None:  # podsready: evicted, then the job stops and the quota goes
    w.update("default/a", evicted_reason="PodsReadyTimeout", evicted_time=w.now)
    w._to_release.append("default/a")
    w.release()


def _deletion(w: World) -> None:
    w.delete("default/a")


def _finish(w: World) -> None:
    w.finish("default/a")


@pytest.mark.parametrize("unblock", [
    pytest.param(_timeout_eviction, id="timeout-eviction-releases-quota"),
    pytest.param(_deletion, id="deletion"),
    pytest.param(_finish, id="finished"),
])
def test_what_unblocks(unblock: Callable[[World], None]) -> None:
    w = two_queues()
    w.apply(job("a", "cq-a"))
    w.apply(job("b", "cq-b", at=1.0))
    w.settle(1.0)
    assert w.status("default/b") == "pending"
    w.now = 5.0
    unblock(w)
    w.settle(5.0)
    assert w.status("default/b") == "admitted"


def test_an_eviction_still_holding_quota_keeps_blocking() -> None:
    w = two_queues()
    w.apply(job("a", "cq-a"))
    w.apply(job("b", "cq-b", at=1.0))
    w.settle(1.0)
    w.update("default/a", evicted_reason="PodsReadyTimeout", evicted_time=5.0)  # pods still terminating
    w.step(5.0)
    w.step(5.1)
    assert w.status("default/b") == "pending"


def test_a_reservation_waiting_on_checks_blocks_too() -> None:
    # Kueue's cache tracks every workload holding quota, admitted or not
    w = world(AdmissionCheck(name="prov"), cq("cq-a").flavor("default", cpu="4").check("prov").obj(),
              cq("cq-b").flavor("default", cpu="4").obj(), config=BLOCK)
    w.apply(job("a", "cq-a"))
    w.apply(job("b", "cq-b", at=1.0))
    w.settle(1.0)
    assert w.statuses(["default/a", "default/b"]) == {"default/a": "quotaReserved", "default/b": "pending"}


def test_preemption_is_not_blocked() -> None:
    w = world(cq("cq-a").flavor("default", cpu="1").preemption(within="LowerPriority").obj(), config=BLOCK)
    w.apply(job("low", "cq-a"))
    w.settle(1.0)
    w.apply(wl("default/high").queue("cq-a").at(2.0).priority(5).pods("main", 1, cpu="1").obj())
    r = w.step(2.0)
    assert [p.victim for p in r.preemptions] == ["default/low"]


# --- queue order after requeueing ------------------------------------------------------------------


@pytest.mark.parametrize("reason, timestamp, want", [
    pytest.param("PodsReadyTimeout", "Eviction", 50.0, id="pods-ready-timeout-eviction-time"),
    pytest.param("PodsReadyTimeout", "Creation", 10.0, id="pods-ready-timeout-creation-time"),
    pytest.param("AdmissionCheck", "Creation", 50.0, id="admission-check-always-eviction-time"),
    pytest.param("Preempted", "Eviction", 10.0, id="preempted-creation-time"),
    pytest.param(None, "Eviction", 10.0, id="never-evicted"),
])
def test_queue_order_timestamp(reason: str | None, timestamp: str, want: float) -> None:
    w = wl("default/w").queue("q").at(10.0).pods("main", 1, cpu="1").obj()
    if reason is not None:
        w = msgspec.structs.replace(w, evicted_reason=reason, evicted_time=50.0)
    assert order_timestamp(w, timestamp) == want


def test_requeue_at_holds_a_workload_back_until_then() -> None:
    w = world(cq("cq").flavor("default", cpu="4").obj())
    w.apply(msgspec.structs.replace(job("a", "cq"), requeue_at=30.0))
    w.apply(job("b", "cq", at=1.0))
    w.settle(1.0)
    assert w.statuses(["default/a", "default/b"]) == {"default/a": "pending", "default/b": "admitted"}
    assert w.state.next_wakeup() == 30.0
    w.settle(30.0)
    assert w.status("default/a") == "admitted"
