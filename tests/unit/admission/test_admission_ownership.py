"""Sharded admission: a core decides only for the cohort trees it owns (core/ownership.py)."""

from __future__ import annotations

from collections import Counter

from admission_builders import cohort, cq, lq, wl
from admission_world import World, world

from services.admission.core.ownership import slot_of


def trees(owns=None) -> World:
    """Two trees: cohort "co" (queues a, b, 4 cpu each) and the cohort-less queue "solo" (2 cpu)."""
    return world(
        cohort("co").obj(),
        cq("a").cohort("co").flavor("default", cpu="4").obj(),
        cq("b").cohort("co").flavor("default", cpu="4").obj(),
        cq("solo").flavor("default", cpu="2").obj(),
        owns=owns,
    )


def submit(w: World) -> None:
    for i in range(3):
        w.apply(wl(f"default/a{i}").queue("a").at(float(i)).pods("main", 1, cpu="3").obj())
        w.apply(wl(f"default/s{i}").queue("solo").at(float(i)).pods("main", 1, cpu="1").obj())


def test_slots_are_stable_and_spread() -> None:
    assert slot_of("manager", "co", 1) == 0
    assert slot_of("manager", "co", 8) == slot_of("manager", "co", 8)  # no per-process salt (not hash())
    assert slot_of("manager", "co", 8) in range(8)
    spread = Counter(slot_of("manager", f"tree-{i}", 4) for i in range(400))
    assert set(spread) == {0, 1, 2, 3} and min(spread.values()) > 60


def test_a_core_decides_only_for_its_trees() -> None:
    w = trees(owns=lambda root: root == "co")
    submit(w)
    w.settle(10.0)
    # a's tree (8 cpu with b's lent quota) takes two of the 3-cpu workloads; solo is not ours
    assert w.statuses(["default/a0", "default/a1", "default/a2"]) == {
        "default/a0": "admitted", "default/a1": "admitted", "default/a2": "pending"}
    assert w.statuses([f"default/s{i}" for i in range(3)]) == dict.fromkeys([f"default/s{i}" for i in range(3)],
                                                                             "pending")
    decided = {d.workload for r in w.results for d in r.pending} | {d.workload for r in w.results for d in r.admissions}
    assert decided == {"default/a0", "default/a1", "default/a2"}  # no pending condition for solo's workloads
    assert set(w.cq_status) == {"a", "b"}
    assert set(w.lq_status) == {"default/a", "default/b"}
    assert w.state.owned_roots() == {"a": True, "b": True, "solo": False}
    assert not w.state.has_work(10.0)  # solo's heads do not keep the shell spinning


def test_two_shards_together_decide_what_one_core_decides() -> None:
    one = trees()
    submit(one)
    one.settle(10.0)
    halves = [trees(owns=lambda root: root == "co"), trees(owns=lambda root: root != "co")]
    for h in halves:
        submit(h)
        h.settle(10.0)
    keys = sorted(one.records)
    merged = {k: next((h.status(k) for h in halves if h.state.owns_workload(k)), None) for k in keys}
    assert merged == one.statuses(keys)
    assert {k for k in keys if halves[0].state.owns_workload(k)} == {"default/a0", "default/a1", "default/a2"}


def test_an_eviction_is_reported_by_the_owner_of_the_workloads_queue() -> None:
    for owner, reported in ((lambda root: root == "solo", True), (lambda root: root == "co", False)):
        w = trees(owns=owner)
        w.apply(wl("default/s0").queue("solo").pods("main", 1, cpu="1").reserved("solo", "default").obj())
        w.update("default/s0", active=False)  # deactivated while holding quota: evict it
        w.settle(1.0)
        got = [d.workload for r in w.results for d in r.evictions] + [d.workload for r in w.results
                                                                      for d in r.deactivations]
        assert bool(got) is reported, got


def test_a_cohort_edit_moves_a_queue_into_another_tree() -> None:
    w = trees(owns=lambda root: root == "co")
    assert w.state.owned_roots()["solo"] is False
    w.apply(cq("solo").cohort("co").flavor("default", cpu="2").obj())
    assert w.state.owned_roots()["solo"] is True


def test_a_workload_without_a_known_queue_belongs_to_the_empty_root() -> None:
    for owner, reported in ((lambda root: root == "", True), (lambda root: root == "co", False)):
        w = World(owns=owner)
        w.apply(lq("default/orphan", "nowhere"))
        w.apply(wl("default/x").queue("missing").pods("main", 1, cpu="1").obj())
        w.settle(1.0)
        assert bool([d for r in w.results for d in r.pending if d.workload == "default/x"]) is reported
