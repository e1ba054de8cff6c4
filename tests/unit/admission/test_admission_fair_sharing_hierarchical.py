"""Fair-sharing preemption in nested cohorts (Kueue pkg/scheduler/preemption/fairsharing and the
hierarchical cases of its TestFairPreemptions), as whole outcomes: which workloads an incoming
workload preempts and why. The shares compared are those of the two "almost least common
ancestors": the children of the lowest cohort shared by preemptor and target, on each side."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from admission_builders import cohort, cq, wl
from admission_world import world

from services.admission.core import ClusterQueue, Cohort, FairSharingConfig, SchedulerConfig, Workload
from services.admission.core.fair_share import dominant_resource_share

FAIR = SchedulerConfig(fair_sharing=FairSharingConfig())


def on(name: str, queue: str, cpu: str = "1", priority: int = 0) -> Workload:
    return wl(f"default/{name}").queue(queue).priority(priority).pods("main", 1, cpu=cpu).reserved(queue, "default").obj()


@dataclass
class Case:
    id: str
    cohorts: list[Cohort]
    cqs: list[ClusterQueue]
    admitted: list[Workload]
    incoming: tuple[str, str, int]  # (queue, cpu, priority)
    want: dict[str, str]
    strategies: tuple[str, ...] = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
    notes: list[str] = field(default_factory=list)


def _ranked(queue: str) -> list[Workload]:
    return [on(f"{queue}{i}", queue, priority=i) for i in range(1, 6)]


CASES = [
    # Usage, quota, subtree quota:   ROOT(20,5,20)
    #                          LEFT(5,5,7)  c(5,1,1)  RIGHT(10,5,7)
    #                          a(0,1,1) b(5,1,1)      d(5,1,1) e(5,1,1)
    # a (and LEFT) weigh 2, e weighs 0.99: a takes 5 from b, c and e.
    Case(
        "hierarchical preemption",
        [cohort("ROOT").flavor("default", cpu="5").obj(),
         cohort("LEFT").parent("ROOT").weight(2.0).flavor("default", cpu="5").obj(),
         cohort("RIGHT").parent("ROOT").flavor("default", cpu="5").obj()],
        [cq("a").cohort("LEFT").weight(2.0).flavor("default", cpu="1").preemption(reclaim="Any").obj(),
         cq("b").cohort("LEFT").flavor("default", cpu="1").obj(),
         cq("c").cohort("ROOT").flavor("default", cpu="1").obj(),
         cq("d").cohort("RIGHT").flavor("default", cpu="1").obj(),
         cq("e").cohort("RIGHT").weight(0.99).flavor("default", cpu="1").obj()],
        _ranked("b") + _ranked("c") + _ranked("d") + _ranked("e"),
        ("a", "5", 0),
        {"default/b1": "InCohortFairSharing", "default/b2": "InCohortFairSharing",
         "default/c1": "InCohortFairSharing", "default/c2": "InCohortFairSharing",
         "default/e1": "InCohortFairSharing"},
    ),
    #        ROOT
    #      a(3,5,5)   RIGHT(1,1,1) - b(1,0,0)
    # b borrows, but only from RIGHT, which does not borrow: a preempts its own.
    Case(
        "borrowing cq in non-borrowing cohort is protected",
        [cohort("ROOT").obj(), cohort("RIGHT").parent("ROOT").weight(0.1).flavor("default", cpu="1").obj()],
        [cq("a").cohort("ROOT").weight(10.0).flavor("default", cpu="5").preemption(within="LowerPriority", reclaim="Any").obj(),
         cq("b").cohort("RIGHT").weight(0.1).flavor("default", cpu="0").obj()],
        [on("a1", "a", priority=-1), on("a2", "a", priority=-1), on("a3", "a", priority=-1), on("b1", "b", priority=-1)],
        ("a", "5", 0),
        {"default/a1": "InClusterQueue", "default/a2": "InClusterQueue", "default/a3": "InClusterQueue"},
    ),
    #        ROOT
    #      a(3,5,5)   RIGHT(4,3,3) - b(4,0,0)
    # Only b's workload borrows and it has a higher priority: a preempts its own.
    Case(
        "forced to preempt within clusterqueue because borrowing workload too important",
        [cohort("ROOT").obj(), cohort("RIGHT").parent("ROOT").weight(0.1).flavor("default", cpu="3").obj()],
        [cq("a").cohort("ROOT").weight(10.0).flavor("default", cpu="5")
         .preemption(within="LowerPriority", reclaim="LowerPriority").obj(),
         cq("b").cohort("RIGHT").weight(0.1).flavor("default", cpu="0").obj()],
        [on("a1", "a", priority=-1), on("a2", "a", priority=-1), on("a3", "a", priority=-1),
         on("b1", "b", cpu="4", priority=100)],
        ("a", "4", 0),
        {"default/a1": "InClusterQueue", "default/a2": "InClusterQueue", "default/a3": "InClusterQueue"},
    ),
    # ROOT - A(1.01) - AA - AAA - a ; ROOT - B(0.99) - BB - BBB - b ; ROOT - C - CC - CCC - CCCC(1 cpu)
    # The shares compared are A's and B's (the almost-LCAs): A weighs more, so a takes b's unit.
    Case(
        "deep preemption",
        [cohort("ROOT").obj(), cohort("A").parent("ROOT").weight(1.01).obj(), cohort("AA").parent("A").obj(),
         cohort("AAA").parent("AA").obj(), cohort("B").parent("ROOT").weight(0.99).obj(),
         cohort("BB").parent("B").obj(), cohort("BBB").parent("BB").obj(), cohort("C").parent("ROOT").obj(),
         cohort("CC").parent("C").obj(), cohort("CCC").parent("CC").obj(),
         cohort("CCCC").parent("CCC").flavor("default", cpu="1").obj()],
        [cq("a").cohort("AAA").flavor("default", cpu="0").preemption(reclaim="Any").obj(),
         cq("b").cohort("BBB").flavor("default", cpu="0").obj()],
        [on("b1", "b")],
        ("a", "1", 0),
        {"default/b1": "InCohortFairSharing"},
    ),
    # The same tree with the weights swapped: B matters more, a may not take b's unit.
    Case(
        "deep preemption refused when the target's branch weighs more",
        [cohort("ROOT").obj(), cohort("A").parent("ROOT").weight(0.99).obj(), cohort("AA").parent("A").obj(),
         cohort("AAA").parent("AA").obj(), cohort("B").parent("ROOT").weight(1.01).obj(),
         cohort("BB").parent("B").obj(), cohort("BBB").parent("BB").obj(), cohort("C").parent("ROOT").obj(),
         cohort("CC").parent("C").obj(), cohort("CCC").parent("CC").obj(),
         cohort("CCCC").parent("CCC").flavor("default", cpu="1").obj()],
        [cq("a").cohort("AAA").flavor("default", cpu="0").preemption(reclaim="Any").obj(),
         cq("b").cohort("BBB").flavor("default", cpu="0").obj()],
        [on("b1", "b")],
        ("a", "1", 0),
        {},
    ),
    # a (weight 0) sits in A (weight 0) which holds the 1 cpu b borrows: a is under nominal at
    # its own level but borrows as seen from ROOT, so it goes through the fair-sharing path.
    Case(
        "cohort with zero weight can reclaim nominal quota",
        [cohort("ROOT").obj(), cohort("A").parent("ROOT").weight(0.0).flavor("default", cpu="1").obj()],
        [cq("a").cohort("A").weight(0.0).flavor("default", cpu="0").preemption(reclaim="Any").obj(),
         cq("b").cohort("ROOT").flavor("default", cpu="0").obj()],
        [on("b1", "b")],
        ("a", "1", 0),
        {"default/b1": "InCohortFairSharing"},
    ),
    # right-cohort (weight 0) lends its own 1 cpu to right-cq: nothing there is borrowed from root.
    Case(
        "can't preempt nominal from Cohort with 0 weight",
        [cohort("root").obj(), cohort("right-cohort").parent("root").weight(0.0).flavor("default", cpu="1").obj()],
        [cq("left-cq").cohort("root").flavor("default", cpu="0").preemption(reclaim="Any").obj(),
         cq("right-cq").cohort("right-cohort").weight(0.0).flavor("default", cpu="0").preemption(reclaim="Any").obj()],
        [on("right-1", "right-cq")],
        ("left-cq", "1", 0),
        {},
    ),
    # A (weight 0, 1 cpu) under ROOT holds p (2) and y (2, borrowing 2); x (1) under ROOT borrows 1.
    # The first strategy passes nothing from x (A's share is infinite), the second takes y1 then x1.
    Case(
        "candidates skipped by the first strategy are still available to the second strategy",
        [cohort("A").parent("ROOT").weight(0.0).flavor("default", cpu="1").obj()],
        [cq("p").cohort("A").flavor("default", cpu="2").preemption(reclaim="Any").obj(),
         cq("y").cohort("A").flavor("default", cpu="2").obj(),
         cq("x").cohort("ROOT").flavor("default", cpu="1").obj()],
        [on("p1", "p", "2"), on("y1", "y", "2"), on("y2", "y", "2"), on("x1", "x"), on("x2", "x")],
        ("p", "1", 0),
        {"default/y1": "InCohortFairSharing", "default/x1": "InCohortFairSharing"},
    ),
    Case(
        "zero weight borrowing preemptor can preempt from a borrowing CQ which also has zero weight",
        [cohort("all").flavor("default", cpu="3").obj()],
        [cq("a").cohort("all").weight(0.0).flavor("default", cpu="1").preemption(reclaim="Any").obj(),
         cq("b").cohort("all").weight(0.0).flavor("default", cpu="0").obj()],
        [on("b1", "b"), on("b2", "b"), on("b3", "b")],
        ("a", "2", 0),
        {"default/b1": "InCohortFairSharing"},
    ),
    Case(
        "non-zero weight borrowing preemptor preempts from a borrowing CQ",
        [cohort("all").flavor("default", cpu="3").obj()],
        [cq("a").cohort("all").flavor("default", cpu="1").preemption(reclaim="Any").obj(),
         cq("b").cohort("all").flavor("default", cpu="0").obj()],
        [on("b1", "b"), on("b2", "b"), on("b3", "b")],
        ("a", "2", 0),
        {"default/b1": "InCohortFairSharing"},
    ),
    # The shapes of Kueue's integration test "preempts workloads to enforce fair share": 12 cpu
    # at the root; best-effort (0.5) and physics each run 6 low-priority units. A high-priority
    # unit in llm (weight 2, under research) takes one from the branch with the larger share.
    Case(
        "research/best-effort: the preemptor's branch takes from the larger share",
        [cohort("root").flavor("default", cpu="12").obj(), cohort("research").parent("root").obj(),
         cohort("chemistry").parent("research").obj(), cohort("physics").parent("research").obj(),
         cohort("llm").parent("research").weight(2.0).obj(),
         cohort("best-effort").parent("root").weight(0.5).obj()],
        [cq("chemistry-queue").cohort("chemistry").flavor("default", cpu="0").preemption(reclaim="LowerPriority").obj(),
         cq("physics-queue").cohort("physics").flavor("default", cpu="0").preemption(reclaim="LowerPriority").obj(),
         cq("llm-queue").cohort("llm").flavor("default", cpu="0").preemption(reclaim="LowerPriority").obj(),
         cq("best-effort-queue").cohort("best-effort").flavor("default", cpu="0").obj()],
        [on(f"be{i}", "best-effort-queue", priority=-1) for i in range(6)]
        + [on(f"ph{i}", "physics-queue", priority=-1) for i in range(6)],
        ("llm-queue", "1", 100),
        {"default/be0": "InCohortFairSharing"}  # equal candidates: by uid,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hierarchical_fair_preemption(case: Case) -> None:
    config = SchedulerConfig(fair_sharing=FairSharingConfig(preemption_strategies=case.strategies))  # type: ignore[arg-type]  # cases spell strategies as str
    w = world(*case.cohorts, *case.cqs, config=config)
    for a in case.admitted:
        w.apply(a)
    queue, cpu, priority = case.incoming
    w.apply(wl("default/in").queue(queue).priority(priority).at(5).pods("main", 1, cpu=cpu).obj())
    r = w.step(10.0, echo=False)
    assert {p.victim: p.reason for p in r.preemptions} == case.want


def _research_world():
    #            root (12 cpu)
    #   best-effort(0.5)    research
    #                 chemistry  physics  llm(2.0)
    return world(
        cohort("root").flavor("default", cpu="12").obj(), cohort("research").parent("root").obj(),
        cohort("chemistry").parent("research").obj(), cohort("physics").parent("research").obj(),
        cohort("llm").parent("research").weight(2.0).obj(), cohort("best-effort").parent("root").weight(0.5).obj(),
        cq("chemistry-queue").cohort("chemistry").flavor("default", cpu="0").preemption(reclaim="LowerPriority").obj(),
        cq("physics-queue").cohort("physics").flavor("default", cpu="0").preemption(reclaim="LowerPriority").obj(),
        cq("llm-queue").cohort("llm").flavor("default", cpu="0").preemption(reclaim="LowerPriority").obj(),
        cq("best-effort-queue").cohort("best-effort").flavor("default", cpu="0").obj(),
        config=FAIR,
    )


def test_preemption_enforces_fair_share_at_each_level() -> None:
    """Kueue integration test "using hierarchical cohorts / preempts workloads to enforce fair share"."""
    w = _research_world()
    queues = ["chemistry-queue", "physics-queue", "llm-queue", "best-effort-queue"]
    t = 0.0
    for i in range(6):
        for q in ("best-effort-queue", "physics-queue"):
            t += 1
            w.apply(wl(f"default/low-{q}-{i}").queue(q).priority(-1).at(t).pods("main", 1, cpu="1").obj())
    w.settle(t)
    assert {q: w.cq_status[q].reserving_workloads for q in queues} == {
        "chemistry-queue": 0, "physics-queue": 6, "llm-queue": 0, "best-effort-queue": 6}
    for i in range(6):
        for q in queues:
            t += 1
            w.apply(wl(f"default/high-{q}-{i}").queue(q).priority(100).at(t).pods("main", 1, cpu="1").obj())
    w.settle(t + 1)
    # parent root: best-effort 4 cpu (share 4/12/0.5), research 8; under research: 2, 2, 4 (llm weighs 2)
    assert {q: w.cq_status[q].reserving_workloads for q in queues} == {
        "chemistry-queue": 2, "physics-queue": 2, "llm-queue": 4, "best-effort-queue": 4}
    assert {p.victim.split("-", 1)[1].rsplit("-", 1)[0] for r in w.results for p in r.preemptions} == {
        "best-effort-queue", "physics-queue"}
    assert sum(1 for r in w.results for p in r.preemptions if "best-effort" in p.victim) == 2
    assert sum(1 for r in w.results for p in r.preemptions if "physics" in p.victim) == 4


def test_admission_respects_fair_share_in_nested_cohorts() -> None:
    """Kueue integration test "using hierarchical cohorts / admits workloads respecting fair share"."""
    w = world(
        cohort("root").obj(), cohort("first-left").parent("root").obj(), cohort("first-right").parent("root").obj(),
        cohort("second-left").parent("first-left").obj(), cohort("second-right").parent("first-left").obj(),
        cohort("bank").parent("first-right").flavor("default", cpu="10").obj(),
        cq("second-left").cohort("second-left").flavor("default", cpu="2").obj(),
        cq("second-right").cohort("second-right").flavor("default", cpu="2").obj(),
        config=FAIR,
    )
    t = 0.0
    for i in range(5):
        for q in ("second-left", "second-right"):
            t += 1
            w.apply(wl(f"default/{q}-{i}").queue(q).at(t).pods("main", 1, cpu="1").obj())
    w.settle(t)
    assert (w.cq_status["second-left"].reserving_workloads, w.cq_status["second-right"].reserving_workloads) == (5, 5)
    tree = w.state.cohorts
    share = {n: dominant_resource_share(tree[n].node).weighted_share() for n in ("first-left", "second-left", "bank")}
    assert share == pytest.approx({"first-left": 6000 / 14, "second-left": 3000 / 14, "bank": 0.0})
