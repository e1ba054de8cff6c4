"""ClusterQueue and LocalQueue status: contents, and reported only when changed."""

from __future__ import annotations

from admission_builders import cq, fq, lq, wl
from admission_world import world

from services.admission.core import ClusterQueueStatus, FlavorUsage, LocalQueueStatus, ResourceUsage


def test_cluster_queue_status_with_borrowing() -> None:
    w = world(
        cq("a").cohort("co").group(fq("default", cpu="2", memory="2Gi")).obj(),
        cq("b").cohort("co").group(fq("default", cpu="4", memory="4Gi")).obj(),
    )
    w.apply(wl("default/x").queue("a").pods("main", 1, cpu="3", memory="1Gi").obj())
    w.apply(wl("default/y").queue("a").at(1).pods("main", 1, cpu="4", memory="1Gi").obj())
    w.settle(1.0)
    gib = 1024**3 * 1000
    assert w.cq_status["a"] == ClusterQueueStatus(
        name="a",
        pending_workloads=1,
        reserving_workloads=1,
        admitted_workloads=1,
        flavors_reservation=(
            FlavorUsage(name="default", resources=(ResourceUsage(name="cpu", total=3000, borrowed=1000), ResourceUsage(name="memory", total=gib))),
        ),
        flavors_usage=(
            FlavorUsage(name="default", resources=(ResourceUsage(name="cpu", total=3000, borrowed=1000), ResourceUsage(name="memory", total=gib))),
        ),
        active=True,
        active_reason="Ready",
        active_message="Can admit new workloads",
    )


def test_local_queue_status() -> None:
    w = world(cq("cq").flavor("default", cpu="2").obj(), lq("default/team", "cq"))
    w.apply(wl("default/x").queue("team").pods("main", 1, cpu="2").obj())
    w.apply(wl("default/y").queue("team").at(1).pods("main", 1, cpu="1").obj())
    w.settle(1.0)
    assert w.lq_status["default/team"] == LocalQueueStatus(
        namespace="default",
        name="team",
        pending_workloads=1,
        reserving_workloads=1,
        admitted_workloads=1,
        flavors_reservation=(FlavorUsage(name="default", resources=(ResourceUsage(name="cpu", total=2000),)),),
        flavors_usage=(FlavorUsage(name="default", resources=(ResourceUsage(name="cpu", total=2000),)),),
        active=True,
        active_reason="Ready",
        active_message="Can submit new workloads to localQueue",
    )


def test_status_reported_only_when_it_changes() -> None:
    w = world(cq("cq").flavor("default", cpu="2").obj())
    first = w.step(0.0)
    assert [s.name for s in first.cluster_queues] == ["cq"]
    assert w.step(1.0).cluster_queues == ()
    w.apply(wl("default/x").queue("cq").pods("main", 1, cpu="1").obj())
    assert [s.pending_workloads for s in w.step(2.0).cluster_queues] == [0]  # admitted in the same cycle
    assert w.cq_status["cq"].reserving_workloads == 1
    assert w.step(3.0).empty()


def test_a_queue_record_with_the_same_spec_changes_nothing() -> None:
    """The echo of a status write: no rebuild of the cohort tree, no queue of it reported again,
    no head tried again (its epoch does not move)."""
    from services.admission.core import Cohort

    spec = cq("a").cohort("co").flavor("default", cpu="1").obj()
    w = world(Cohort(name="co"), spec, cq("b").cohort("co").flavor("default", cpu="1").obj())
    w.step(0.0)
    tree = w.state._p.tree
    generations, epoch = {n: c.generation for n, c in w.state.cqs.items()}, tree.epoch_of(w.state.cqs["a"])
    w.apply(spec)
    w.apply(Cohort(name="co"))
    assert not w.state.has_work(1.0)
    assert {n: c.generation for n, c in w.state.cqs.items()} == generations
    assert tree.epoch_of(w.state.cqs["a"]) == epoch
    w.apply(cq("a").cohort("co").flavor("default", cpu="2").obj())  # a real change still rebuilds
    assert w.state.cqs["a"].generation > generations["a"] and tree.epoch_of(w.state.cqs["a"]) != epoch


def test_quota_reserved_but_not_admitted_counts_as_reserving_only() -> None:
    from services.admission.core import AdmissionCheck

    w = world(AdmissionCheck(name="prov"), cq("cq").flavor("default", cpu="2").check("prov").obj())
    w.apply(wl("default/x").queue("cq").pods("main", 1, cpu="1").obj())
    w.settle(1.0)
    s = w.cq_status["cq"]
    assert (s.reserving_workloads, s.admitted_workloads) == (1, 0)
    assert s.flavors_usage[0].resources[0].total == 0
    assert s.flavors_reservation[0].resources[0].total == 1000
