"""Properties of the placement core, on random topologies, capacities and request streams.

- never more pods on a node than its free capacity (also across held placements);
- a required placement is always within one domain of the required level;
- same inputs give the same placement (also with nodes added in another order);
- the maintained count views place exactly as the full-tree reference does,
  through any sequence of holds and releases (the incremental updates are exact);
- capacity held for one workload is never handed to another.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tas_builders import HOST

from services.tas.core import (
    FlavorSpec,
    NodeInfo,
    Placement,
    PodSetRequest,
    TasSolver,
    TopologySpecIn,
)

LEVELS = ("t/block", "t/rack", HOST)


@st.composite
def clusters(draw: Any) -> list[NodeInfo]:
    n = draw(st.integers(1, 14))
    nodes = []
    for i in range(n):
        b, r = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        nodes.append(NodeInfo(name=f"n{i}", labels={"t/block": f"b{b}", "t/rack": f"b{b}r{r}", HOST: f"n{i}"},
                              allocatable={"cpu": draw(st.sampled_from([0, 1000, 2000, 3000, 4000])),
                                           "pods": draw(st.integers(1, 6))},
                              ready=draw(st.booleans()) or draw(st.booleans())))
    return nodes


@st.composite
def requests(draw: Any) -> PodSetRequest:
    count = draw(st.integers(1, 8))
    mode = draw(st.sampled_from(["required", "preferred", "unconstrained", "slices"]))
    cpu = draw(st.sampled_from([500, 1000, 1500]))
    if mode == "slices":
        size = draw(st.sampled_from([d for d in (1, 2, 4) if count % d == 0]))
        slice_mode = draw(st.sampled_from(["required", "preferred", "slices-only"]))
        slice_level = draw(st.sampled_from(LEVELS[1:]))
        level = None if slice_mode == "slices-only" else draw(
            st.sampled_from(LEVELS[: LEVELS.index(slice_level) + 1]))
        return PodSetRequest(name="main", count=count, requests={"cpu": cpu}, mode=slice_mode,
                             level=level, slice_level=slice_level, slice_size=size)
    level = draw(st.sampled_from(LEVELS)) if mode != "unconstrained" else None
    return PodSetRequest(name="main", count=count, requests={"cpu": cpu}, mode=mode, level=level)


def build(nodes: list[NodeInfo], reference: bool = False) -> TasSolver:
    s = TasSolver(reference=reference)
    s.set_flavor(FlavorSpec(name="f", topology=TopologySpecIn(name="t", levels=LEVELS)))
    for node in nodes:
        s.upsert_node(node)
    return s


def node_fits(node: NodeInfo, used_pods: int, used_cpu: int) -> bool:
    return used_pods <= node.allocatable["pods"] and used_cpu <= node.allocatable["cpu"]


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def workloads(draw: Any) -> list[PodSetRequest]:
    workers = draw(requests())
    if workers.mode == "slices-only" or not draw(st.booleans()):
        return [workers]
    workers = msgspec.structs.replace(workers, group="g")
    leader = PodSetRequest(name="leader", count=1, requests={"cpu": draw(st.sampled_from([500, 2000]))},
                           mode=workers.mode, level=workers.level, group="g")
    return [workers, leader]


@SETTINGS
@given(clusters(), st.lists(st.tuples(workloads(), st.booleans()), min_size=1, max_size=12))
def test_stream_matches_reference_and_never_overcommits(nodes: list[NodeInfo], stream: list[Any]) -> None:
    fast, ref = build(nodes), build(list(reversed(nodes)), reference=True)
    by_name = {n.name: n for n in nodes}
    live: list[str] = []
    for i, (pod_sets, release_one) in enumerate(stream):
        key = f"w{i}"
        req = pod_sets[0]
        a = fast.place_and_assume(key, "f", pod_sets)
        b = ref.place_and_assume(key, "f", pod_sets)
        assert a == b
        if isinstance(a, Placement):
            live.append(key)
            values = [d.values for d in a.pod_sets[0].domains]
            assert sum(d.count for d in a.pod_sets[0].domains) == req.count
            if req.mode == "required":
                depth = LEVELS.index(req.level or HOST) + 1
                assert len({v[:depth] for v in values}) == 1
            if req.slice_size and req.slice_level:
                depth = LEVELS.index(req.slice_level) + 1
                per_slice_domain: dict[tuple[str, ...], int] = {}
                for d in a.pod_sets[0].domains:
                    per_slice_domain[d.values[:depth]] = per_slice_domain.get(d.values[:depth], 0) + d.count
                assert all(n % req.slice_size == 0 for n in per_slice_domain.values())
            for v in values:
                assert by_name[v[-1]].ready
            if len(pod_sets) == 2:
                lead = a.for_pod_set("leader")
                assert lead is not None and sum(d.count for d in lead.domains) == 1
                if req.mode == "required":
                    depth = LEVELS.index(req.level or HOST) + 1
                    assert {d.values[:depth] for d in lead.domains} == {v[:depth] for v in values}
        if release_one and live:
            victim = live.pop(0)
            fast.release(victim)
            ref.release(victim)
        # held capacity never exceeds a node's allocatable: no two workloads got the same capacity
        pods: dict[str, int] = {}
        cpu: dict[str, int] = {}
        for record in fast.holds.values():
            for h in record.pod_sets:  # every pod set of every workload, leaders included
                pods[h.values[-1]] = pods.get(h.values[-1], 0) + h.count
                cpu[h.values[-1]] = cpu.get(h.values[-1], 0) + h.count * h.requests["cpu"]
        for name in pods:
            assert node_fits(by_name[name], pods[name], cpu[name])


@SETTINGS
@given(clusters(), requests(), st.randoms(use_true_random=False))
def test_same_inputs_same_placement(nodes: list[NodeInfo], req: PodSetRequest, rnd: Any) -> None:
    shuffled = list(nodes)
    rnd.shuffle(shuffled)
    assert build(nodes).place("f", [req]) == build(shuffled).place("f", [req])


@SETTINGS
@given(clusters(), requests(), st.integers(0, 3))
def test_placement_respects_free_capacity_with_bound_pods(nodes: list[NodeInfo], req: PodSetRequest,
                                                           bound: int) -> None:
    s = build(nodes)
    for i, node in enumerate(nodes[:bound]):
        s.pod_bound(f"p{i}", node.name, {"cpu": 500})
    outcome = s.place("f", [req])
    if not isinstance(outcome, Placement):
        return
    by_name = {n.name: n for n in nodes}
    for d in outcome.pod_sets[0].domains:
        node = by_name[d.values[-1]]
        used_pods = 1 if nodes.index(node) < bound else 0
        assert node_fits(node, used_pods + d.count, used_pods * 500 + d.count * req.requests["cpu"])
