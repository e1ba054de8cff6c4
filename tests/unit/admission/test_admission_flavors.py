"""Flavor assignment: order, fungibility, taints, affinity, resource groups (after Kueue flavorassigner_test)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from admission_builders import cq, flavor, fq, wl
from admission_world import world

from services.admission.core import (
    ClusterQueue,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSet,
    Taint,
    Toleration,
    Workload,
)

FLAVORS = (
    flavor("default"),
    flavor("on-demand", {"instance": "on-demand"}),
    flavor("spot", {"instance": "spot"}),
    flavor("spot-tainted", {"instance": "spot"}, taints=(Taint(key="key", value="val", effect="NoSchedule"),)),
    flavor("model-a"),
)


# min_count (and priority below) are passed by name next to **req, so no resource name can stand for them.
def pending(name: str = "in", queue: str = "cq", priority: int = 0, **req: str) -> Workload:
    return wl(f"default/{name}").queue(queue).priority(priority).at(5).pods("main", 1, min_count=None, **req).obj()


def on(queue: str, name: str, flavors: str | dict, priority: int = 0, **req: str) -> Workload:
    return wl(f"default/{name}").queue(queue).priority(priority).pods("main", 1, min_count=None, **req).reserved(queue, flavors).obj()


@dataclass
class Case:
    id: str
    queues: tuple[ClusterQueue, ...]
    incoming: Workload
    admitted: list[Workload] = field(default_factory=list)
    want_flavors: dict[str, dict[str, str]] | None = None  # None: not admitted
    want_borrowing: bool = False
    want_message: str | None = None
    want_reason: str | None = None
    want_preempted: tuple[str, ...] = ()


TWO = (fq("on-demand", cpu="4"), fq("spot", cpu="8"))
LENDER = cq("lender").cohort("co").flavor("on-demand", cpu="10").obj()

CASES = [
    Case("first flavor fits", (cq("cq").group(*TWO).obj(),), pending(cpu="3"), want_flavors={"main": {"cpu": "on-demand"}}),
    Case(
        "first flavor full, second fits",
        (cq("cq").group(*TWO).obj(),),
        pending(cpu="6"),
        want_flavors={"main": {"cpu": "spot"}},
    ),
    Case(
        "neither fits: the message lists both flavors",
        (cq("cq").group(*TWO).obj(),),
        pending(cpu="3"),
        admitted=[on("cq", "a", "on-demand", cpu="2"), on("cq", "b", "spot", cpu="6")],
        want_message="couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, "
        "1 more needed, insufficient unused quota for cpu in flavor spot, 1 more needed",
        want_reason="WaitingForQuota",
    ),
    Case(
        "exceeds every flavor's maximum capacity",
        (cq("cq").group(*TWO).obj(),),
        pending(cpu="9"),
        want_message="insufficient quota for cpu in flavor spot, previously considered podsets requests (0) + "
        "current podset request (9) > maximum capacity (8)",
        want_reason="ExceedsMaxQuota",
    ),
    Case(
        "whenCanBorrow MayStopSearch stops at the first flavor, borrowing",
        (cq("cq").cohort("co").group(fq("on-demand", cpu="2"), fq("spot", cpu="8")).obj(), LENDER),
        pending(cpu="5"),
        want_flavors={"main": {"cpu": "on-demand"}},
        want_borrowing=True,
    ),
    Case(
        "whenCanBorrow TryNextFlavor prefers a flavor without borrowing",
        (cq("cq").cohort("co").group(fq("on-demand", cpu="2"), fq("spot", cpu="8")).fungibility(borrow="TryNextFlavor").obj(), LENDER),
        pending(cpu="5"),
        want_flavors={"main": {"cpu": "spot"}},
    ),
    Case(
        "whenCanPreempt TryNextFlavor (default) takes the next flavor that fits",
        (cq("cq").group(*TWO).preemption(within="LowerPriority").obj(),),
        pending(priority=5, cpu="4"),
        admitted=[on("cq", "low", "on-demand", priority=0, cpu="4")],
        want_flavors={"main": {"cpu": "spot"}},
    ),
    Case(
        "whenCanPreempt MayStopSearch preempts in the first flavor",
        (cq("cq").group(*TWO).preemption(within="LowerPriority").fungibility(preempt="MayStopSearch").obj(),),
        pending(priority=5, cpu="4"),
        admitted=[on("cq", "low", "on-demand", priority=0, cpu="4")],
        want_preempted=("default/low",),
    ),
    Case(
        "BorrowingOverPreemption (default): borrow in the second flavor rather than preempt in the first",
        (
            cq("cq").cohort("co").group(fq("on-demand", cpu="4"), fq("spot", cpu="0")).preemption(within="LowerPriority")
            .fungibility(borrow="TryNextFlavor").obj(),
            cq("lender").cohort("co").flavor("spot", cpu="10").obj(),
        ),
        pending(priority=5, cpu="4"),
        admitted=[on("cq", "low", "on-demand", priority=0, cpu="4")],
        want_flavors={"main": {"cpu": "spot"}},
        want_borrowing=True,
    ),
    Case(
        "PreemptionOverBorrowing: preempt in the first flavor rather than borrow in the second",
        (
            cq("cq").cohort("co").group(fq("on-demand", cpu="4"), fq("spot", cpu="0")).preemption(within="LowerPriority")
            .fungibility(borrow="TryNextFlavor", preference="PreemptionOverBorrowing").obj(),
            cq("lender").cohort("co").flavor("spot", cpu="10").obj(),
        ),
        pending(priority=5, cpu="4"),
        admitted=[on("cq", "low", "on-demand", priority=0, cpu="4")],
        want_preempted=("default/low",),
    ),
    Case(
        "untolerated taint skips the flavor",
        (cq("cq").group(fq("spot-tainted", cpu="4"), fq("spot", cpu="4")).obj(),),
        pending(cpu="1"),
        want_flavors={"main": {"cpu": "spot"}},
    ),
    Case(
        "untolerated taint is the reason when no flavor is left",
        (cq("cq").group(fq("spot-tainted", cpu="4")).obj(),),
        pending(cpu="1"),
        want_message="couldn't assign flavors to pod set main: untolerated taint key=val:NoSchedule in flavor spot-tainted",
        want_reason="NoMatchingFlavor",
    ),
    Case(
        "a toleration lets the workload use the tainted flavor",
        (cq("cq").group(fq("spot-tainted", cpu="4"), fq("spot", cpu="4")).obj(),),
        wl("default/in").queue("cq").podset(
            PodSet(name="main", count=1, requests={"cpu": 1000}, tolerations=(Toleration(key="key", operator="Exists"),))
        ).obj(),
        want_flavors={"main": {"cpu": "spot-tainted"}},
    ),
    Case(
        "node selector picks the flavor with matching labels",
        (cq("cq").group(fq("on-demand", cpu="4"), fq("spot", cpu="4")).obj(),),
        wl("default/in").queue("cq").podset(PodSet(name="main", count=1, requests={"cpu": 1000}, node_selector={"instance": "spot"})).obj(),
        want_flavors={"main": {"cpu": "spot"}},
    ),
    Case(
        "required node affinity picks the flavor with matching labels",
        (cq("cq").group(fq("on-demand", cpu="4"), fq("spot", cpu="4")).obj(),),
        wl("default/in").queue("cq").podset(
            PodSet(
                name="main",
                count=1,
                requests={"cpu": 1000},
                required_affinity=(
                    NodeSelectorTerm(match_expressions=(NodeSelectorRequirement(key="instance", operator="NotIn", values=("on-demand",)),)),
                ),
            )
        ).obj(),
        want_flavors={"main": {"cpu": "spot"}},
    ),
    Case(
        "node selector keys the flavor does not define are ignored",
        (cq("cq").group(fq("default", cpu="4")).obj(),),
        wl("default/in").queue("cq").podset(PodSet(name="main", count=1, requests={"cpu": 1000}, node_selector={"zone": "a"})).obj(),
        want_flavors={"main": {"cpu": "default"}},
    ),
    Case(
        "resources of one group share a flavor; other groups choose their own",
        (cq("cq").group(fq("on-demand", cpu="4", memory="4Gi"), fq("spot", cpu="8", memory="8Gi")).group(fq("model-a", **{"nvidia.com/gpu": "2"})).obj(),),
        pending(priority=0, cpu="2", memory="6Gi", **{"nvidia.com/gpu": "1"}),
        want_flavors={"main": {"cpu": "spot", "memory": "spot", "nvidia.com/gpu": "model-a"}},
    ),
    Case(
        "a resource the queue does not cover",
        (cq("cq").flavor("default", cpu="4").obj(),),
        pending(priority=0, cpu="1", **{"example.com/gpu": "1"}),
        want_message="couldn't assign flavors to pod set main: resource example.com/gpu unavailable in ClusterQueue",
        want_reason="NoMatchingFlavor",
    ),
    Case(
        "a zero request for a resource the queue does not cover is ignored",
        (cq("cq").flavor("default", cpu="4").obj(),),
        pending(priority=0, cpu="1", **{"example.com/gpu": "0"}),
        want_flavors={"main": {"cpu": "default"}},
    ),
    Case(
        "pod sets count against each other's flavor usage",
        (cq("cq").group(fq("on-demand", cpu="6"), fq("spot", cpu="8")).obj(),),
        wl("default/in").queue("cq").pods("driver", 1, cpu="4").pods("workers", 1, cpu="4").obj(),
        want_flavors={"driver": {"cpu": "on-demand"}, "workers": {"cpu": "spot"}},
    ),
    Case(
        "the pods resource is counted when the queue covers it",
        (cq("cq").flavor("default", cpu="10", pods="2").obj(),),
        wl("default/in").queue("cq").pods("main", 3, cpu="1").obj(),
        want_message="couldn't assign flavors to pod set main: insufficient quota for pods in flavor default, "
        "previously considered podsets requests (0) + current podset request (3) > maximum capacity (2)",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_flavor_assignment(case: Case) -> None:
    w = world(*FLAVORS, *case.queues)
    for a in case.admitted:
        w.apply(a)
    w.apply(case.incoming)
    r = w.step(10.0, echo=False)
    admitted = {d.workload: d for d in r.admissions}
    if case.want_flavors is None:
        assert "default/in" not in admitted
    else:
        d = admitted["default/in"]
        assert {p.name: dict(p.flavors) for p in d.pod_sets} == case.want_flavors
        assert d.borrowing == case.want_borrowing
    assert tuple(p.victim for p in r.preemptions) == case.want_preempted
    if case.want_message is not None:
        assert case.want_message in w.messages["default/in"]
    if case.want_reason is not None:
        assert w.reasons["default/in"] == case.want_reason


def test_flavor_scan_resumes_where_it_stopped() -> None:
    """Kueue FlavorFungibilityPreserveScanProgress: a workload skipped after choosing a flavor tries the
    next flavor in the following cycle, even if the first one has room again."""
    y = cq("y").cohort("co").flavor("on-demand", cpu="2").obj()
    x = cq("x").cohort("co").group(fq("on-demand", cpu="0"), fq("spot", cpu="2")).obj()
    w = world(*FLAVORS, y, x)
    w.apply(wl("default/y1").queue("y").at(1).pods("main", 1, cpu="2").obj())
    w.apply(wl("default/x1").queue("x").at(2).pods("main", 1, cpu="1").obj())
    r = w.step(3.0)
    assert [d.workload for d in r.admissions] == ["default/y1"]
    assert w.messages["default/x1"] == "Workload no longer fits after processing another workload"
    w.delete("default/y1")
    w.settle(4.0)
    assert w.flavors("default/x1") == {"main": {"cpu": "spot"}}


def test_fresh_scan_starts_from_the_first_flavor() -> None:
    y = cq("y").cohort("co").flavor("on-demand", cpu="2").obj()
    x = cq("x").cohort("co").group(fq("on-demand", cpu="0"), fq("spot", cpu="2")).obj()
    w = world(*FLAVORS, y, x)
    w.apply(wl("default/x1").queue("x").at(2).pods("main", 1, cpu="1").obj())
    w.settle(3.0)
    assert w.flavors("default/x1") == {"main": {"cpu": "on-demand"}}
