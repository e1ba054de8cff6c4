"""Queueing: routing, FIFO strategies, ordering, parking and what brings workloads back."""

from __future__ import annotations

import pytest
from admission_builders import cohort, cq, flavor, lq, wl
from admission_world import World, world
from msgspec.structs import replace

from services.admission.core import (
    Deleted,
    LabelSelector,
    LabelSelectorRequirement,
    Namespace,
    SchedulerConfig,
)


def job(name: str, cpu: str, at: float = 0.0, priority: int = 0, queue: str = "cq"):
    return wl(f"default/{name}").queue(queue).priority(priority).at(at).pods("main", 1, cpu=cpu).obj()


def run(w: World, *workloads, now: float = 0.0) -> None:
    for x in workloads:
        w.apply(x)
    w.settle(now)


@pytest.mark.parametrize(
    ("strategy", "want_w3"),
    [("StrictFIFO", "pending"), ("BestEffortFIFO", "admitted")],
    ids=["strict-fifo-head-blocks", "best-effort-fifo-skips-the-head"],
)
def test_fifo_strategies(strategy: str, want_w3: str) -> None:
    q = cq("cq").flavor("default", cpu="6")
    w = world((q.strict() if strategy == "StrictFIFO" else q).obj())
    run(w, job("w1", "4", 0), job("w2", "4", 1), job("w3", "2", 2))
    assert w.statuses(["default/w1", "default/w2", "default/w3"]) == {
        "default/w1": "admitted",
        "default/w2": "pending",
        "default/w3": want_w3,
    }
    w.finish("default/w1")
    w.settle(3)
    assert w.status("default/w2") == "admitted"
    assert w.status("default/w3") == "admitted"


def test_strict_fifo_blocked_head_does_not_spin() -> None:
    w = world(cq("cq").strict().flavor("default", cpu="6").obj())
    run(w, job("w1", "4", 0), job("w2", "4", 1))
    assert not w.state.has_scheduling_work()
    assert w.state.queue_dump("cq") == (["default/w2"], [])


def test_priority_then_creation_order() -> None:
    w = world(cq("cq").flavor("default", cpu="2").obj())
    run(w, job("running", "2", 0))
    run(w, job("old-low", "2", 1, priority=0), job("new-low", "2", 2, priority=0), job("new-high", "2", 3, priority=5))
    order = []
    for i, key in enumerate(["default/running", "default/new-high", "default/old-low"]):
        w.finish(key)
        w.settle(10 + i)
        order.append(next(k for k, r in w.records.items() if r.admission is not None and not r.finished))
    assert order == ["default/new-high", "default/old-low", "default/new-low"]


@pytest.mark.parametrize(
    ("timestamp", "first"),
    [("Eviction", "default/fresh"), ("Creation", "default/evicted")],
    ids=["eviction-timestamp", "creation-timestamp"],
)
def test_requeued_workloads_order_by_eviction_time(timestamp: str, first: str) -> None:
    w = world(cq("cq").flavor("default", cpu="2").obj(), config=SchedulerConfig(requeuing_timestamp=timestamp))  # type: ignore[arg-type]  # parametrized with the two literals
    run(w, job("running", "2", 0))
    evicted = wl("default/evicted").queue("cq").at(1).pods("main", 1, cpu="2").obj()
    w.apply(evicted)
    w.update("default/evicted", evicted_reason="PodsReadyTimeout", evicted_time=20.0)
    w.apply(job("fresh", "2", 5))
    w.settle(21)
    w.finish("default/running")
    w.settle(22)
    assert w.status(first) == "admitted"


def test_backoff_until_requeue_at() -> None:
    w = world(cq("cq").flavor("default", cpu="2").obj())
    w.apply(replace(wl("default/w").queue("cq").pods("main", 1, cpu="1").obj(), requeue_at=50.0))
    w.settle(10)
    assert w.status("default/w") == "pending"
    assert w.state.next_wakeup() == 50.0
    w.settle(50)
    assert w.status("default/w") == "admitted"
    assert w.state.next_wakeup() is None


def test_equivalent_workloads_are_parked_together() -> None:
    w = world(cq("cq").flavor("default", cpu="4").obj())
    run(w, job("running", "4", 0))
    run(w, job("a", "2", 1), job("b", "2", 2), job("c", "2", 3), job("small", "1", 4), now=5)
    # one evaluation of "a" parked "b" and "c" with it; "small" was still tried
    tried = [p.workload for r in w.results for p in r.pending]
    assert tried.count("default/b") == 0 and tried.count("default/c") == 0
    assert "default/a" in tried and "default/small" in tried
    assert w.state.queue_dump("cq") == ([], ["default/a", "default/b", "default/c", "default/small"])
    w.finish("default/running")
    w.settle(6)
    assert w.statuses(["default/a", "default/b", "default/small"]) == {
        "default/a": "admitted",
        "default/b": "admitted",
        "default/small": "pending",
    }


BACK_CASES = {
    "a workload finishes": lambda w: w.finish("default/running"),
    "a workload is deleted": lambda w: w.delete("default/running"),
    "the queue's quota grows": lambda w: w.apply(cq("cq").cohort("co").flavor("default", cpu="4").obj()),
    "a lender joins the cohort": lambda w: (
        w.apply(cq("lender").cohort("co").flavor("default", cpu="2").obj()),
        w.apply(lq("default/lender", "lender")),
    ),
    "the cohort gets quota": lambda w: w.apply(cohort("co").flavor("default", cpu="2").obj()),
}


@pytest.mark.parametrize("change", list(BACK_CASES), ids=list(BACK_CASES))
def test_parked_workloads_come_back(change: str) -> None:
    w = world(cq("cq").cohort("co").flavor("default", cpu="2").obj())
    run(w, job("running", "2", 0), job("parked", "2", 1), now=1)
    assert w.state.queue_dump("cq") == ([], ["default/parked"])
    BACK_CASES[change](w)
    w.settle(2)
    assert w.status("default/parked") == "admitted"


def test_a_workload_admitted_elsewhere_does_not_bring_parked_back() -> None:
    w = world(cq("cq").flavor("default", cpu="2").obj(), cq("other").flavor("default", cpu="2").obj())
    run(w, job("running", "2", 0), job("parked", "2", 1), now=1)
    run(w, job("elsewhere", "1", 2, queue="other"), now=2)
    assert w.state.queue_dump("cq") == ([], ["default/parked"])


BLOCKERS = [
    ("no local queue", "main", [], "Misconfigured", "LocalQueue main doesn't exist"),
    ("stopped local queue", "stopped", [lq("default/stopped", "cq", stop="Hold")], "Suspended", "LocalQueue stopped is stopped"),
    ("no cluster queue", "dangling", [lq("default/dangling", "missing")], "Misconfigured", "ClusterQueue missing doesn't exist"),
    ("held cluster queue", "held", [cq("held").flavor("default", cpu="2").stop("Hold").obj()], "Suspended", "ClusterQueue held is stopped"),
    (
        "inactive cluster queue (missing flavor)",
        "broken",
        [cq("broken").flavor("absent", cpu="2").obj()],
        "Suspended",
        "ClusterQueue broken is inactive",
    ),
]


@pytest.mark.parametrize(("case", "queue", "objects", "reason", "message"), BLOCKERS, ids=[b[0] for b in BLOCKERS])
def test_why_a_workload_cannot_be_tried(case: str, queue: str, objects: list, reason: str, message: str) -> None:
    w = world(cq("cq").flavor("default", cpu="2").obj(), *objects)
    run(w, job("w", "1", 0, queue=queue))
    assert (w.status("default/w"), w.reasons["default/w"], w.messages["default/w"]) == ("pending", reason, message)


def test_local_queue_created_later_admits() -> None:
    w = world(cq("cq").flavor("default", cpu="2").obj())
    run(w, job("w", "1", 0, queue="late"))
    assert w.messages["default/w"] == "LocalQueue late doesn't exist"
    w.apply(lq("default/late", "cq"))
    w.settle(1)
    assert w.status("default/w") == "admitted"


def test_restarting_a_stopped_local_queue_admits() -> None:
    w = world(cq("cq").flavor("default", cpu="2").obj(), lq("default/q", "cq", stop="Hold"))
    run(w, job("w", "1", 0, queue="q"))
    assert w.status("default/w") == "pending"
    w.apply(lq("default/q", "cq"))
    w.settle(1)
    assert w.status("default/w") == "admitted"


SELECTOR = LabelSelector(match_expressions=(LabelSelectorRequirement(key="team", operator="In", values=("a",)),))


def test_namespace_selector() -> None:
    w = World(
        flavor("default"),
        Namespace(name="ns-a", labels={"team": "a"}),
        Namespace(name="ns-b", labels={"team": "b"}),
        cq("cq").selector(SELECTOR).flavor("default", cpu="4").obj(),
        lq("ns-a/main", "cq"),
        lq("ns-b/main", "cq"),
    )
    run(w, wl("ns-a/w").queue("main").pods("main", 1, cpu="1").obj(), wl("ns-b/w").queue("main").pods("main", 1, cpu="1").obj())
    assert w.statuses(["ns-a/w", "ns-b/w"]) == {"ns-a/w": "admitted", "ns-b/w": "pending"}
    assert (w.reasons["ns-b/w"], w.messages["ns-b/w"]) == (
        "Misconfigured",
        "workload namespace doesn't match ClusterQueue selector",
    )
    w.apply(Namespace(name="ns-b", labels={"team": "a"}))
    w.settle(1)
    assert w.status("ns-b/w") == "admitted"


def test_nil_namespace_selector_matches_nothing() -> None:
    w = world(cq("cq").selector(None).flavor("default", cpu="4").obj())
    run(w, job("w", "1"))
    assert w.messages["default/w"] == "workload namespace doesn't match ClusterQueue selector"


def test_missing_namespace() -> None:
    w = World(flavor("default"), cq("cq").flavor("default", cpu="4").obj(), lq("ghost/main", "cq"))
    run(w, wl("ghost/w").queue("main").pods("main", 1, cpu="1").obj())
    assert w.messages["ghost/w"] == 'workload namespace "ghost" does not exist: namespaces "ghost" not found'


def test_a_namespace_that_appears_brings_back_the_parked_workloads_of_every_queue() -> None:
    """requeue_all is resolved once at the next cycle (not a pass per namespace): every queue
    holding a parked workload of the missing namespace is tried again, others are left alone."""
    w = World(flavor("default"), cq("a").flavor("default", cpu="4").obj(), cq("b").flavor("default", cpu="4").obj(),
              cq("idle").flavor("default", cpu="4").obj(), lq("ghost/qa", "a"), lq("ghost/qb", "b"))
    run(w, wl("ghost/wa").queue("qa").pods("main", 1, cpu="1").obj(),
        wl("ghost/wb").queue("qb").pods("main", 1, cpu="1").obj())
    assert w.statuses(["ghost/wa", "ghost/wb"]) == {"ghost/wa": "pending", "ghost/wb": "pending"}
    w.apply(Namespace(name="other", labels={}))
    w.apply(Namespace(name="ghost", labels={}))
    w.settle(1)
    assert w.statuses(["ghost/wa", "ghost/wb"]) == {"ghost/wa": "admitted", "ghost/wb": "admitted"}


def test_cohort_admits_greedily_within_a_cycle() -> None:
    """Heads of several queues in one cohort: admitted in order while they still fit."""
    w = world(
        cq("a").cohort("co").flavor("default", cpu="2").obj(),
        cq("b").cohort("co").flavor("default", cpu="2").obj(),
        cq("c").cohort("co").flavor("default", cpu="2").obj(),
    )
    for x in (job("a1", "3", 0, queue="a"), job("b1", "2", 1, queue="b"), job("c1", "2", 2, queue="c")):
        w.apply(x)
    r = w.step(3)
    # b1 and c1 do not borrow and go first; a1 (borrowing) no longer fits
    assert [d.workload for d in r.admissions] == ["default/b1", "default/c1"]
    assert w.messages["default/a1"] == "Workload no longer fits after processing another workload"


def test_non_borrowing_entries_go_before_higher_priority_borrowing_ones() -> None:
    w = world(cq("a").cohort("co").flavor("default", cpu="2").obj(), cq("b").cohort("co").flavor("default", cpu="2").obj())
    w.apply(job("borrower", "3", 0, priority=100, queue="a"))
    w.apply(job("modest", "2", 1, priority=0, queue="b"))
    r = w.step(2)
    assert [d.workload for d in r.admissions] == ["default/modest"]


def test_deleted_cluster_queue_and_back() -> None:
    w = world(cq("cq").flavor("default", cpu="2").obj())
    run(w, job("running", "2", 0), job("waiting", "1", 1), now=1)
    w.apply(Deleted(kind="ClusterQueue", name="cq"))
    w.settle(2)
    assert w.messages["default/waiting"] == "ClusterQueue cq doesn't exist"
    w.apply(cq("cq").flavor("default", cpu="3").obj())
    w.settle(3)
    assert w.status("default/waiting") == "admitted"  # the running workload is accounted again
    assert w.cq_status["cq"].reserving_workloads == 2
