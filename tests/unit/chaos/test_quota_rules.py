"""The checker's quota rules (kq.chaos.quota), written from Kueue's semantics: limits and guarantees."""

from __future__ import annotations

import pytest

from kq.chaos.quota import Tree, violations

F = ("default", "cpu")


def cq(nominal: str, cohort: str | None = "org", borrowing: str | None = None, lending: str | None = None) -> dict:
    r: dict = {"name": "cpu", "nominalQuota": nominal}
    if borrowing is not None:
        r["borrowingLimit"] = borrowing
    if lending is not None:
        r["lendingLimit"] = lending
    spec: dict = {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [r]}]}]}
    if cohort:
        spec["cohortName"] = cohort
    return spec


def tree() -> Tree:
    t = Tree()
    t.set_cq("a", cq("5", borrowing="4"))
    t.set_cq("b", cq("5", lending="2"))  # 3 of b's 5 are guaranteed to b
    return t


@pytest.mark.parametrize(("used_a", "used_b", "broken"), [
    (5000, 5000, []),
    (7000, 0, []),  # a borrows b's lendable 2
    (8000, 0, ["cohort tree org default/cpu uses 1000m beyond all its quota"]),  # into b's guarantee
    (7000, 3000, []),
    (7000, 4000, ["cohort tree org default/cpu uses 1000m beyond all its quota"]),
    (0, 10000, []),  # a has no lendingLimit: all of its unused 5 may be lent
])
def test_lending_limit_keeps_a_guarantee(used_a: int, used_b: int, broken: list[str]) -> None:
    assert violations(tree(), {"a": {F: used_a}, "b": {F: used_b}}, ["a", "b"]) == broken


def test_borrowing_limit_of_a_cluster_queue_and_of_a_cohort() -> None:
    t = Tree()
    t.set_cq("a", cq("2", cohort="team", borrowing="1"))
    t.set_cq("b", cq("10", cohort="other"))
    t.set_cohort("team", {"parentName": "org", "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "0", "borrowingLimit": "2"}]}]}]})
    t.set_cohort("other", {"parentName": "org"})
    assert violations(t, {"a": {F: 3000}}, ["a"]) == []
    assert violations(t, {"a": {F: 4000}}, ["a"]) == [
        "ClusterQueue a default/cpu borrows 2000m > borrowingLimit 1000m"]
    t.set_cq("a", cq("2", cohort="team"))  # no limit on the queue: the cohort's limit holds
    assert violations(t, {"a": {F: 5000}}, ["a"]) == ["cohort team default/cpu borrows 3000m > borrowingLimit 2000m"]


def test_a_cluster_queue_without_a_cohort_has_its_nominal_only() -> None:
    t = Tree()
    t.set_cq("solo", cq("3", cohort=None))
    assert violations(t, {"solo": {F: 3000}}, ["solo"]) == []
    assert violations(t, {"solo": {F: 3001}}, ["solo"]) == ["ClusterQueue solo default/cpu uses 3001m > nominal 3000m"]
