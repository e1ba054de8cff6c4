"""Placement table tests adapted from Kueue's TestFindTopologyAssignments (pkg/cache/scheduler/tas_cache_test.go).

Each case names the Kueue case it comes from; the whole outcome is compared: the
domains (every level's value, top first) and counts, or the failure's kind and message.
Every case runs twice: on the maintained count views and on the full-tree reference.
"""

from __future__ import annotations

from typing import Any

import pytest
from tas_builders import BINARY, BLOCK, DEFAULT, HOST, ONE, RACK, SCATTERED, THREE, TWO, domains, node, solver

from services.tas.core import PlacementFailure, PodSetRequest, RequestMode, TaintSpec, TolerationSpec

CPU = {"cpu": 1000}


def ps(count: int, mode: RequestMode, level: str | None = None, **kw: Any) -> PodSetRequest:
    return PodSetRequest(name=kw.pop("name", "main"), count=count, requests=kw.pop("requests", CPU),
                         mode=mode, level=level, **kw)


RACKS_THEN_NODES = [node("b1", "r1", "x3", 2), node("b1", "r2", "x5", 2, pods=20), node("b1", "r3", "x1", 1),
                    node("b1", "r3", "x6", 1), node("b1", "r3", "x2", 1), node("b1", "r3", "x4", 1)]
ONE_RACK = [node("b1", "r1", "x3", 2), node("b1", "r1", "x5", 1), node("b1", "r1", "x1", 1)]
THREE_BY_3 = [node("b1", "r1", h, 3) for h in ("x3", "x5", "x1")]
FOUR_HOSTS = [node("b1", "r1", "x3", 6), node("b1", "r1", "x5", 5), node("b1", "r1", "x1", 4), node("b1", "r1", "x6", 2)]
SEVEN = [node("b1", "r1", "x3", 1), node("b1", "r1", "x5", 1), node("b1", "r2", "x1", 1), node("b1", "r2", "x6", 1),
         node("b1", "r2", "x2", 1), node("b2", "r1", "x4", 1), node("b2", "r1", "x7", 1)]
LAST_DOMAIN = [node("b1", "r1", "x3", 4), node("b1", "r1", "x5", 3), node("b1", "r1", "x1", 2)]
UNBALANCED = [node("b1", "r1", "x3", 3), node("b1", "r1", "x5", 3), node("b1", "r1", "x1", 3), node("b2", "r1", "x6", 6)]
SLICE_HOSTS = [node("b1", "r1", "x3", 3), node("b1", "r1", "x5", 2), node("b1", "r1", "x1", 2)]

CASES: list[tuple[str, list[Any], tuple[str, ...], list[PodSetRequest], Any]] = [
    ("minimize-racks-before-nodes", RACKS_THEN_NODES, THREE, [ps(4, "required", BLOCK)],
     [(("b1", "r3", "x1"), 1), (("b1", "r3", "x2"), 1), (("b1", "r3", "x4"), 1), (("b1", "r3", "x6"), 1)]),
    ("node-that-holds-all-pods", ONE_RACK, THREE, [ps(2, "required", BLOCK)], [(("b1", "r1", "x3"), 2)]),
    ("implied-unconstrained-scattered", SCATTERED, THREE, [ps(6, "implied")],
     [(("b1", "r1", "x1"), 1), (("b1", "r1", "x3"), 1), (("b1", "r1", "x5"), 1), (("b2", "r1", "x2"), 1),
      (("b2", "r1", "x6"), 2)]),
    ("unconstrained-scattered", SCATTERED, THREE, [ps(6, "unconstrained")],
     [(("b1", "r1", "x1"), 1), (("b1", "r1", "x3"), 1), (("b1", "r1", "x5"), 1), (("b2", "r1", "x2"), 1),
      (("b2", "r1", "x6"), 2)]),
    ("unconstrained-single-pod", DEFAULT, THREE, [ps(1, "unconstrained")], [(("b1", "r1", "x3"), 1)]),
    ("block-required-4-hosts", BINARY, THREE, [ps(4, "required", BLOCK)],
     [(("b1", "r1", "x3"), 1), (("b1", "r1", "x5"), 1), (("b1", "r2", "x1"), 1), (("b1", "r2", "x6"), 1)]),
    ("host-required-single-pod", DEFAULT, THREE, [ps(1, "required", HOST)], [(("b1", "r1", "x3"), 1)]),
    ("rack-required-single-pod", DEFAULT, TWO, [ps(1, "required", RACK)], [(("b1", "r1"), 1)]),
    ("rack-required-multiple-pods", DEFAULT, TWO, [ps(3, "required", RACK)], [(("b1", "r2"), 3)]),
    ("rack-required-too-many", DEFAULT, TWO, [ps(4, "required", RACK)],
     ("NoFit", 'topology "default" allows to fit only 3 out of 4 pod(s) in one domain of the required level '
      "cloud.com/topology-rack")),
    ("block-required-single-pod-one-rack", DEFAULT, TWO, [ps(1, "required", BLOCK)], [(("b2", "r1"), 1)]),
    ("block-required-spread-two-racks", DEFAULT, TWO, [ps(4, "required", BLOCK)], [(("b1", "r1"), 1), (("b1", "r2"), 3)]),
    ("block-required-too-many", DEFAULT, TWO, [ps(5, "required", BLOCK)],
     ("NoFit", 'topology "default" allows to fit only 4 out of 5 pod(s) in one domain of the required level '
      "cloud.com/topology-block")),
    ("block-preferred-multiple-blocks", DEFAULT, TWO, [ps(6, "preferred", BLOCK)],
     [(("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2)]),
    ("rack-preferred-only-block-fits", DEFAULT, TWO, [ps(4, "preferred", RACK)],
     [(("b1", "r1"), 1), (("b1", "r2"), 3)]),
    ("rack-preferred-multiple-blocks", DEFAULT, TWO, [ps(6, "preferred", RACK)],
     [(("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2)]),
    ("block-preferred-whole-topology-too-small", DEFAULT, TWO, [ps(10, "preferred", BLOCK)],
     ("NoFit", 'topology "default" allows to fit only 7 out of 10 pod(s)')),
    ("rack-required-memory", DEFAULT, TWO, [ps(4, "required", RACK, requests={"memory": 1024})], [(("b1", "r1"), 4)]),
    ("no-matching-node", [], ONE, [ps(1, "required", HOST)],
     ("NoFit", "no topology domains at level: kubernetes.io/hostname")),
    ("host-slices-tight-fit", SLICE_HOSTS, THREE,
     [ps(4, "required", BLOCK, slice_level=HOST, slice_size=2)], [(("b1", "r1", "x1"), 2), (("b1", "r1", "x5"), 2)]),
    ("block-required-host-slices", THREE_BY_3, THREE, [ps(6, "required", BLOCK, slice_level=HOST, slice_size=2)],
     [(("b1", "r1", "x1"), 2), (("b1", "r1", "x3"), 2), (("b1", "r1", "x5"), 2)]),
    ("host-slices-more-free-first-then-tight-fit", FOUR_HOSTS, THREE,
     [ps(12, "required", BLOCK, slice_level=HOST, slice_size=2)],
     [(("b1", "r1", "x1"), 4), (("b1", "r1", "x3"), 6), (("b1", "r1", "x6"), 2)]),
    ("block-required-rack-slices", SEVEN, THREE, [ps(4, "required", BLOCK, slice_level=RACK, slice_size=2)],
     [(("b1", "r1", "x3"), 1), (("b1", "r1", "x5"), 1), (("b1", "r2", "x1"), 1), (("b1", "r2", "x2"), 1)]),
    ("block-preferred-rack-slices", DEFAULT, THREE, [ps(4, "preferred", BLOCK, slice_level=RACK, slice_size=2)],
     [(("b1", "r2", "x1"), 1), (("b1", "r2", "x5"), 1), (("b2", "r2", "x4"), 2)]),
    ("host-slices-optimize-last-domain", LAST_DOMAIN, THREE,
     [ps(6, "required", BLOCK, slice_level=HOST, slice_size=2)], [(("b1", "r1", "x1"), 2), (("b1", "r1", "x3"), 4)]),
    ("block-preferred-host-slices-unbalanced-blocks", UNBALANCED, THREE,
     [ps(12, "preferred", BLOCK, slice_level=HOST, slice_size=3)],
     [(("b1", "r1", "x1"), 3), (("b1", "r1", "x3"), 3), (("b2", "r1", "x6"), 6)]),
    ("block-preferred-fits-two-blocks", [node("b1", "r1", "x1", 2), node("b2", "r1", "x2", 1), node("b3", "r1", "x3", 4)],
     (BLOCK,), [ps(5, "preferred", BLOCK)], [(("b2",), 1), (("b3",), 4)]),
    ("rack-required-fits-some-racks", DEFAULT, TWO, [ps(2, "required", RACK)], [(("b2", "r2"), 2)]),
    ("unknown-level", DEFAULT, TWO, [ps(1, "required", "cloud.com/topology-zone")],
     ("UnknownLevel", "no requested topology level: cloud.com/topology-zone (topology 'default' has "
      "cloud.com/topology-block, cloud.com/topology-rack)")),
    ("slice-size-not-divisor", SLICE_HOSTS, THREE, [ps(3, "required", BLOCK, slice_level=HOST, slice_size=2)],
     ("SliceSizeNotDivisor", "pod set main: podset-slice-size 2 does not divide the pod count 3")),
    ("slice-level-above-podset-level", SLICE_HOSTS, THREE, [ps(2, "required", HOST, slice_level=RACK, slice_size=2)],
     ("InvalidRequest", "podset slice topology cloud.com/topology-rack is above the podset topology "
      "kubernetes.io/hostname")),
    ("not-ready-node", [node("b1", "r1", "x1", 1, ready=False)], ONE, [ps(1, "required", HOST)],
     ("NoFit", 'topology "default" doesn\'t allow to fit any of 1 pod(s) in one domain of the required level '
      "kubernetes.io/hostname")),
    ("unschedulable-node", [node("b1", "r1", "x1", 1, unschedulable=True)], ONE, [ps(1, "required", HOST)],
     ("NoFit", 'topology "default" doesn\'t allow to fit any of 1 pod(s) in one domain of the required level '
      "kubernetes.io/hostname")),
    ("untolerated-taint", [node("b1", "r1", "x1", 1, taints=(TaintSpec(key="example.com/gpu", value="present"),))],
     ONE, [ps(1, "required", HOST)],
     ("NoFit", 'topology "default" doesn\'t allow to fit any of 1 pod(s) in one domain of the required level '
      'kubernetes.io/hostname. Total nodes: 1; excluded: taint "example.com/gpu=present:NoSchedule": 1')),
    ("tolerated-taint-in-pod-set", [node("b1", "r1", "x1", 1, taints=(TaintSpec(key="example.com/gpu"),))], ONE,
     [ps(1, "required", HOST, tolerations=(TolerationSpec(key="example.com/gpu", operator="Exists"),))],
     [(("x1",), 1)]),
    ("not-enough-allocatable-pods", [node("b1", "r1", "x1", 4, pods=1)], ONE, [ps(2, "required", HOST)],
     ("NoFit", 'topology "default" allows to fit only 1 out of 2 pod(s) in one domain of the required level '
      "kubernetes.io/hostname")),
    ("resource-exclusion-message", [node("b1", "r1", "x1", 1), node("b1", "r1", "x2", 0)], ONE,
     [ps(2, "required", HOST)],
     ("NoFit", 'topology "default" allows to fit only 1 out of 2 pod(s) in one domain of the required level '
      'kubernetes.io/hostname. Total nodes: 2; excluded: resource "cpu": 1')),
    ("node-selector", [node("b1", "r1", "x1", 1), node("b1", "r1", "x2", 1, extra={"zone": "a"})], ONE,
     [ps(1, "required", HOST, node_selector={"zone": "a"})], [(("x2",), 1)]),
    ("multiple-pod-sets-share-capacity", [node("b1", "r1", "x1", 4, pods=3)], ONE,
     [ps(2, "required", HOST, name="a"), ps(2, "required", HOST, name="b")],
     ("NoFit", 'topology "default" allows to fit only 1 out of 2 pod(s) in one domain of the required level '
      "kubernetes.io/hostname")),
]


@pytest.mark.parametrize("reference", [False, True], ids=["views", "reference"])
@pytest.mark.parametrize(("nodes", "levels", "pod_sets", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_kueue_case(nodes: list[Any], levels: tuple[str, ...], pod_sets: list[PodSetRequest], want: Any,
                    reference: bool) -> None:
    s = solver(nodes, levels, reference=reference)
    outcome = s.place("tas-flavor", pod_sets)
    if isinstance(want, tuple):
        assert isinstance(outcome, PlacementFailure), outcome
        assert (outcome.kind, outcome.message) == want
    else:
        names = {p.name for p in pod_sets}
        assert domains(outcome, sorted(names)[0]) == want


def test_hostname_leaves_write_only_the_hostname_level() -> None:
    outcome = solver(SLICE_HOSTS, THREE).place("tas-flavor", [ps(4, "required", BLOCK, slice_level=HOST, slice_size=2)])
    assert not isinstance(outcome, PlacementFailure)
    ta = outcome.pod_sets[0].assignment
    assert ta.levels == (HOST,)
    assert ta.slices[0].domain_count == 2
    assert ta.slices[0].pod_counts.universal == 2


def test_pod_set_group_places_leader_with_workers() -> None:
    # only rack b1/r1 holds the leader (2 cpu) and 3 workers (1 cpu); as Kueue's descent does, the leader goes to
    # the node with the most room (x5) and the workers fill x5's rest and x3
    nodes = [node("b1", "r1", "x3", 2), node("b1", "r1", "x5", 3), node("b2", "r1", "x2", 1), node("b2", "r1", "x4", 1)]
    s = solver(nodes, THREE)
    outcome = s.place("tas-flavor", [
        ps(3, "required", RACK, name="workers", group="g"),
        ps(1, "required", RACK, name="leader", group="g", requests={"cpu": 2000}),
    ])
    assert domains(outcome, "leader") == [(("b1", "r1", "x5"), 1)]
    assert domains(outcome, "workers") == [(("b1", "r1", "x3"), 2), (("b1", "r1", "x5"), 1)]


def test_pod_set_group_fails_when_no_rack_holds_leader_and_workers() -> None:
    nodes = [node("b1", "r1", "x3", 2), node("b2", "r1", "x2", 2)]
    outcome = solver(nodes, THREE).place("tas-flavor", [
        ps(2, "required", RACK, name="workers", group="g"),
        ps(1, "required", RACK, name="leader", group="g", requests={"cpu": 1000}),
    ])
    assert isinstance(outcome, PlacementFailure)
    assert outcome.kind == "NoFit"
