"""Fair sharing: dominant resource share, admission order by share, fair preemption (after Kueue)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from admission_builders import cohort, cq, wl
from admission_world import world

from services.admission.core import FairSharingConfig, SchedulerConfig, Workload
from services.admission.core.fair_share import DRS, compare_drs, dominant_resource_share

FAIR = SchedulerConfig(fair_sharing=FairSharingConfig())


def base_cqs(weights: dict[str, float] | None = None) -> tuple:
    weights = weights or {}
    out = [
        cq(name).cohort("all").flavor("default", cpu="3").preemption(
            within="LowerPriority", reclaim="Any", borrow="LowerPriority", threshold=-3
        ).weight(weights.get(name, 1.0)).obj()
        for name in ("a", "b", "c")
    ]
    out.append(cq("preemptible").cohort("all").flavor("default", cpu="0").obj())
    return tuple(out)


def on(name: str, queue: str, cpu: str = "1", priority: int = 0) -> Workload:
    return wl(f"default/{name}").queue(queue).priority(priority).pods("main", 1, cpu=cpu).reserved(queue, "default").obj()


def units(queue: str, n: int) -> list[Workload]:
    return [on(f"{queue}{i}", queue) for i in range(1, n + 1)]


@dataclass
class Case:
    id: str
    admitted: list[Workload]
    incoming: tuple[str, str]  # (queue, cpu)
    want: dict[str, str]
    strategies: tuple[str, ...] = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


CASES = [
    Case("reclaim nominal from user using the most", units("a", 3) + units("b", 5) + units("c", 1), ("c", "1"),
         {"default/b1": "InCohortReclamation"}),
    Case("reclaim borrowable quota from user using the most", units("a", 3) + units("b", 5) + units("c", 1), ("a", "1"),
         {"default/b1": "InCohortFairSharing"}),
    Case(
        "preempt one from each CQ borrowing",
        [on("a1", "a", "0.5"), on("a2", "a", "0.5"), on("a3", "a", "3"), on("b1", "b", "0.5"), on("b2", "b", "0.5"), on("b3", "b", "3")],
        ("c", "2"),
        {"default/a1": "InCohortReclamation", "default/b1": "InCohortReclamation"},
    ),
    Case("can't preempt when everyone under nominal", units("a", 3) + units("b", 3) + units("c", 3), ("c", "1"), {}),
    Case("can't preempt when it would switch the imbalance", units("a", 3) + units("b", 5), ("a", "2"), {}),
    Case(
        "can preempt lower priority workloads from same CQ",
        [on("a1_low", "a", priority=-1), on("a2_low", "a", priority=-1), on("a3", "a"), on("a4", "a"), *units("b", 5)],
        ("a", "2"),
        {"default/a1_low": "InClusterQueue", "default/a2_low": "InClusterQueue"},
    ),
    Case(
        "can preempt a combination of same CQ and highest user",
        [on("a_low", "a", priority=-1), on("a2", "a"), on("a3", "a"), *units("b", 6)],
        ("a", "2"),
        {"default/a_low": "InClusterQueue", "default/b1": "InCohortFairSharing"},
    ),
    Case("preempt huge workload if there is no other option, as long as the target CQ gets a lower share",
         [on("b1", "b", "9")], ("a", "2"), {"default/b1": "InCohortReclamation"}),
    Case("can't preempt huge workload if the incoming is also huge", [on("a1", "a", "2"), on("b1", "b", "7")], ("a", "5"), {}),
    Case("can't preempt 2 smaller workloads if the incoming is huge",
         [on("b1", "b", "2"), on("b2", "b", "2"), on("b3", "b", "3")], ("a", "6"), {}),
    Case(
        "prefer to preempt workloads that don't make the target CQ have the biggest share",
        [on("b1", "b", "2"), on("b2", "b", "1"), on("b3", "b", "2"), on("c1", "c", "1")],
        ("a", "3.5"),
        {"default/b2": "InCohortFairSharing"},
    ),
    Case(
        "preempt from different cluster queues if the end result has a smaller max share",
        [on("b1", "b", "2"), on("b2", "b", "2.5"), on("c1", "c", "2"), on("c2", "c", "2.5")],
        ("a", "3.5"),
        {"default/b1": "InCohortFairSharing", "default/c1": "InCohortFairSharing"},
    ),
    Case("scenario above does not flap", [on("a1", "a", "3.5"), on("b2", "b", "2.5"), on("c2", "c", "2.5")], ("b", "2"), {}),
    Case(
        "workloads under priority threshold not capriciously preempted",
        units("a", 3) + units("b", 3) + [on(f"preemptible{i}", "preemptible", priority=-3) for i in (1, 2, 3)],
        ("a", "2"),
        {},
    ),
    Case(
        "preempt lower priority first, even if big (LessThanInitialShare)",
        [on("a1", "a", "3"), on("b_low", "b", "5", 0), on("b_high", "b", "1", 1)],
        ("a", "1"),
        {"default/b_low": "InCohortFairSharing"},
        strategies=("LessThanInitialShare",),
    ),
    Case(
        "preempt workload that doesn't transfer the imbalance, even if high priority (LessThanOrEqualToFinalShare)",
        [on("a1", "a", "3"), on("b_low", "b", "5", 0), on("b_high", "b", "1", 1)],
        ("a", "1"),
        {"default/b_high": "InCohortFairSharing"},
        strategies=("LessThanOrEqualToFinalShare",),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fair_preemption(case: Case) -> None:
    config = SchedulerConfig(fair_sharing=FairSharingConfig(preemption_strategies=case.strategies))  # type: ignore[arg-type]  # cases spell strategies as str
    w = world(*base_cqs(), config=config)
    for a in case.admitted:
        w.apply(a)
    queue, cpu = case.incoming
    w.apply(wl("default/in").queue(queue).at(5).pods("main", 1, cpu=cpu).obj())
    r = w.step(10.0, echo=False)
    assert {p.victim: p.reason for p in r.preemptions} == case.want


@pytest.mark.parametrize(
    ("fair", "first"),
    [(False, "default/a-next"), (True, "default/b-next")],
    ids=["classic-order-is-fifo", "fair-sharing-prefers-the-lower-share"],
)
def test_admission_order_by_share(fair: bool, first: str) -> None:
    lender = cq("lender").cohort("co").flavor("default", cpu="5").obj()
    a = cq("a").cohort("co").flavor("default", cpu="0").obj()
    b = cq("b").cohort("co").flavor("default", cpu="0").obj()
    w = world(lender, a, b, config=FAIR if fair else None)
    w.apply(on("a-running", "a", "4"))
    w.apply(wl("default/a-next").queue("a").at(1).pods("main", 1, cpu="1").obj())
    w.apply(wl("default/b-next").queue("b").at(2).pods("main", 1, cpu="1").obj())
    r = w.step(3.0)
    assert [d.workload for d in r.admissions] == [first]


def test_weights_scale_the_share() -> None:
    lender = cq("lender").cohort("co").flavor("default", cpu="4").obj()
    a = cq("a").cohort("co").flavor("default", cpu="0").weight(2.0).obj()
    b = cq("b").cohort("co").flavor("default", cpu="0").weight(1.0).obj()
    w = world(lender, a, b, config=FAIR)
    w.apply(on("a-running", "a", "1"))
    w.apply(on("b-running", "b", "1"))
    w.apply(wl("default/a-next").queue("a").at(2).pods("main", 1, cpu="2").obj())
    w.apply(wl("default/b-next").queue("b").at(1).pods("main", 1, cpu="2").obj())
    r = w.step(3.0)
    assert [d.workload for d in r.admissions] == ["default/a-next"]  # a's share counts half


def test_hierarchical_tournament_compares_subtrees() -> None:
    w = world(
        cohort("left").parent("root").obj(),
        cohort("right").parent("root").obj(),
        cohort("root").flavor("default", cpu="4").obj(),
        cq("l1").cohort("left").flavor("default", cpu="0").obj(),
        cq("l2").cohort("left").flavor("default", cpu="0").obj(),
        cq("r1").cohort("right").flavor("default", cpu="0").obj(),
        config=FAIR,
    )
    w.apply(on("l1-running", "l1", "2"))
    w.apply(wl("default/l2-next").queue("l2").at(1).pods("main", 1, cpu="2").obj())
    w.apply(wl("default/r1-next").queue("r1").at(2).pods("main", 1, cpu="2").obj())
    r = w.step(3.0)
    # l2 alone has no share, but its cohort "left" already borrows 2 of the root's 4
    assert [d.workload for d in r.admissions] == ["default/r1-next"]
    assert w.messages["default/l2-next"] == "Workload no longer fits after processing another workload"


def test_weighted_share_in_status() -> None:
    lender = cq("lender").cohort("co").flavor("default", cpu="4").obj()
    a = cq("a").cohort("co").flavor("default", cpu="0").obj()
    w = world(lender, a, config=FAIR)
    w.apply(wl("default/x").queue("a").pods("main", 1, cpu="2").obj())
    w.settle(1.0)
    # borrowing 2 cpu of the 4 the cohort could lend: 2 * 1000 / 4 = 500
    assert w.cq_status["a"].weighted_share == 500.0
    assert w.cq_status["lender"].weighted_share == 0.0


def test_compare_drs_zero_weight() -> None:
    borrowing_zero_weight = DRS(0.0, 10.0, "cpu", True)
    big_but_weighted = DRS(1.0, 1e9, "cpu", True)
    assert compare_drs(borrowing_zero_weight, big_but_weighted) == 1
    assert compare_drs(big_but_weighted, borrowing_zero_weight) == -1
    assert compare_drs(DRS(0.0), DRS(1.0)) == 0  # not borrowing: both zero


def test_dominant_resource_picks_the_largest_ratio() -> None:
    w = world(
        cq("lender").cohort("co").flavor("default", cpu="10", memory="10Gi").obj(),
        cq("a").cohort("co").flavor("default", cpu="0", memory="0").obj(),
    )
    w.apply(wl("default/x").queue("a").pods("main", 1, cpu="1", memory="5Gi").obj())
    w.settle(1.0)
    drs = dominant_resource_share(w.state.cqs["a"].node)
    assert (drs.dominant, drs.weighted_share()) == ("memory", 500.0)
