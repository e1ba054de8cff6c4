"""The tas shell's world: mirror records and hold records in, answers and holds out (services/tas/world.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from kq.api.kueue import Workload
from kq.api.registry import decode_object
from kq.api.topology import topology_domains
from kq.api.workload import PodSetTopologyRequest
from kq.clock import FakeClock
from kq.mirror import ObjectRecord
from kq.placement import Candidate, PlacementHeld, PodSetPlacementRequest, SolveRequest
from services.tas.handlers import SolverInputs, caught_up
from services.tas.world import World

LEVELS = ["cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"]


def rec(kind: str, obj: dict, ns: str = "", deleted: bool = False) -> ObjectRecord:
    meta = obj["metadata"]
    return ObjectRecord(cluster="manager", kind=kind, namespace=ns, name=meta["name"], deleted=deleted,
                        resource_version=meta.get("resourceVersion", "1"), uid=meta.get("uid", ""),
                        raw=msgspec.json.encode(obj))


def node(name: str, block: str, rack: str, cpu: str = "1", ready: str = "True") -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"tas": "yes", LEVELS[0]: block, LEVELS[1]: rack, LEVELS[2]: name}},
            "status": {"allocatable": {"cpu": cpu, "pods": "10"}, "conditions": [{"type": "Ready", "status": ready}]}}


def world(topology: str = "dc") -> World:
    w = World("manager", hold_ttl_s=30.0)
    w.apply_record(rec("topology", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                                    "metadata": {"name": "dc"},
                                    "spec": {"levels": [{"nodeLabel": lv} for lv in LEVELS]}}))
    w.apply_record(rec("resourceflavor", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                          "metadata": {"name": "tas-flavor"},
                                          "spec": {"nodeLabels": {"tas": "yes"}, "topologyName": topology}}))
    for n in (node("x1", "b1", "r1"), node("x2", "b1", "r2"), node("x3", "b1", "r2"), node("x4", "b2", "r1", "2")):
        w.apply_record(rec("node", n))
    return w


def request(name: str, count: int, cpu: int = 1000, **topology: Any) -> SolveRequest:
    ps = PodSetPlacementRequest(name="main", count=count, flavor="tas-flavor", requests={"cpu": cpu},
                                topology_request=PodSetTopologyRequest(**topology) if topology else None)
    return SolveRequest(id=f"req-{name}", cluster="manager", namespace="ns", name=name, uid=f"uid-{name}",
                        pod_sets=(ps,))


def domains(reply) -> list[tuple[tuple[str, ...], int]]:
    return sorted((d.values, d.count) for d in topology_domains(reply.pod_sets[0].topology_assignment))


def test_required_rack_is_placed_and_held() -> None:
    w = world()
    reply, held = w.solve(request("a", 2, required=LEVELS[1]), now=100.0)
    assert reply.placed and held is not None
    assert domains(reply) == [(("x2",), 1), (("x3",), 1)]  # hostname-only, as Kueue writes it
    # The same capacity is not handed out twice: b1/r2 is full now, b2/r1 (x4, 2 cpu) is next.
    reply2, _ = w.solve(request("b", 2, required=LEVELS[1]), now=100.5)
    assert domains(reply2) == [(("x4",), 2)]
    reply3, held3 = w.solve(request("c", 2, required=LEVELS[1]), now=101.0)
    assert not reply3.placed and held3 is None
    assert "topology-rack" in reply3.message


def test_a_replayed_hold_is_respected_until_it_lapses() -> None:
    first = world()
    _, held = first.solve(request("a", 2, required=LEVELS[1]), now=100.0)
    assert isinstance(held, PlacementHeld)
    second = world()  # a replacement replica: same mirror, plus the hold record from the log
    second.apply_hold(held, now=101.0)
    reply, _ = second.solve(request("b", 2, required=LEVELS[1]), now=101.0)
    assert domains(reply) == [(("x4",), 2)]
    third = world()
    third.apply_hold(held, now=200.0)  # long lapsed: admission never acted on it
    reply, _ = third.solve(request("b", 2, required=LEVELS[1]), now=200.0)
    assert domains(reply) == [(("x2",), 1), (("x3",), 1)]


def test_a_status_confirms_the_hold_with_hostname_only_values() -> None:
    w = world()
    wl = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
          "metadata": {"name": "a", "namespace": "ns", "uid": "uid-a"},
          "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 2, "template": {"spec": {
              "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}}]},
          "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                     "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                     "admission": {"clusterQueue": "cq", "podSetAssignments": [{
                         "name": "main", "flavors": {"cpu": "tas-flavor"}, "count": 2,
                         "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": [{
                             "domainCount": 1, "valuesPerLevel": [{"universal": "x4"}],
                             "podCounts": {"universal": 2}}]}}]}}}
    assert isinstance(decode_object("workload", msgspec.json.encode(wl)), Workload)
    w.apply_record(rec("workload", wl, ns="ns"))
    reply, _ = w.solve(request("b", 2, required=LEVELS[1]), now=1.0)
    assert domains(reply) == [(("x2",), 1), (("x3",), 1)]  # x4 is taken by the admitted workload
    w.apply_record(rec("workload", wl, ns="ns", deleted=True))
    reply, _ = w.solve(request("c", 2, required=LEVELS[1]), now=2.0)
    assert domains(reply) == [(("x4",), 2)]  # freed; b's answer still holds b1/r2


def test_missing_topology_and_unknown_level_say_so() -> None:
    w = world(topology="nope")
    reply, held = w.solve(request("a", 1), now=1.0)
    assert not reply.placed and held is None
    assert reply.reason == "TopologyNotFound" and "nope" in reply.message
    w = world()
    reply, _ = w.solve(request("a", 1, required="example.com/zone"), now=1.0)
    assert not reply.placed and reply.reason == "UnknownLevel" and "example.com/zone" in reply.message


def test_not_ready_nodes_are_skipped() -> None:
    w = world()
    w.apply_record(rec("node", node("x4", "b2", "r1", "2", ready="False")))
    reply, _ = w.solve(request("a", 2, required=LEVELS[1]), now=1.0)
    assert domains(reply) == [(("x2",), 1), (("x3",), 1)]
    reply, _ = w.solve(request("b", 2, required=LEVELS[1]), now=1.0)
    assert not reply.placed


def test_a_hold_replayed_before_its_nodes_still_counts_once_they_come() -> None:
    first = world()
    _, held = first.solve(request("a", 2, required=LEVELS[1]), now=100.0)
    assert held is not None
    w = World("manager", hold_ttl_s=30.0)
    w.apply_hold(held, now=100.5)  # the log's hold records come before the mirror
    fresh = world()  # the same objects without the hold: b would get b1/r2
    w.apply_record(rec("topology", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                                    "metadata": {"name": "dc"},
                                    "spec": {"levels": [{"nodeLabel": lv} for lv in LEVELS]}}))
    w.apply_record(rec("resourceflavor", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                          "metadata": {"name": "tas-flavor"},
                                          "spec": {"nodeLabels": {"tas": "yes"}, "topologyName": "dc"}}))
    for n in (node("x1", "b1", "r1"), node("x2", "b1", "r2"), node("x3", "b1", "r2"), node("x4", "b2", "r1", "2")):
        w.apply_record(rec("node", n))
    reply, _ = w.solve(request("b", 2, required=LEVELS[1]), now=101.0)
    assert domains(reply) == [(("x4",), 2)]  # b1/r2 is still held for a
    assert domains(fresh.solve(request("b", 2, required=LEVELS[1]), now=101.0)[0]) == [(("x2",), 1), (("x3",), 1)]


def admitted(name: str, host: str, count: int, cpu: str, *, released: bool = False) -> dict:
    """A Workload holding quota with a topology assignment on one host (`released`: evicted and
    its quota given back, as the watcher writes it once the job stopped)."""
    cond = {"type": "QuotaReserved", "status": "False" if released else "True", "reason": "Pending" if released
            else "QuotaReserved", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    status: dict[str, Any] = {"conditions": [cond]}
    if not released:
        status["admission"] = {"clusterQueue": "cq", "podSetAssignments": [{
            "name": "main", "flavors": {"cpu": "tas-flavor"}, "count": count,
            "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": [{
                "domainCount": 1, "valuesPerLevel": [{"universal": host}], "podCounts": {"universal": count}}]}}]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": count, "template": {"spec": {
                "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}}}]},
            "status": status}


def test_a_request_from_a_newer_view_waits_for_the_victims_release() -> None:
    """The intermittent TAS preemption defect: admission saw the victim released (and asked again
    without it as a candidate) before the solver did, so the solver still counted its placement
    and answered NoFit; and the requeued victim, asking next, was placed on its own old hold."""
    w = world()
    w.apply_record(rec("workload", admitted("low", "x4", 1, "2"), ns="ns"), seq=10)
    preemptor = msgspec.structs.replace(request("foo", 1, cpu=2000, required=LEVELS[2]),
                                        candidates=(Candidate(namespace="ns", name="low", uid="uid-low"),))
    reply, held = w.solve(preemptor, now=1.0)
    assert reply.placed and [v.name for v in reply.victims] == ["low"] and held is not None
    # Admission applied low's release (seq 11) and asks again, low no longer a candidate.
    again = msgspec.structs.replace(request("foo", 1, cpu=2000, required=LEVELS[2]), as_of=11)
    assert w.behind(again)  # the shell waits for seq 11 before solving (services/tas/service.py)
    assert not w.solve(again, now=1.5)[0].placed  # what answering at once gave: no fit, no victim
    w.apply_record(rec("workload", admitted("low", "x4", 1, "2", released=True), ns="ns"), seq=11)
    assert not w.behind(again)
    reply, held = w.solve(again, now=2.0)
    assert reply.placed and domains(reply) == [(("x4",), 1)] and held is not None
    # The victim, requeued and asking from the same view, no longer finds its old place.
    reply, _ = w.solve(msgspec.structs.replace(request("low", 1, cpu=2000, required=LEVELS[2]), as_of=11), now=2.1)
    assert not reply.placed


def test_the_capacity_a_preemption_frees_is_held_for_the_preemptor() -> None:
    """The victim, released and requeued, asks before the preemptor asks again: it must not get
    its old place back (that ping-pong evicted the same victims five times over)."""
    w = world()
    w.apply_record(rec("workload", admitted("low", "x4", 1, "2"), ns="ns"), seq=10)
    preemptor = msgspec.structs.replace(request("foo", 1, cpu=2000, required=LEVELS[2]),
                                        candidates=(Candidate(namespace="ns", name="low", uid="uid-low"),))
    reply, held = w.solve(preemptor, now=1.0)
    assert [v.name for v in reply.victims] == ["low"] and held is not None
    w.apply_record(rec("workload", admitted("low", "x4", 1, "2", released=True), ns="ns"), seq=11)
    victim = msgspec.structs.replace(request("low", 1, cpu=2000, required=LEVELS[2]), as_of=11)
    assert not w.solve(victim, now=1.1)[0].placed
    reply, _ = w.solve(msgspec.structs.replace(request("foo", 1, cpu=2000, required=LEVELS[2]), as_of=11), now=1.2)
    assert reply.placed and domains(reply) == [(("x4",), 1)]


async def test_the_shell_waits_for_the_askers_view_then_answers() -> None:
    inputs = SolverInputs(("manager",), hold_ttl_s=30.0)
    clock = FakeClock()
    req = msgspec.structs.replace(request("foo", 1), as_of=5)
    waiting = asyncio.create_task(caught_up(inputs, req, clock, timeout_s=2.0))
    await clock.settle()
    assert not waiting.done()
    inputs.worlds["manager"].apply_record(rec("workload", admitted("low", "x4", 1, "2"), ns="ns"), seq=5)
    inputs.workloads_applied.set()
    assert await asyncio.wait_for(waiting, 5.0)
    late = asyncio.create_task(caught_up(inputs, msgspec.structs.replace(req, as_of=9), clock, timeout_s=2.0))
    await clock.settle()
    await clock.advance(2.5)
    assert await asyncio.wait_for(late, 5.0) is False  # still behind: answered from the older view


def placed_on(name: str, hosts: dict[str, int], cpu: str, **topology: str) -> dict:
    wl = admitted(name, "", sum(hosts.values()), cpu)
    ps = wl["status"]["admission"]["podSetAssignments"][0]
    ps["topologyAssignment"] = {"levels": ["kubernetes.io/hostname"], "slices": [{
        "domainCount": len(hosts), "valuesPerLevel": [{"individual": {"roots": sorted(hosts)}}],
        "podCounts": {"individual": [hosts[h] for h in sorted(hosts)]}}]}
    if topology:
        wl["spec"]["podSets"][0]["topologyRequest"] = topology
    return wl


def repair(name: str, count: int, node: str, **topology: Any) -> SolveRequest:
    return msgspec.structs.replace(request(name, count, **topology), repair_node=node)


def test_a_failed_node_is_replaced_within_the_required_domain() -> None:
    w = world()
    w.apply_record(rec("workload", placed_on("a", {"x1": 1}, "1", required=LEVELS[0]), ns="ns"), seq=1)
    w.apply_record(rec("node", node("x1", "b1", "r1", ready="False")))
    reply, held = w.solve(repair("a", 1, "x1", required=LEVELS[0]), now=1.0)
    assert reply.placed and held is not None and held.repair_node == "x1"
    assert domains(reply) == [(("x2",), 1)]  # within block b1, never the failed node
    # The repair is held over the status (which still names x1) until the status shows it.
    assert [h.values[-1] for h in w.solver.holds["ns/a"].pod_sets] == ["x2"]
    w.apply_record(rec("workload", placed_on("a", {"x1": 1}, "1", required=LEVELS[0]) | {"metadata": {
        "name": "a", "namespace": "ns", "uid": "uid-a", "resourceVersion": "7"}}, ns="ns"), seq=2)
    assert [h.values[-1] for h in w.solver.holds["ns/a"].pod_sets] == ["x2"]  # unhealthyNodes echo: still x2
    w.apply_record(rec("workload", placed_on("a", {"x2": 1}, "1", required=LEVELS[0]), ns="ns"), seq=3)
    assert "ns/a" not in w.handed_out  # the status shows the repair: the answer is spent


def test_no_replacement_inside_the_required_domain_is_a_failure() -> None:
    w = world()
    w.apply_record(rec("workload", placed_on("a", {"x2": 1, "x3": 1}, "1", required=LEVELS[1]), ns="ns"), seq=1)
    w.apply_record(rec("node", node("x3", "b1", "r2", ready="False")))
    reply, held = w.solve(repair("a", 2, "x3", required=LEVELS[1]), now=1.0)
    assert not reply.placed and held is None and reply.reason == "NoReplacement"
    assert "x3" in reply.message
    assert sorted(h.values[-1] for h in w.solver.holds["ns/a"].pod_sets) == ["x2", "x3"]  # unchanged


def test_a_workload_without_a_topology_assignment_is_not_decoded() -> None:
    """Where no flavor is topology-aware, every Workload would decode only to change nothing: a record
    without a topologyAssignment that the world holds nothing for is skipped (its sequence counts)."""
    w = world()
    # Not a Workload the API types accept: decoding it would raise.
    w.apply_record(rec("workload", {"metadata": {"name": "plain", "uid": "u"}, "spec": {"podSets": "?"}},
                       ns="ns"), seq=7)
    assert w.workload_seq == 7 and not w.confirmed


def test_a_workload_that_stops_holding_its_placement_is_released() -> None:
    """The skip must not keep a stale hold: once a workload holds a placement, every later record of it
    (now without a topologyAssignment, or its deletion) goes through."""
    w = world()
    w.apply_record(rec("workload", admitted("low", "x4", 1, "2"), ns="ns"), seq=1)
    assert not w.solve(request("b", 1, cpu=2000, required=LEVELS[2]), now=1.0)[0].placed
    released = admitted("low", "x4", 1, "2", released=True)
    assert b"topologyAssignment" not in msgspec.json.encode(released)
    w.apply_record(rec("workload", released, ns="ns"), seq=2)
    assert domains(w.solve(request("c", 1, cpu=2000, required=LEVELS[2]), now=2.0)[0]) == [(("x4",), 1)]
    w.apply_record(rec("workload", admitted("d", "x1", 1, "1"), ns="ns"), seq=3)
    assert "ns/d" in w.confirmed
    w.apply_record(rec("workload", {"metadata": {"name": "d", "uid": "uid-d"}}, ns="ns", deleted=True), seq=4)
    assert "ns/d" not in w.confirmed and "ns/d" not in w.solver.holds


def test_our_answer_for_a_workload_recreated_without_a_placement_is_dropped() -> None:
    w = world()
    reply, held = w.solve(request("e", 1, cpu=2000, required=LEVELS[2]), now=1.0)
    assert reply.placed and held is not None and "ns/e" in w.handed_out
    again = admitted("e", "x4", 1, "2", released=True)
    again["metadata"]["uid"] = "uid-e-2"  # deleted and created again: our answer was for the old one
    w.apply_record(rec("workload", again, ns="ns"), seq=5)
    assert "ns/e" not in w.handed_out
