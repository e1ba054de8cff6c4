"""Topology-aware scheduling in the admission core: ask, assume, complete or roll back
(services/admission/core/placements.py and the cycle's _placed)."""

from __future__ import annotations

from admission_builders import cq, flavor, fq, wl
from admission_world import world
from msgspec.structs import replace

from kq.api.topology import TopologyDomain, compact_topology_assignment
from kq.api.workload import PodSetTopologyRequest
from services.admission.core.model import AdmissionCheck, PlacementAnswer, Topology

RACK = "cloud.provider.com/topology-rack"
ASSIGNMENT = compact_topology_assignment(("kubernetes.io/hostname",), [TopologyDomain(("x1",), 2)])


def _world(topology: bool = True):
    w = world(cq("cq").flavor("tas", cpu="8").obj())
    w.apply(replace(flavor("tas"), topology_name="dc"))
    if topology:
        w.apply(Topology(name="dc"))
    return w


def _tas_wl(key: str, at: float = 0.0):
    base = wl(key).queue("cq").at(at).pods("main", 2, cpu="1").obj()
    ps = replace(base.pod_sets[0], topology_request=PodSetTopologyRequest(required=RACK))
    return replace(base, pod_sets=(ps,))


def test_a_tas_workload_is_asked_about_assumed_then_admitted_with_the_placement() -> None:
    w = _world()
    w.apply(_tas_wl("default/a"))
    r = w.step(1.0, echo=False)
    assert r.admissions == ()
    [req] = r.placements
    assert req.workload == "default/a" and req.pod_sets[0].flavor == "tas" and req.pod_sets[0].count == 2
    assert req.pod_sets[0].requests == {"cpu": 1000} and req.pod_sets[0].topology_request.required == RACK
    assert w.state.reserved["default/a"].assumed  # its quota is held while the solver answers
    w.state.apply(PlacementAnswer(workload="default/a", uid=req.uid, request_id=req.id, placed=True,
                                  topology={"main": ASSIGNMENT}, at=1.0))
    r = w.step(1.1, echo=False)
    [d] = r.admissions
    assert d.pod_sets[0].topology_assignment == ASSIGNMENT


def test_a_failed_placement_rolls_back_and_leaves_it_pending_with_the_message() -> None:
    w = _world()
    w.apply(_tas_wl("default/a"))
    [req] = w.step(1.0, echo=False).placements
    w.state.apply(PlacementAnswer(workload="default/a", uid=req.uid, request_id=req.id, placed=False,
                                  reason="NoFit", message=f"cannot fit 2 pods in one {RACK}", at=1.0))
    assert "default/a" not in w.state.reserved
    r = w.step(1.1, echo=False)
    assert r.admissions == () and r.placements == ()
    assert w.status("default/a") == "pending"
    assert RACK in w.messages["default/a"]


def test_an_answer_to_an_older_question_is_ignored() -> None:
    w = _world()
    w.apply(_tas_wl("default/a"))
    [req] = w.step(1.0, echo=False).placements
    w.state.apply(PlacementAnswer(workload="default/a", uid=req.uid, request_id="tas.other.1", placed=True,
                                  topology={"main": ASSIGNMENT}, at=1.0))
    assert w.step(1.1, echo=False).admissions == ()


def test_a_non_tas_workload_in_a_mixed_queue_is_not_asked_about() -> None:
    w = world(cq("cq").flavor("plain", cpu="8").obj())
    w.apply(flavor("plain"))
    w.apply(wl("default/a").queue("cq").pods("main", 1, cpu="1").obj())
    r = w.step(1.0, echo=False)
    assert [d.workload for d in r.admissions] == ["default/a"] and r.placements == ()
    assert r.admissions[0].pod_sets[0].topology_assignment is None


def test_implied_when_every_flavor_is_a_tas_flavor() -> None:
    w = _world()
    w.apply(wl("default/a").queue("cq").pods("main", 1, cpu="1").obj())
    [req] = w.step(1.0, echo=False).placements
    assert req.pod_sets[0].implied and req.pod_sets[0].topology_request is None


def test_a_missing_topology_makes_the_queue_inactive_naming_it() -> None:
    w = _world(topology=False)
    w.apply(_tas_wl("default/a"))
    r = w.step(1.0, echo=False)
    assert r.placements == () and r.admissions == ()
    [status] = [s for s in r.cluster_queues if s.name == "cq"]
    assert not status.active and status.active_reason == "TopologyNotFound" and "dc" in status.active_message
    w.apply(Topology(name="dc"))
    assert [p.workload for p in w.step(2.0, echo=False).placements] == ["default/a"]



def test_evicted_workloads_still_holding_quota_are_candidates_first() -> None:
    """Kueue's candidate order puts workloads already being evicted first. They still hold their
    placement in the solver until their quota is released, so a question that left them out made
    the solver find no victim, or pick others beside them (the intermittent TAS preemption defect)."""
    w = world(cq("cq").flavor("tas", cpu="8").preemption(within="LowerPriority").obj())
    w.apply(replace(flavor("tas"), topology_name="dc"))
    w.apply(Topology(name="dc"))
    w.apply(wl("default/low-1").queue("cq").priority(1).pods("main", 1, cpu="1").reserved("cq", "tas", at=1.0)
            .evicted().obj())
    w.apply(wl("default/low-2").queue("cq").priority(1).pods("main", 1, cpu="1").reserved("cq", "tas", at=2.0).obj())
    high = replace(_tas_wl("default/high", at=3.0), priority=10)
    w.apply(high)
    [req] = w.step(4.0, echo=False).placements
    assert req.workload == "default/high"
    assert req.candidates == ("default/low-1", "default/low-2")


def test_a_flavor_without_topology_is_skipped_for_the_next_one() -> None:
    """Kueue's flavor assigner: a pod set asking for a topology tries the queue's next flavor when
    the first one has no Topology; a pod set asking for none skips TAS flavors in a mixed queue."""
    w = world(cq("cq").group(fq("plain", cpu="8"), fq("tas", cpu="8")).obj())
    w.apply(flavor("plain"))
    w.apply(replace(flavor("tas"), topology_name="dc"))
    w.apply(Topology(name="dc"))
    w.apply(_tas_wl("default/a"))
    [req] = w.step(1.0, echo=False).placements
    assert req.workload == "default/a" and req.pod_sets[0].flavor == "tas"
    w = world(cq("cq").group(fq("tas", cpu="8"), fq("plain", cpu="8")).obj())
    w.apply(flavor("plain"))
    w.apply(replace(flavor("tas"), topology_name="dc"))
    w.apply(Topology(name="dc"))
    w.apply(wl("default/b").queue("cq").pods("main", 1, cpu="1").obj())
    r = w.step(1.0, echo=False)
    assert r.placements == () and [d.workload for d in r.admissions] == ["default/b"]
    assert r.admissions[0].pod_sets[0].flavors == {"cpu": "plain"}


def test_no_flavor_with_a_topology_says_so() -> None:
    w = world(cq("cq").flavor("plain", cpu="8").obj())
    w.apply(flavor("plain"))
    w.apply(_tas_wl("default/a"))
    r = w.step(1.0, echo=False)
    assert r.placements == () and r.admissions == ()
    assert 'Flavor "plain" does not support TopologyAwareScheduling' in w.messages["default/a"]


def _on_failed_node(w):
    base = _tas_wl("default/a")
    admitted = wl("default/a").queue("cq").pods("main", 2, cpu="1").reserved("cq", "tas").obj()
    assert admitted.admission is not None
    admission = replace(admitted.admission, pod_sets=(replace(admitted.admission.pod_sets[0],
                                                              topology_assignment=ASSIGNMENT),))
    w.apply(replace(admitted, pod_sets=base.pod_sets, admission=admission, unhealthy_nodes=("x1",)))
    r = w.step(1.0, echo=False)
    [req] = r.placements
    assert req.workload == "default/a" and req.repair_node == "x1" and r.evictions == ()
    return req


def test_a_failed_node_is_replaced_in_place_when_the_solver_finds_room() -> None:
    w = _world()
    req = _on_failed_node(w)
    moved = compact_topology_assignment(("kubernetes.io/hostname",), [TopologyDomain(("x2",), 2)])
    w.state.apply(PlacementAnswer(workload="default/a", uid=req.uid, request_id=req.id, placed=True,
                                  topology={"main": moved}, at=1.0))
    r = w.step(1.1, echo=False)
    [repair] = r.repairs
    assert repair.node == "x1" and repair.pod_sets[0].topology_assignment == moved
    assert r.evictions == () and r.admissions == ()


def test_no_replacement_evicts_for_node_failures() -> None:
    w = _world()
    req = _on_failed_node(w)
    w.state.apply(PlacementAnswer(workload="default/a", uid=req.uid, request_id=req.id, placed=False,
                                  reason="NoReplacement", message="no room", at=1.0))
    r = w.step(1.1, echo=False)
    [ev] = r.evictions
    assert ev.reason == "NodeFailures" and r.repairs == ()
    assert ev.message == "Workload was evicted as there was no replacement for unhealthy node(s): x1"


def test_an_answer_whose_victims_are_all_gone_is_asked_again() -> None:
    """The solver named victims, but they left before the answer was used. Nothing else will bring
    the preemptor back (the victims' exits already came), so the cycle asks again at once; it used
    to leave the workload pending for good ("topology preemption targets are already gone")."""
    w = world(cq("cq").flavor("tas", cpu="8").preemption(within="LowerPriority").obj())
    w.apply(replace(flavor("tas"), topology_name="dc"))
    w.apply(Topology(name="dc"))
    w.apply(wl("default/low").queue("cq").priority(1).pods("main", 2, cpu="1").reserved("cq", "tas", at=1.0).obj())
    w.apply(replace(_tas_wl("default/high", at=2.0), priority=10))
    [req] = w.step(3.0, echo=False).placements
    assert req.candidates == ("default/low",)
    w.state.apply(PlacementAnswer(workload="default/high", uid=req.uid, request_id=req.id, placed=True,
                                  victims=("default/low",), at=3.0))
    w.delete("default/low")
    r = w.step(3.1, echo=False)
    [again] = r.placements
    assert again.workload == "default/high" and again.id != req.id and again.candidates == ()
    assert r.preemptions == ()


def _multikueue_world(controller: str = "kueue.x-k8s.io/multikueue"):
    w = world(cq("cq").flavor("tas", cpu="8").check("mk").obj())
    w.apply(replace(flavor("tas"), topology_name="dc"))
    w.apply(Topology(name="dc"))
    w.apply(AdmissionCheck(name="mk", controller_name=controller))
    return w


def test_a_multikueue_queue_reserves_without_a_placement_and_marks_the_request_delayed() -> None:
    # Kueue's TAS flavor assigner: with MultiKueue the worker assigns the topology, so the manager
    # asks no solver (it has no nodes for the flavor) and writes delayedTopologyRequest: Pending.
    w = _multikueue_world()
    w.apply(_tas_wl("default/a"))
    w.apply(wl("default/b").queue("cq").pods("main", 1, cpu="1").obj())  # implied TAS (every flavor is)
    first, second = w.step(1.0, echo=False), w.step(1.1, echo=False)  # one head of the queue a cycle
    assert first.placements == second.placements == ()
    by = {d.workload: d for d in first.admissions + second.admissions}
    assert sorted(by) == ["default/a", "default/b"]
    for d in by.values():
        [ps] = d.pod_sets
        assert (ps.delayed_topology_request, ps.topology_assignment) == ("Pending", None), ps
        assert d.admission_checks == ("mk",) and not d.admitted


def test_another_controller_s_check_still_asks_for_a_placement() -> None:
    w = _multikueue_world(controller="example.com/gate")
    w.apply(_tas_wl("default/a"))
    r = w.step(1.0, echo=False)
    assert r.admissions == () and [p.workload for p in r.placements] == ["default/a"]


def test_a_delayed_topology_keeps_a_multikueue_workload_unadmitted_until_the_worker_placed_it() -> None:
    # Kueue's SyncAdmittedCondition: every check Ready is not enough while a pod set's topology
    # request is delayed and Pending; the dispatcher's Ready marks it Ready once the worker placed it.
    w = _multikueue_world()
    w.apply(_tas_wl("default/a"))
    w.step(1.0)  # reserved, the echo applied
    w.set_checks("default/a", mk="Ready")
    assert w.step(2.0).checks_ready == ()
    adm = w.records["default/a"].admission
    assert adm is not None
    ready = replace(adm, pod_sets=tuple(replace(ps, delayed_topology_request="Ready") for ps in adm.pod_sets))
    w.update("default/a", admission=ready)
    assert [c.workload for c in w.step(3.0).checks_ready] == ["default/a"]
