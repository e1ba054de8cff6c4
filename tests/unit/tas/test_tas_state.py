"""Assumed capacity, pods, node changes, log replay, preemption what-if and node replacement."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from tas_builders import BLOCK, HOST, ONE, RACK, THREE, TWO, domains, node, solver

from services.tas.core import HeldPodSet, NodeInfo, Placement, PlacementFailure, PodSetRequest, RequestMode, TaintSpec
from services.tas.core.events import Assumed, Confirmed, NodeUpserted, PodBound, Released, TasEvent, apply, snapshot
from services.tas.core.replacement import replace_node
from services.tas.core.solver import TasSolver


def req(count: int, mode: RequestMode = "required", level: str | None = HOST, cpu: int = 1000, name: str = "main",
        **kw: Any) -> PodSetRequest:
    return PodSetRequest(name=name, count=count, requests={"cpu": cpu}, mode=mode, level=level, **kw)


def two_hosts() -> TasSolver:
    return solver([node("b1", "r1", "x1", 2), node("b1", "r1", "x2", 2)], THREE)


def test_held_capacity_is_never_handed_out_twice() -> None:
    s = two_hosts()
    first = s.place_and_assume("ns/a", "tas-flavor", [req(2)])
    second = s.place_and_assume("ns/b", "tas-flavor", [req(2)])
    third = s.place_and_assume("ns/c", "tas-flavor", [req(1)])
    assert domains(first) == [(("b1", "r1", "x1"), 2)]
    assert domains(second) == [(("b1", "r1", "x2"), 2)]
    assert isinstance(third, PlacementFailure) and third.kind == "NoFit"


def test_place_alone_holds_nothing_and_release_frees() -> None:
    s = two_hosts()
    assert domains(s.place("tas-flavor", [req(2)])) == [(("b1", "r1", "x1"), 2)]
    assert domains(s.place("tas-flavor", [req(2)])) == [(("b1", "r1", "x1"), 2)]
    s.place_and_assume("ns/a", "tas-flavor", [req(2)])
    s.confirm("ns/a")
    assert s.holds["ns/a"].state == "confirmed"
    assert domains(s.place("tas-flavor", [req(2)])) == [(("b1", "r1", "x2"), 2)]
    s.release("ns/a")
    assert domains(s.place("tas-flavor", [req(2)])) == [(("b1", "r1", "x1"), 2)]


def test_pods_of_a_held_workload_count_once_and_other_pods_count() -> None:
    s = two_hosts()
    s.place_and_assume("ns/a", "tas-flavor", [req(2)])
    s.pod_bound("ns/a-0", "b1-r1-x1", {"cpu": 1000}, workload="ns/a")
    s.pod_bound("ns/a-1", "b1-r1-x1", {"cpu": 1000}, workload="ns/a")
    assert domains(s.place("tas-flavor", [req(2)])) == [(("b1", "r1", "x2"), 2)]
    s.pod_bound("other/p", "b1-r1-x2", {"cpu": 1000})  # not kq's: it takes capacity too
    assert isinstance(s.place("tas-flavor", [req(2)]), PlacementFailure)
    s.release("ns/a")  # evicted but its pods still run: they now count as pods
    assert isinstance(s.place("tas-flavor", [req(2)]), PlacementFailure)
    s.pod_gone("ns/a-0")
    s.pod_gone("ns/a-1")
    assert domains(s.place("tas-flavor", [req(2)])) == [(("b1", "r1", "x1"), 2)]


def test_node_changes_update_capacity() -> None:
    s = two_hosts()
    s.place("tas-flavor", [req(1)])  # builds the views; later changes must reach them
    s.upsert_node(NodeInfo(name="b1-r1-x1", labels={BLOCK: "b1", RACK: "r1", HOST: "x1", "tas": "yes"},
                           allocatable={"cpu": 2000, "pods": 10}, ready=False))
    assert domains(s.place("tas-flavor", [req(1)])) == [(("b1", "r1", "x2"), 1)]
    s.upsert_node(NodeInfo(name="b1-r1-x2", labels={BLOCK: "b1", RACK: "r1", HOST: "x2", "tas": "yes"},
                           allocatable={"cpu": 2000, "pods": 10}, taints=(TaintSpec(key="k", effect="NoExecute"),)))
    failure = s.place("tas-flavor", [req(1)])
    assert isinstance(failure, PlacementFailure)
    assert failure.message.endswith('excluded: taint "k:NoExecute": 1')
    s.upsert_node(node("b2", "r1", "x9", 4))
    assert domains(s.place("tas-flavor", [req(4)])) == [(("b2", "r1", "x9"), 4)]
    s.remove_node("b2-r1-x9")
    s.upsert_node(node("b1", "r1", "x1", 2))
    assert domains(s.place("tas-flavor", [req(2)])) == [(("b1", "r1", "x1"), 2)]


def test_replaying_the_log_or_its_snapshot_rebuilds_the_same_state() -> None:
    log: list[TasEvent] = []
    live = two_hosts()
    log += snapshot(live)
    for i, count in enumerate([1, 2, 1]):
        out = live.place_and_assume(f"ns/w{i}", "tas-flavor", [req(count)])
        assert isinstance(out, Placement)
        log.append(Assumed(workload=f"ns/w{i}", flavor="tas-flavor", pod_sets=live.holds[f"ns/w{i}"].pod_sets))
    log.append(Confirmed(workload="ns/w0"))
    live.confirm("ns/w0")
    log.append(Released(workload="ns/w1"))
    live.release("ns/w1")
    log.append(PodBound(key="x/p", node="b1-r1-x2", requests={"cpu": 500}))
    live.pod_bound("x/p", "b1-r1-x2", {"cpu": 500})
    wire = msgspec.json.encode(log)
    replica = TasSolver()
    for event in msgspec.json.decode(wire, type=list[TasEvent]):
        apply(replica, event)
    compacted = TasSolver()
    for event in snapshot(live):
        apply(compacted, event)
    probe = [req(1, mode="unconstrained", level=None)]
    assert replica.place("tas-flavor", probe) == live.place("tas-flavor", probe) == compacted.place("tas-flavor", probe)
    assert {k: (r.state, r.pod_sets) for k, r in replica.holds.items()} == {
        k: (r.state, r.pod_sets) for k, r in live.holds.items()}


def test_hold_for_a_node_seen_later_applies_when_it_appears() -> None:
    s = solver([], ONE)
    s.assume("ns/b", "tas-flavor", (HeldPodSet(pod_set="main", values=("x1",), count=2, requests={"cpu": 1000}),))
    apply(s, NodeUpserted(node=node("b1", "r1", "x1", 2)))
    assert isinstance(s.place("tas-flavor", [req(1)]), PlacementFailure)
    s.release("ns/b")
    assert domains(s.place("tas-flavor", [req(2)])) == [(("x1",), 2)]


def test_minimal_victims_lowest_first_never_more_than_needed() -> None:
    s = solver([node("b1", "r1", "x1", 4), node("b1", "r1", "x2", 4)], THREE)
    for key, count in [("low-a", 2), ("low-b", 2), ("low-c", 4)]:
        assert isinstance(s.place_and_assume(key, "tas-flavor", [req(count)]), Placement)
    want = [req(4)]
    assert isinstance(s.place("tas-flavor", want), PlacementFailure)
    # removing low-a then low-b frees x1 (2+2); low-c alone would also do, but it comes last
    assert s.minimal_victims("tas-flavor", want, ["low-a", "low-b", "low-c"]) == ("low-a", "low-b")
    # low-c first: it alone is enough
    assert s.minimal_victims("tas-flavor", want, ["low-c", "low-a", "low-b"]) == ("low-c",)
    # the fill-back drops victims that were not needed
    assert s.minimal_victims("tas-flavor", [req(2)], ["low-a", "low-b", "low-c"]) == ("low-a",)
    assert s.minimal_victims("tas-flavor", [req(9)], ["low-a", "low-b", "low-c"]) is None
    assert set(s.holds) == {"low-a", "low-b", "low-c"}  # the what-if changes nothing
    assert isinstance(s.place("tas-flavor", want), PlacementFailure)


def test_fill_back_keeps_only_the_needed_victims() -> None:
    s = solver([node("b1", "r1", "x1", 2), node("b1", "r2", "x2", 2)], THREE)
    s.place_and_assume("v1", "tas-flavor", [req(2, level=RACK)])  # x1
    s.place_and_assume("v2", "tas-flavor", [req(2, level=RACK)])  # x2
    # needs a whole rack: removing v1 is enough, v2 first then v1 -> fill back v2
    assert s.minimal_victims("tas-flavor", [req(2, level=RACK)], ["v2", "v1"]) == ("v2",)


def test_node_failure_replaced_within_the_required_domain() -> None:
    nodes = [node("b1", "r1", "x1", 2), node("b1", "r1", "x2", 2), node("b1", "r1", "x3", 1),
             node("b1", "r2", "x4", 2)]
    s = solver(nodes, THREE)
    request = req(3, level=RACK)
    placed = s.place_and_assume("ns/a", "tas-flavor", [request])
    assert domains(placed) == [(("b1", "r1", "x1"), 2), (("b1", "r1", "x3"), 1)]
    s.upsert_node(NodeInfo(name="b1-r1-x1", labels=nodes[0].labels, allocatable=nodes[0].allocatable, ready=False))
    out = replace_node(s, "ns/a", request, "x1")
    assert not isinstance(out, PlacementFailure), out
    merged, replacement = out
    assert [(d.values, d.count) for d in replacement] == [(("b1", "r1", "x2"), 2)]
    assert [(d.values, d.count) for d in merged.domains] == [(("b1", "r1", "x2"), 2), (("b1", "r1", "x3"), 1)]


def test_node_failure_without_room_in_the_domain_is_reported() -> None:
    nodes = [node("b1", "r1", "x1", 2), node("b1", "r1", "x3", 1), node("b1", "r2", "x4", 2)]
    s = solver(nodes, THREE)
    request = req(3, level=RACK)
    s.place_and_assume("ns/a", "tas-flavor", [request])
    s.remove_node("b1-r1-x1")
    out = replace_node(s, "ns/a", request, "x1")
    assert isinstance(out, PlacementFailure)
    assert out.kind == "NoReplacement"
    assert out.message.startswith("cannot find replacement assignment for unhealthy node x1: ")


def test_level_missing_from_topology_names_it() -> None:
    out = solver([node("b1", "r1", "x1", 2)], TWO).place("tas-flavor", [req(1, level=HOST)])
    assert isinstance(out, PlacementFailure)
    assert (out.kind, out.level) == ("UnknownLevel", HOST)
    assert HOST in out.message


def test_a_change_costs_the_leaves_it_touches_not_the_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.tas.core import views

    nodes = [node(f"b{i % 3}", f"r{i % 7}", f"x{i}", 4) for i in range(200)]
    s = solver(nodes, THREE)
    s.place("tas-flavor", [req(2, level=RACK)])  # builds the view for this shape
    calls: list[int] = []
    original = views.ShapeCounts._leaf_count

    def counting(self: views.ShapeCounts, leaf: int) -> tuple[int, int, str | None]:
        calls.append(leaf)
        return original(self, leaf)

    monkeypatch.setattr(views.ShapeCounts, "_leaf_count", counting)
    s.pod_bound("x/p", nodes[5].name, {"cpu": 1000})
    s.place_and_assume("ns/a", "tas-flavor", [req(2, level=RACK)])
    s.pod_bound("x/p", nodes[5].name, {"cpu": 2000})  # the same pod again: replaced, still one leaf
    s.place("tas-flavor", [req(2, level=RACK)])
    assert len(calls) <= 3 and len(set(calls)) <= 2


def test_settle_brings_every_view_up_to_date() -> None:
    s = two_hosts()
    s.place("tas-flavor", [req(1)])
    s.place("tas-flavor", [req(1, cpu=500)])
    s.pod_bound("x/p", "b1-r1-x1", {"cpu": 1000})
    views = list(s.trees["tas-flavor"]._views.values())
    assert all(v.pending for v in views)
    s.settle()
    assert not any(v.pending for v in views)
    assert domains(s.place("tas-flavor", [req(2)])) == [(("b1", "r1", "x2"), 2)]


def test_flavors_sharing_nodes_never_hand_out_the_same_capacity() -> None:
    from services.tas.core import FlavorSpec, TopologySpecIn

    s = two_hosts()  # flavor "tas-flavor" over x1, x2 (2 cpu each)
    other = FlavorSpec(name="other", topology=TopologySpecIn(name="hosts", levels=(HOST,)), node_labels={"tas": "yes"})
    s.assume("ns/early", "tas-flavor", (HeldPodSet(pod_set="main", values=("b1", "r1", "x2"), count=1,
                                                   requests={"cpu": 1000}),))
    s.set_flavor(other)  # a tree built after the hold still sees it
    assert domains(s.place_and_assume("ns/a", "tas-flavor", [req(2)])) == [(("b1", "r1", "x1"), 2)]
    out = s.place("other", [req(2)])
    assert isinstance(out, PlacementFailure)  # x1 taken by ns/a in the other flavor, x2 half taken
    assert domains(s.place("other", [req(1)])) == [(("x2",), 1)]
    s.release("ns/a")
    assert domains(s.place("other", [req(2)])) == [(("x1",), 2)]
    s.remove_flavor("tas-flavor")  # its holds no longer count anywhere
    assert domains(s.place("other", [req(2)])) == [(("x1",), 2)]
    assert domains(s.place("other", [req(4, mode="unconstrained", level=None)])) == [(("x1",), 2), (("x2",), 2)]
