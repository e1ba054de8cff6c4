"""Quota through cohort trees: nominal, borrowing and lending limits at every level (resource_node.go)."""

from __future__ import annotations

import pytest
from admission_builders import cohort, cq, wl
from admission_world import world

from services.admission.core import Deleted
from services.admission.core.quota import available, potential_available

FR = ("default", "cpu")


def reserved(name: str, queue: str, cpu: str):
    return wl(f"default/{name}").queue(queue).pods("main", 1, cpu=cpu).reserved(queue, "default").obj()


CASES = [
    (
        "flat cohort: everything unused is shared",
        [cq("a").cohort("co").flavor("default", cpu="5").obj(), cq("b").cohort("co").flavor("default", cpu="3").obj()],
        [reserved("x", "b", "1")],
        {"a": (7, 8), "b": (7, 8)},
    ),
    (
        "borrowing limit caps what a queue takes from the cohort",
        [cq("a").cohort("co").flavor("default", cpu=("5", "2")).obj(), cq("b").cohort("co").flavor("default", cpu="10").obj()],
        [],
        {"a": (7, 7), "b": (15, 15)},
    ),
    (
        "lending limit keeps part of the quota local",
        [cq("a").cohort("co").flavor("default", cpu="5").obj(), cq("b").cohort("co").flavor("default", cpu=("3", None, "1")).obj()],
        [],
        {"a": (6, 6), "b": (8, 8)},
    ),
    (
        "local quota used first, then the cohort",
        [cq("a").cohort("co").flavor("default", cpu=("4", None, "1")).obj(), cq("b").cohort("co").flavor("default", cpu="2").obj()],
        [reserved("x", "a", "4")],
        {"a": (2, 6), "b": (2, 3)},
    ),
    (
        "hierarchical cohorts add their own quota",
        [
            cohort("org").flavor("default", cpu="2").obj(),
            cohort("dept").parent("org").flavor("default", cpu="4").obj(),
            cq("t1").cohort("dept").flavor("default", cpu="1").obj(),
            cq("t2").cohort("dept").flavor("default", cpu="1").obj(),
        ],
        [reserved("x", "t1", "5")],
        {"t1": (3, 8), "t2": (3, 8)},
    ),
    (
        "a cohort's lending limit bounds what leaves its subtree",
        [
            cohort("left").parent("root").flavor("default", cpu=("4", None, "1")).obj(),
            cohort("right").parent("root").obj(),
            cq("l").cohort("left").flavor("default", cpu="0").obj(),
            cq("r").cohort("right").flavor("default", cpu="0").obj(),
        ],
        [],
        {"l": (4, 4), "r": (1, 1)},
    ),
    (
        "a cohort's borrowing limit bounds what enters its subtree",
        [
            cohort("left").parent("root").flavor("default", cpu=("0", "2")).obj(),
            cohort("right").parent("root").flavor("default", cpu="10").obj(),
            cq("l").cohort("left").flavor("default", cpu="1").obj(),
            cq("r").cohort("right").flavor("default", cpu="0").obj(),
        ],
        [reserved("x", "l", "1")],
        {"l": (2, 3), "r": (10, 11)},
    ),
]


@pytest.mark.parametrize(("case", "objects", "workloads", "want"), CASES, ids=[c[0] for c in CASES])
def test_available_and_potential(case: str, objects: list, workloads: list, want: dict) -> None:
    w = world(*objects)
    for x in workloads:
        w.apply(x)
    got = {
        name: (max(0, available(w.state.cqs[name].node, FR)) // 1000, potential_available(w.state.cqs[name].node, FR) // 1000)
        for name in want
    }
    assert got == want


def test_cohort_cycle_blocks_its_queues_until_broken() -> None:
    w = world(
        cohort("a").parent("b").obj(),
        cohort("b").parent("a").obj(),
        cq("q").cohort("a").flavor("default", cpu="2").obj(),
    )
    w.apply(wl("default/x").queue("q").pods("main", 1, cpu="1").obj())
    w.settle(1.0)
    assert (w.status("default/x"), w.messages["default/x"]) == ("pending", "ClusterQueue q is inactive")
    w.apply(cohort("b").obj())  # b no longer points at a
    w.settle(2.0)
    assert w.status("default/x") == "admitted"


def test_usage_moves_with_the_queue_between_cohorts() -> None:
    w = world(
        cq("a").cohort("one").flavor("default", cpu="2").obj(),
        cq("lender1").cohort("one").flavor("default", cpu="4").obj(),
        cq("lender2").cohort("two").flavor("default", cpu="4").obj(),
    )
    w.apply(reserved("x", "a", "3"))
    assert w.state.cohorts["one"].node.usage[FR] == 3000
    w.apply(cq("a").cohort("two").flavor("default", cpu="2").obj())
    assert w.state.cohorts["one"].node.usage.get(FR, 0) == 0
    assert w.state.cohorts["two"].node.usage[FR] == 3000
    w.apply(Deleted(kind="ClusterQueue", name="a"))
    assert w.state.cohorts["two"].node.usage.get(FR, 0) == 0
    assert "one" in w.state.cohorts  # still holds lender1
