"""Partial admission: pod counts reduced toward minCount by Kueue's binary search."""

from __future__ import annotations

import pytest
from admission_builders import cq, wl
from admission_world import world

from services.admission.core.flavors import search_partial_counts
from services.admission.core.model import PodSet

CASES = [
    # (id, quota cpu, pod sets [(name, count, min, cpu)], already used, want counts or None)
    ("single variable pod set", "10", [("main", 8, 2, "2")], "0", {"main": 5}),
    ("driver plus workers", "10", [("driver", 1, None, "1"), ("workers", 8, 2, "2")], "0", {"driver": 1, "workers": 4}),
    ("multiple variable pod sets shrink together", "12", [("a", 6, 2, "1"), ("b", 6, 2, "2")], "0", {"a": 4, "b": 4}),
    ("down to minCount", "4", [("main", 8, 2, "2")], "0", {"main": 2}),
    ("not even minCount fits", "3", [("main", 8, 2, "2")], "0", None),
    ("full count fits: no reduction", "20", [("main", 8, 2, "2")], "0", {"main": 8}),
    ("remaining quota after others", "10", [("main", 8, 1, "1")], "7", {"main": 3}),
]


@pytest.mark.parametrize(("case", "quota", "pod_sets", "used", "want"), CASES, ids=[c[0] for c in CASES])
def test_partial_admission(case: str, quota: str, pod_sets: list, used: str, want: dict | None) -> None:
    w = world(cq("cq").flavor("default", cpu=quota).obj())
    if used != "0":
        w.apply(wl("default/other").queue("cq").pods("main", 1, cpu=used).obj())
        w.settle(0.0)
    b = wl("default/job").queue("cq").at(1)
    for name, count, min_count, cpu in pod_sets:
        b = b.pods(name, count, min_count=min_count, cpu=cpu)
    w.apply(b.obj())
    w.settle(1.0)
    if want is None:
        assert w.status("default/job") == "pending"
    else:
        assert w.counts("default/job") == want
        a = w.records["default/job"].admission
        assert a is not None
        for psa in a.pod_sets:  # usage scales with the admitted count
            per_pod = next(ps for ps in w.records["default/job"].pod_sets if ps.name == psa.name).requests["cpu"]
            assert psa.resource_usage["cpu"] == per_pod * psa.count


def test_partial_admission_with_preemption() -> None:
    """A reduced count that fits after preempting is preferred to waiting (Kueue "preempt with partial admission")."""
    w = world(cq("cq").flavor("default", cpu="4").preemption(within="LowerPriority").obj())
    w.apply(wl("default/low").queue("cq").priority(0).pods("main", 1, cpu="2").obj())
    w.apply(wl("default/keep").queue("cq").priority(9).pods("main", 1, cpu="2").obj())
    w.settle(0.0)
    w.apply(wl("default/job").queue("cq").priority(5).at(1).pods("main", 4, min_count=1, cpu="2").obj())
    r = w.step(1.0)
    assert [p.victim for p in r.preemptions] == ["default/low"]
    w.release()
    w.settle(2.0)
    assert w.counts("default/job") == {"main": 1}


def test_search_probes_like_go_sort_search() -> None:
    probes: list[list[int]] = []

    def fits(counts: list[int]) -> object | None:
        probes.append(counts)
        return counts if counts[0] <= 5 else None

    found = search_partial_counts((PodSet(name="main", count=8, min_count=2),), fits)
    assert found == [5]
    assert probes == [[5], [7], [6]]  # i=3, i=1 (no), i=2 (no): the last probe need not succeed
