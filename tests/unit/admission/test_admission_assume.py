"""Assumed admissions: confirmation by the echo, roll back on refusal, decision ids, bad input."""

from __future__ import annotations

import pytest
from admission_builders import cq, wl
from admission_world import world
from msgspec.structs import replace

from services.admission.core import ClusterQueue, InvalidEvent, PodSet, ResourceQuota
from services.admission.core.model import Event


def _one_admission():
    w = world(cq("cq").flavor("default", cpu="2").obj())
    w.apply(wl("default/x").queue("cq").pods("main", 1, cpu="2").obj())
    w.apply(wl("default/y").queue("cq").at(1).pods("main", 1, cpu="2").obj())
    r = w.step(1.0, echo=False)
    assert [d.workload for d in r.admissions] == ["default/x"]
    return w, r.admissions[0]


def test_assumed_quota_blocks_others_until_confirmed() -> None:
    w, _d = _one_admission()
    w.step(2.0, echo=False)
    assert w.status("default/y") == "pending" and w.state.reserved["default/x"].assumed
    w.echo(w.results[0])
    assert not w.state.reserved["default/x"].assumed


def test_stale_update_keeps_the_assumption() -> None:
    w, _d = _one_admission()
    w.update("default/x", priority=0)  # an update written before our admission landed
    assert w.state.reserved["default/x"].assumed
    assert "default/x" not in w.state.pending


def test_update_after_the_admission_landed_is_authoritative() -> None:
    w, _d = _one_admission()
    landed = w._rv + 1
    w.state.admission_applied("default/x", str(landed))
    w.update("default/x", priority=1)  # at version `landed`, without an admission: it was cleared since
    assert w.records["default/x"].resource_version == str(landed)
    assert "default/x" not in w.state.reserved
    assert "default/x" in w.state.pending


def test_update_after_the_admission_landed_that_came_before_its_outcome_stands() -> None:
    # Admitted, then evicted at once: the eviction's record overtakes the admission's outcome.
    w, _d = _one_admission()
    landed = w._rv + 1
    w._rv += 1
    w.update("default/x", priority=1)  # newer than the admission, without one
    assert w.state.reserved["default/x"].assumed  # not known newer yet
    w.state.admission_applied("default/x", str(landed))
    assert "default/x" not in w.state.reserved
    assert "default/x" in w.state.pending
    assert w.state.cqs["cq"].node.usage.get(("default", "cpu"), 0) == 0


def test_forget_rolls_back_and_requeues() -> None:
    w, d = _one_admission()
    w.state.forget("default/x")
    assert w.state.cqs["cq"].node.usage.get(("default", "cpu"), 0) == 0
    r = w.step(2.0, echo=False)
    assert [a.workload for a in r.admissions] == ["default/x"]
    assert r.admissions[0].id != d.id


def test_decision_ids_are_deterministic_and_unique() -> None:
    def ids() -> list[str]:
        w = world(cq("cq").flavor("default", cpu="2").preemption(within="LowerPriority").obj())
        w.apply(wl("default/low").queue("cq").pods("main", 1, cpu="2").obj())
        w.settle(0.0)
        w.apply(wl("default/high").queue("cq").priority(3).at(1).pods("main", 1, cpu="2").obj())
        w.settle(1.0)
        return [x.id for x in w.all_decisions()]

    first = ids()
    assert first == ids()
    assert len(first) == len(set(first))


BAD = [
    (ClusterQueue(name="cq", resource_groups=()), None),
    (replace(cq("cq").flavor("default", cpu="1").obj(), stop_policy="Sometimes"), "spec.stopPolicy"),
    (
        replace(
            cq("cq").flavor("default", cpu="1").obj(),
            resource_groups=(replace(cq("x").flavor("default", cpu="1").obj().resource_groups[0], covered_resources=("cpu", "memory")),),
        ),
        "flavors[0].resources: must list exactly the covered resources",
    ),
    (cq("cq").flavor("default", cpu=("1", "2")).obj(), "borrowingLimit: must be nil when there is no cohort"),
    (
        replace(cq("cq").flavor("default", cpu="1").obj(), resource_groups=(replace(cq("x").flavor("default", cpu="1").obj().resource_groups[0], flavors=(replace(cq("x").flavor("default", cpu="1").obj().resource_groups[0].flavors[0], resources=(ResourceQuota(name="cpu", nominal=-1),)),)),)),
        "nominalQuota: must be >= 0",
    ),
    (replace(wl("default/w").queue("cq").obj(), pod_sets=()), "spec.podSets: must not be empty"),
    (replace(wl("default/w").queue("cq").obj(), pod_sets=(PodSet(name="main", count=2, min_count=3),)), "minCount"),
    (replace(wl("default/w").queue("cq").obj(), uid=""), "metadata.uid"),
]


@pytest.mark.parametrize(("event", "field"), BAD, ids=[f"bad-{i}" for i in range(len(BAD))])
def test_bad_input_is_refused_and_changes_nothing(event: Event, field: str | None) -> None:
    w = world(cq("cq").flavor("default", cpu="2").obj())
    before = (dict(w.state.cqs), dict(w.state.workloads))
    if field is None:
        w.state.apply(event)  # a queue without resources is valid
        return
    with pytest.raises(InvalidEvent, match=field.replace("[", r"\[").replace("]", r"\]")):
        w.state.apply(event)
    assert (dict(w.state.cqs), dict(w.state.workloads)) == before
