"""Every eviction kind holds the workload's quota until its job stopped and the reservation is
released (QuotaReserved=False): preemption, stop policies, admission checks, deactivation.

Kueue: a deactivated workload (spec.active=false) that holds quota is evicted with reason
Deactivated; its job is suspended and the quota is released only when QuotaReserved turns False.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from admission_builders import cq, fq, wl
from admission_world import World, world

from services.admission.core import AdmissionCheck, Workload

CPU9 = 9000


def job(name: str, pods: int = 3, cpu: str = "3", queue: str = "cq", at: float = 0.0, prio: int = 0) -> Workload:
    return wl(f"default/{name}").queue(queue).at(at).priority(prio).pods("main", pods, cpu=cpu).obj()


def reserved_cpu(w: World) -> int:
    """cpu of every workload the mirror shows with a reservation: a running job's pods, or a
    stopping one's (the fake watcher releases only once the job stopped)."""
    total = 0
    for rec in w.records.values():
        if rec.admission is not None:
            total += sum(p.resource_usage.get("cpu", 0) for p in rec.admission.pod_sets)
    return total


def run_checking_quota(w: World, now: float, steps: int = 6) -> list[int]:
    """Cycles, with the job stopping (quota released) only between them; the reserved cpu after
    every write the mirror shows."""
    seen = []
    for i in range(steps):
        w.step(now + i)
        seen.append(reserved_cpu(w))
        w.release()
        seen.append(reserved_cpu(w))
    return seen


def test_deactivating_a_running_workload_evicts_it_and_holds_its_quota_until_released() -> None:
    # Kueue's quick start: 9 cpu; a job of 3 pods x 3 cpu runs, is deactivated, a second one waits.
    w = world(cq("cq").flavor("default", cpu="9").obj())
    w.apply(job("a"))
    w.settle(1.0)
    assert w.status("default/a") == "admitted"
    w.update("default/a", active=False)
    w.apply(job("b", at=2.0))
    r = w.step(2.0)
    assert [(e.workload, e.reason, e.message) for e in r.evictions] == [
        ("default/a", "Deactivated", "The workload is deactivated")
    ]
    assert r.admissions == ()  # a still holds all 9 cpu while its job stops
    assert reserved_cpu(w) == CPU9
    w.step(2.5)
    assert w.records["default/a"].admission is not None and w.records["default/b"].admission is None
    w.release()  # the job stopped: QuotaReserved=False
    r = w.step(3.0)
    assert [d.workload for d in r.admissions] == ["default/b"]
    assert w.evictions == {"default/a": 1}


def test_reserved_cpu_never_exceeds_the_quota_while_deactivating() -> None:
    w = world(cq("cq").flavor("default", cpu="9").obj())
    w.apply(job("a"))
    w.settle(1.0)
    w.update("default/a", active=False)
    w.apply(job("b", at=2.0))
    seen = run_checking_quota(w, 2.0)
    assert max(seen) <= CPU9
    assert w.status("default/a") == "deactivated" and w.status("default/b") == "admitted"


def test_a_deactivated_pending_workload_is_just_dropped() -> None:
    w = world(cq("cq").flavor("default", cpu="9").obj())
    w.apply(job("a"))
    w.apply(job("b", at=1.0))
    w.settle(1.0)
    assert w.status("default/b") == "pending"
    w.update("default/b", active=False)
    r = w.step(2.0)
    assert (r.evictions, r.deactivations, r.admissions) == ((), (), ())
    assert w.cq_status["cq"].pending_workloads == 0


def test_reactivated_after_release_it_queues_again() -> None:
    w = world(cq("cq").flavor("default", cpu="9").obj())
    w.apply(job("a"))
    w.settle(1.0)
    w.update("default/a", active=False)
    w.settle(2.0)
    assert w.records["default/a"].admission is None
    w.update("default/a", active=True, evicted_reason=None)
    w.settle(3.0)
    assert w.status("default/a") == "admitted"


def _preempt(w: World) -> None:
    w.apply(job("high", at=2.0, prio=10))


def _drain(w: World) -> None:
    w.apply(cq("cq").flavor("default", cpu="9").preemption(within="LowerPriority").stop("HoldAndDrain").obj())


def _retry(w: World) -> None:
    w.set_checks("default/a", prov="Retry")


def _reject(w: World) -> None:
    w.set_checks("default/a", prov="Rejected")


def _deactivate(w: World) -> None:
    w.update("default/a", active=False)


def _checked_world() -> World:
    return world(AdmissionCheck(name="prov"),
                 cq("cq").group(fq("default", cpu="9")).preemption(within="LowerPriority").check("prov").obj())


# after the release: who holds the 9 cpu (the preemptor; the retried workload, queued again)
@pytest.mark.parametrize("trigger, checked, reason, holder", [
    pytest.param(_preempt, False, "Preempted", "default/high", id="preemption"),
    pytest.param(_drain, False, "ClusterQueueStopped", None, id="stop-policy"),
    pytest.param(_retry, True, "AdmissionCheck", "default/a", id="admission-check-retry"),
    pytest.param(_reject, True, "DeactivatedDueToAdmissionCheck", None, id="admission-check-rejected"),
    pytest.param(_deactivate, False, "Deactivated", None, id="deactivation"),
])
def test_every_eviction_kind_holds_the_quota_until_released(trigger: Callable[[World], None], checked: bool,
                                                            reason: str, holder: str | None) -> None:
    w = _checked_world() if checked else world(cq("cq").flavor("default", cpu="9").preemption(within="LowerPriority").obj())
    w.apply(job("a"))
    w.settle(1.0)
    if checked:
        w.set_checks("default/a", prov="Ready")
        w.settle(1.5)
    assert w.status("default/a") == "admitted"
    trigger(w)
    w.step(2.0)
    assert w.records["default/a"].evicted_reason == reason
    w.step(2.5)
    w.step(2.6)
    status = w.cq_status["cq"]
    assert (status.reserving_workloads, status.flavors_reservation[0].resources[0].total) == (1, CPU9)
    w.release()  # the job stopped
    w.step(3.0)
    w.step(3.1)
    assert [k for k, rec in w.records.items() if rec.admission is not None] == ([holder] if holder else [])
    assert w.cq_status["cq"].reserving_workloads == (1 if holder else 0)


def test_our_own_deactivation_is_not_followed_by_a_second_eviction() -> None:
    w = _checked_world()
    w.apply(job("a"))
    w.settle(1.0)
    w.set_checks("default/a", prov="Rejected")
    r = w.step(2.0)
    assert [d.workload for d in r.deactivations] == ["default/a"] and r.evictions == ()
    w.step(2.5)
    assert all(not x.evictions for x in w.results)
    assert w.cq_status["cq"].reserving_workloads == 1  # held until the job stopped
    w.settle(3.0)
    assert w.cq_status["cq"].reserving_workloads == 0
