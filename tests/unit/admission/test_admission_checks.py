"""Admission checks, ClusterQueue activity and stop policies."""

from __future__ import annotations

import pytest
from admission_builders import cq, fq, lq, wl
from admission_world import world

from services.admission.core import AdmissionCheck, Deleted


def job(name: str, cpu: str = "1", queue: str = "cq", at: float = 0.0):
    return wl(f"default/{name}").queue(queue).at(at).pods("main", 1, cpu=cpu).obj()


def checked_world():
    return world(
        AdmissionCheck(name="prov"),
        cq("cq").group(fq("on-demand", cpu="4"), fq("spot", cpu="4")).check("prov", "on-demand").obj(),
        flavors=("on-demand", "spot"),
    )


def test_quota_reserved_until_every_check_is_ready() -> None:
    w = checked_world()
    w.apply(job("w"))
    r = w.step(1.0)
    (d,) = r.admissions
    assert (d.admission_checks, d.admitted) == (("prov",), False)
    assert w.status("default/w") == "quotaReserved"
    w.step(1.1)
    assert (w.cq_status["cq"].reserving_workloads, w.cq_status["cq"].admitted_workloads) == (1, 0)
    w.set_checks("default/w", prov="Ready")
    r = w.step(2.0)
    assert [(c.workload, c.written) for c in r.checks_ready] == [("default/w", False)]
    assert w.step(2.1).checks_ready == ()  # the echo of our own write is not reported again
    assert w.status("default/w") == "admitted"
    assert w.cq_status["cq"].admitted_workloads == 1


def test_admitted_written_with_the_last_check_is_reported_not_written_again() -> None:
    """The watcher sets Admitted with a MultiKueue check's Ready: no AdmitWorkload follows, but the
    checks-ready decision (its Event and metrics) is still reported, once."""
    w = checked_world()
    w.apply(job("w"))
    w.settle(1.0)
    assert w.status("default/w") == "quotaReserved"
    current = w.records["default/w"]
    w.update("default/w", admitted=True, admission_checks=tuple(
        type(c)(name=c.name, state="Ready") for c in current.admission_checks))
    r = w.step(2.0)
    assert [(c.workload, c.written) for c in r.checks_ready] == [("default/w", True)]
    assert w.status("default/w") == "admitted"
    assert w.cq_status["cq"].admitted_workloads == 1
    assert w.step(3.0).checks_ready == ()


def test_checks_on_other_flavors_do_not_apply() -> None:
    w = checked_world()
    w.apply(job("big", "4"))
    w.apply(job("w", "2", at=1))
    w.settle(1.0)
    assert w.flavors("default/w") == {"main": {"cpu": "spot"}}
    assert w.status("default/w") == "admitted"


def test_retry_evicts_and_requeues() -> None:
    w = checked_world()
    w.apply(job("w"))
    w.settle(1.0)
    w.set_checks("default/w", prov="Retry")
    r = w.step(2.0)
    assert [(e.workload, e.reason, e.message) for e in r.evictions] == [
        ("default/w", "AdmissionCheck", 'Evicted due to AdmissionCheck in Retry state: "prov"')
    ]
    w.release()
    w.settle(3.0)
    assert w.status("default/w") == "quotaReserved"
    assert w.evictions["default/w"] == 1


def test_rejected_deactivates() -> None:
    w = checked_world()
    w.apply(job("w"))
    w.settle(1.0)
    w.set_checks("default/w", prov="Rejected")
    r = w.step(2.0)
    assert [(d.workload, d.reason, d.message) for d in r.deactivations] == [
        ("default/w", "DeactivatedDueToAdmissionCheck",
         'The workload is deactivated due to AdmissionCheck in Rejected state: "prov"')
    ]
    w.settle(2.0)
    assert w.status("default/w") == "deactivated"
    assert w.cq_status["cq"].reserving_workloads == 0


INACTIVE = [
    ("missing flavor", [cq("cq").flavor("absent", cpu="4").obj()], "FlavorNotFound",
     "Can't admit new workloads: references missing ResourceFlavor(s): absent."),
    ("missing admission check", [cq("cq").flavor("default", cpu="4").check("prov").obj()], "AdmissionCheckNotFound",
     "Can't admit new workloads: references missing AdmissionCheck(s): prov."),
    ("inactive admission check", [AdmissionCheck(name="prov", active=False), cq("cq").flavor("default", cpu="4").check("prov").obj()],
     "AdmissionCheckInactive", "Can't admit new workloads: references inactive AdmissionCheck(s): prov."),
    ("stopped", [cq("cq").flavor("default", cpu="4").stop("Hold").obj()], "Stopped", "Can't admit new workloads: is stopped."),
    ("stopped and missing flavor", [cq("cq").flavor("absent", cpu="4").stop("Hold").obj()], "Stopped",
     "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): absent."),
]


@pytest.mark.parametrize(("case", "objects", "reason", "message"), INACTIVE, ids=[c[0] for c in INACTIVE])
def test_inactive_cluster_queue(case: str, objects: list, reason: str, message: str) -> None:
    w = world(*objects)
    w.apply(job("w"))
    w.settle(1.0)
    s = w.cq_status["cq"]
    assert (s.active, s.active_reason, s.active_message) == (False, reason, message)
    assert w.status("default/w") == "pending"
    assert w.lq_status["default/cq"].active_reason == "ClusterQueueIsInactive"


def test_flavor_created_later_activates_the_queue() -> None:
    from admission_builders import flavor

    w = world(cq("cq").flavor("late", cpu="4").obj())
    w.apply(job("w"))
    w.settle(1.0)
    assert w.status("default/w") == "pending"
    w.apply(flavor("late"))
    w.settle(2.0)
    assert w.status("default/w") == "admitted"
    assert (w.cq_status["cq"].active, w.cq_status["cq"].active_reason) == (True, "Ready")
    w.apply(Deleted(kind="ResourceFlavor", name="late"))
    w.settle(3.0)
    assert w.cq_status["cq"].active_reason == "FlavorNotFound"


def test_hold_keeps_admitted_workloads() -> None:
    w = world(cq("cq").flavor("default", cpu="4").obj())
    w.apply(job("running"))
    w.settle(1.0)
    w.apply(cq("cq").flavor("default", cpu="4").stop("Hold").obj())
    w.apply(job("new", at=2))
    w.settle(2.0)
    assert w.statuses(["default/running", "default/new"]) == {"default/running": "admitted", "default/new": "pending"}
    assert w.messages["default/new"] == "ClusterQueue cq is stopped"
    w.apply(cq("cq").flavor("default", cpu="4").obj())
    w.settle(3.0)
    assert w.status("default/new") == "admitted"


def test_hold_and_drain_evicts_admitted_workloads() -> None:
    w = world(cq("cq").flavor("default", cpu="4").obj())
    w.apply(job("a"))
    w.apply(job("b", at=1))
    w.settle(1.0)
    w.apply(cq("cq").flavor("default", cpu="4").stop("HoldAndDrain").obj())
    r = w.step(2.0)
    assert sorted((e.workload, e.reason, e.message) for e in r.evictions) == [
        ("default/a", "ClusterQueueStopped", "The ClusterQueue is stopped"),
        ("default/b", "ClusterQueueStopped", "The ClusterQueue is stopped"),
    ]
    w.release()
    w.settle(3.0)
    assert w.statuses(["default/a", "default/b"]) == {"default/a": "pending", "default/b": "pending"}


def test_local_queue_hold_and_drain_evicts_its_workloads_only() -> None:
    w = world(cq("cq").flavor("default", cpu="4").obj(), lq("default/team", "cq"))
    w.apply(job("mine", queue="team"))
    w.apply(job("other", at=1))
    w.settle(1.0)
    w.apply(lq("default/team", "cq", stop="HoldAndDrain"))
    r = w.step(2.0)
    assert [(e.workload, e.reason) for e in r.evictions] == [("default/mine", "LocalQueueStopped")]
    w.release()
    w.settle(3.0)
    assert w.messages["default/mine"] == "LocalQueue team is stopped"
    assert w.status("default/other") == "admitted"


def test_pending_workload_with_failed_checks_is_not_admitted() -> None:
    w = world(cq("cq").flavor("default", cpu="4").obj())
    w.apply(wl("default/w").queue("cq").pods("main", 1, cpu="1").checks(prov="Retry").obj())
    w.settle(1.0)
    assert (w.status("default/w"), w.messages["default/w"]) == ("pending", "The workload has failed admission checks")
