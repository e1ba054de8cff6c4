"""Classic preemption: candidates, policies and the minimal victim set (after Kueue TestPreemption)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from admission_builders import cq, fq, wl
from admission_world import World, world

from services.admission.core import Workload

# Kueue's preemption_test.go defaultClusterQueues, as builders.
STANDALONE = (
    cq("standalone")
    .flavor("default", cpu="6")
    .group(fq("alpha", memory="3Gi"), fq("beta", memory="3Gi"))
    .preemption(within="LowerPriority")
    .obj()
)
C1 = cq("c1").cohort("cohort").flavor("default", cpu=("6", "6"), memory=("3Gi", "3Gi")).preemption(
    within="LowerPriority", reclaim="LowerPriority"
).obj()
C2 = cq("c2").cohort("cohort").flavor("default", cpu=("6", "6"), memory=("3Gi", "3Gi")).preemption(
    within="Never", reclaim="Any"
).obj()
PREVENT_STARVATION = cq("preventStarvation").flavor("default", cpu="6").preemption(within="LowerOrNewerEqualPriority").obj()
A_STANDARD = cq("a_standard").cohort("with_shared_cq").flavor("default", cpu=("1", "12")).preemption(
    within="Never", reclaim="LowerPriority", borrow="LowerPriority", threshold=0
).obj()
B_STANDARD = cq("b_standard").cohort("with_shared_cq").flavor("default", cpu=("1", "12")).preemption(
    within="LowerPriority", reclaim="Any", borrow="LowerPriority", threshold=0
).obj()
A_BEST_EFFORT = cq("a_best_effort").cohort("with_shared_cq").flavor("default", cpu=("1", "12")).preemption(
    within="Never", reclaim="LowerPriority", borrow="LowerPriority", threshold=0
).obj()
B_BEST_EFFORT = cq("b_best_effort").cohort("with_shared_cq").flavor("default", cpu=("0", "13")).preemption(
    within="Never", reclaim="LowerPriority", borrow="LowerPriority", threshold=0
).obj()
SHARED = cq("shared").cohort("with_shared_cq").flavor("default", cpu="10").obj()
LEND1 = cq("lend1").cohort("cohort-lend").flavor("default", cpu=("6", None, "4")).preemption(
    within="LowerPriority", reclaim="LowerPriority"
).obj()
LEND2 = cq("lend2").cohort("cohort-lend").flavor("default", cpu=("6", None, "2")).preemption(
    within="LowerPriority", reclaim="LowerPriority"
).obj()

ALL = (STANDALONE, C1, C2, PREVENT_STARVATION, A_STANDARD, B_STANDARD, A_BEST_EFFORT, B_BEST_EFFORT, SHARED, LEND1, LEND2)


# min_count are passed by name next to **req, so no resource name can stand for them.
def admitted(name: str, queue: str, priority: int = 0, at: float = 0.0, flavor: str = "default", **req: str) -> Workload:
    return wl(f"default/{name}").queue(queue).priority(priority).at(at).pods("main", 1, min_count=None, **req).reserved(queue, flavor, at=at).obj()


def incoming(queue: str, priority: int = 0, at: float = 5.0, **req: str) -> Workload:
    return wl("default/in").uid("wl-in").queue(queue).priority(priority).at(at).pods("main", 1, min_count=None, **req).obj()


@dataclass
class Case:
    id: str
    admitted: list[Workload]
    incoming: Workload
    want: dict[str, str]  # victim -> preemption reason
    queues: tuple = ALL
    want_pending_message: str | None = None


CASES = [
    Case(
        "preempt lowest priority",
        [admitted("low", "standalone", -1, cpu="2"), admitted("mid", "standalone", 0, cpu="2"), admitted("high", "standalone", 1, cpu="2")],
        incoming("standalone", 1, cpu="2"),
        {"default/low": "InClusterQueue"},
    ),
    Case(
        "preempt multiple",
        [admitted("low", "standalone", -1, cpu="2"), admitted("mid", "standalone", 0, cpu="2"), admitted("high", "standalone", 1, cpu="2")],
        incoming("standalone", 1, cpu="3"),
        {"default/low": "InClusterQueue", "default/mid": "InClusterQueue"},
    ),
    Case(
        "no preemption for low priority",
        [admitted("low", "standalone", -1, cpu="3"), admitted("mid", "standalone", 0, cpu="3")],
        incoming("standalone", -1, cpu="1"),
        {},
    ),
    Case(
        "not enough low priority workloads",
        [admitted("low", "standalone", -1, cpu="3"), admitted("mid", "standalone", 0, cpu="3")],
        incoming("standalone", 0, cpu="4"),
        {},
    ),
    Case(
        "some free quota, preempt low priority",
        [admitted("low", "standalone", -1, cpu="1"), admitted("mid", "standalone", 0, cpu="1"), admitted("high", "standalone", 1, cpu="3")],
        incoming("standalone", 1, cpu="2"),
        {"default/low": "InClusterQueue"},
    ),
    Case(
        "minimal set excludes low priority",
        [admitted("low", "standalone", -1, cpu="1"), admitted("mid", "standalone", 0, cpu="2"), admitted("high", "standalone", 1, cpu="3")],
        incoming("standalone", 1, cpu="2"),
        {"default/mid": "InClusterQueue"},
    ),
    Case(
        "preempt in the first flavor offering candidates (TryNextFlavor keeps the first)",
        [
            admitted("low", "standalone", -1, flavor="alpha", memory="2Gi"),
            admitted("mid", "standalone", 0, flavor="beta", memory="1Gi"),
            admitted("high", "standalone", 1, flavor="beta", memory="1Gi"),
        ],
        incoming("standalone", 1, cpu="1", memory="2Gi"),
        {"default/low": "InClusterQueue"},
    ),
    Case(
        "only preempt workloads using the chosen flavor",
        [
            admitted("alpha-high", "standalone", 1, flavor="alpha", memory="2Gi"),
            admitted("mid", "standalone", 0, flavor="beta", memory="1Gi"),
            admitted("high", "standalone", 1, flavor="beta", memory="1Gi"),
        ],
        incoming("standalone", 1, cpu="1", memory="2Gi"),
        {"default/mid": "InClusterQueue"},
    ),
    Case(
        "reclaim quota from borrower",
        [admitted("c1-low", "c1", -1, cpu="3"), admitted("c2-mid", "c2", 0, cpu="3"), admitted("c2-high", "c2", 1, cpu="6")],
        incoming("c1", 1, cpu="3"),
        {"default/c2-mid": "InCohortReclamation"},
    ),
    Case(
        "no workloads borrowing",
        [admitted("c1-high", "c1", 1, cpu="4"), admitted("c2-low-1", "c2", -1, cpu="4")],
        incoming("c1", 1, cpu="4"),
        {},
    ),
    Case(
        "not enough workloads borrowing",
        [admitted("c1-high", "c1", 1, cpu="4"), admitted("c2-low-1", "c2", -1, cpu="4"), admitted("c2-low-2", "c2", -1, cpu="4")],
        incoming("c1", 1, cpu="4"),
        {},
    ),
    Case(
        "do not reclaim borrowed quota from same priority for reclaimWithinCohort=LowerPriority",
        [admitted("c1", "c1", 0, cpu="2"), admitted("c2-1", "c2", 0, cpu="4"), admitted("c2-2", "c2", 0, cpu="4")],
        incoming("c1", 0, cpu="4"),
        {},
    ),
    Case(
        "reclaim borrowed quota from same priority for reclaimWithinCohort=Any",
        [admitted("c1-1", "c1", 0, cpu="4"), admitted("c1-2", "c1", 1, cpu="4"), admitted("c2", "c2", 0, cpu="2")],
        incoming("c2", 0, cpu="4"),
        {"default/c1-1": "InCohortReclamation"},
    ),
    Case(
        "preempt newer workloads with the same priority (LowerOrNewerEqualPriority)",
        [
            admitted("wl1", "preventStarvation", 2, at=1, cpu="2"),
            admitted("wl2", "preventStarvation", 1, at=3, cpu="2"),
            admitted("wl3", "preventStarvation", 1, at=4, cpu="2"),
        ],
        incoming("preventStarvation", 1, at=2, cpu="2"),
        {"default/wl3": "InClusterQueue"},
    ),
    Case(
        "withinClusterQueue Never: no preemption in the own queue",
        [admitted("c2-low", "c2", -1, cpu="6")],
        incoming("c2", 1, cpu="6"),
        {},
    ),
    Case(
        "borrowWithinCohort: preempt a lower priority workload of another queue while borrowing",
        [admitted("a_best_effort_low", "a_best_effort", -1, cpu="10"), admitted("b_best_effort_low", "b_best_effort", -1, cpu="1")],
        incoming("a_standard", 0, cpu="10"),
        {"default/a_best_effort_low": "InCohortReclaimWhileBorrowing"},
    ),
    Case(
        "borrowWithinCohort: no preemption above maxPriorityThreshold when borrowing stays needed",
        [admitted("b_standard", "b_standard", 1, cpu="10")],
        incoming("a_standard", 2, cpu="10"),
        {},
    ),
    Case(
        "borrowWithinCohort: above the threshold is fine when no borrowing is needed afterwards",
        [admitted("b_standard", "b_standard", 1, cpu="13")],
        incoming("a_standard", 2, cpu="1"),
        {"default/b_standard": "InCohortReclamation"},
    ),
    Case(
        "borrowWithinCohort: no preemption of lower priority in the own queue (withinClusterQueue Never)",
        [admitted("a_standard", "a_standard", 1, cpu="13")],
        incoming("a_standard", 2, cpu="1"),
        {},
    ),
    Case(
        "reclaim quota from lender",
        [admitted("lend1-low", "lend1", -1, cpu="10"), admitted("lend2-mid", "lend2", 0, cpu="1"), admitted("lend2-high", "lend2", 1, cpu="3")],
        incoming("lend1", 1, cpu="3"),
        {"default/lend1-low": "InClusterQueue"},
    ),
    Case(
        "cannot preempt from other queues beyond the requestable quota (lending limit)",
        [admitted("lend2-low", "lend2", -1, cpu="10")],
        incoming("lend1", 0, cpu="9"),
        {},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_preemption_targets(case: Case) -> None:
    w = world(*case.queues, flavors=("default", "alpha", "beta"))
    for a in case.admitted:
        w.apply(a)
    w.apply(case.incoming)
    r = w.step(10.0, echo=False)
    got = {p.victim: p.reason for p in r.preemptions}
    assert got == case.want
    assert all(p.preemptor == "default/in" for p in r.preemptions)
    if case.want:
        assert w.messages["default/in"].endswith(f"Pending the preemption of {len(case.want)} workload(s)")
        assert r.admissions == ()


def _standalone_with_low() -> World:
    w = world(cq("cq").flavor("default", cpu="4").preemption(within="LowerPriority").obj())
    w.apply(wl("default/low").queue("cq").priority(1).pods("main", 1, cpu="3").obj())
    w.settle(0.0)
    assert w.status("default/low") == "admitted"
    w.apply(wl("default/high").queue("cq").priority(5).at(1).pods("main", 1, cpu="2").obj())
    return w


def test_preemptor_waits_for_release_then_is_admitted() -> None:
    w = _standalone_with_low()
    r = w.step(1.0)  # issues the preemption; the echo marks the victim evicted, still reserving
    assert [(p.victim, p.reason) for p in r.preemptions] == [("default/low", "InClusterQueue")]
    assert w.status("default/low") == "admitted" and w.records["default/low"].evicted_reason == "Preempted"
    r = w.step(1.1)
    assert r.preemptions == () and r.admissions == ()
    assert w.messages["default/high"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
        "1 more needed. Pending the preemption of 1 workload(s)"
    )
    w.release()  # the victim's quota is released
    w.settle(1.2)
    assert w.statuses(["default/high", "default/low"]) == {"default/high": "admitted", "default/low": "pending"}
    assert w.evictions == {"default/low": 1}
    assert w.reasons["default/low"] == "WaitingForQuota"


def test_in_flight_preemption_is_not_issued_twice() -> None:
    w = _standalone_with_low()
    first = w.step(1.0, echo=False)
    assert len(first.preemptions) == 1
    assert w.step(1.1, echo=False).preemptions == ()  # re-evaluated once: the target is in flight
    assert not w.state.has_scheduling_work()  # nothing changed since: the preemptor does not spin
    w.apply(wl("default/other").queue("cq").priority(0).at(2).pods("main", 1, cpu="5").obj())
    again = w.step(2.0, echo=False)
    assert again.preemptions == ()
    w.state.forget_eviction("default/low")  # the eviction command was refused
    third = w.step(3.0, echo=False)
    assert [p.victim for p in third.preemptions] == ["default/low"]
    assert third.preemptions[0].id != first.preemptions[0].id


def test_preemption_message_names_preemptor_and_paths() -> None:
    w = world(C1, C2)
    w.apply(admitted("c1-low", "c1", -1, cpu="3"))
    w.apply(admitted("c2-mid", "c2", 0, cpu="3"))
    w.apply(admitted("c2-high", "c2", 1, cpu="6"))
    w.apply(wl("default/in").uid("wl-in").queue("c1").priority(1).pods("main", 1, cpu="3").obj())
    r = w.step(10.0, echo=False)
    assert [p.message for p in r.preemptions] == [
        "Preempted to accommodate a workload (UID: wl-in, JobUID: UNKNOWN) due to reclamation within the cohort; "
        "preemptor path: /cohort/c1; preemptee path: /cohort/c2"
    ]


def test_overlapping_targets_in_one_cycle_are_skipped() -> None:
    """Two preemptors want the same victim in one cycle: the second waits (Kueue: skipped or DeferredFit)."""
    a = cq("a").cohort("co").flavor("default", cpu="2").preemption(reclaim="Any").obj()
    b = cq("b").cohort("co").flavor("default", cpu="2").preemption(reclaim="Any").obj()
    c = cq("c").cohort("co").flavor("default", cpu="0").obj()
    w = world(a, b, c)
    w.apply(admitted("big", "c", 0, cpu="4"))
    w.apply(wl("default/in-a").queue("a").at(1).pods("main", 1, cpu="2").obj())
    w.apply(wl("default/in-b").queue("b").at(2).pods("main", 1, cpu="2").obj())
    r = w.step(3.0, echo=False)
    assert [(p.victim, p.preemptor) for p in r.preemptions] == [("default/big", "default/in-a")]
    assert w.messages["default/in-b"] == (
        "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete"
    )
    w.echo(r)
    w.release()
    w.settle(4.0)
    assert w.statuses(["default/in-a", "default/in-b", "default/big"]) == {
        "default/in-a": "admitted",
        "default/in-b": "admitted",
        "default/big": "pending",
    }


HIERARCHY = (
    cq("left-q").cohort("left").flavor("default", cpu="4").preemption(reclaim="Any").obj(),
    cq("right-q").cohort("right").flavor("default", cpu="0").obj(),
)


def test_hierarchical_reclaim_from_another_subtree() -> None:
    from admission_builders import cohort

    w = world(*HIERARCHY, cohort("left").parent("root").obj(), cohort("right").parent("root").obj())
    w.apply(admitted("borrower", "right-q", 10, cpu="4"))
    w.apply(wl("default/in").queue("left-q").priority(0).at(1).pods("main", 1, cpu="4").obj())
    r = w.step(2.0, echo=False)
    assert [(p.victim, p.reason) for p in r.preemptions] == [("default/borrower", "InCohortReclamation")]


def test_workloads_needing_no_preemption_do_not_take_a_victims_share_before_it_is_released() -> None:
    """One cpu is free; a preemptor reclaims a 3-cpu borrower, and two 1-cpu heads of other queues each
    fit the free cpu alone. Counting the victim as gone (Kueue's fits()) would admit both beside the
    victim, still reserving: 5 cpu reserved of 4 (found by `kq chaos`). They wait for its release."""
    a = cq("a").cohort("co").flavor("default", cpu="2").preemption(reclaim="Any").obj()
    b = cq("b").cohort("co").flavor("default", cpu="1").obj()
    c = cq("c").cohort("co").flavor("default", cpu="0").obj()
    d = cq("d").cohort("co").flavor("default", cpu="1").obj()
    w = world(a, b, c, d)
    w.apply(admitted("big", "c", 0, cpu="3"))
    w.apply(wl("default/in-a").queue("a").priority(2).at(1).pods("main", 1, cpu="2").obj())
    w.apply(wl("default/small-b").queue("b").priority(1).at(2).pods("main", 1, cpu="1").obj())
    w.apply(wl("default/small-d").queue("d").priority(1).at(3).pods("main", 1, cpu="1").obj())
    r = w.step(4.0)
    assert [(p.victim, p.preemptor) for p in r.preemptions] == [("default/big", "default/in-a")]
    reserving = [k for k, rec in w.records.items() if rec.admission is not None]
    assert sorted(reserving) == ["default/big"], reserving  # the victim still holds its 3 cpu
    w.release()
    w.settle(5.0)
    assert w.statuses(["default/in-a", "default/small-b", "default/small-d", "default/big"]) == {
        "default/in-a": "admitted",
        "default/small-b": "admitted",
        "default/small-d": "admitted",
        "default/big": "pending",
    }
