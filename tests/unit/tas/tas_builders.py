"""Small builders for TAS core tests: nodes by (block, rack, host, cpu), solvers, outcomes."""

from __future__ import annotations

from services.tas.core import (
    HOSTNAME_LABEL,
    FlavorSpec,
    NodeInfo,
    Placement,
    PlacementFailure,
    TaintSpec,
    TasSolver,
    TolerationSpec,
    TopologySpecIn,
)

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
HOST = HOSTNAME_LABEL
TWO = (BLOCK, RACK)
THREE = (BLOCK, RACK, HOST)
ONE = (HOST,)


def node(block: str, rack: str, host: str, cpu: float, pods: int = 10, memory: int | None = None,
         taints: tuple[TaintSpec, ...] = (), ready: bool = True, unschedulable: bool = False,
         extra: dict[str, str] | None = None) -> NodeInfo:
    alloc = {"cpu": int(cpu * 1000), "pods": pods}
    if memory is not None:
        alloc["memory"] = memory
    labels = {BLOCK: block, RACK: rack, HOST: host, "tas": "yes", **(extra or {})}
    return NodeInfo(name=f"{block}-{rack}-{host}", labels=labels, allocatable=alloc, taints=taints,
                    ready=ready, unschedulable=unschedulable)


GI = 1 << 30
# Kueue's defaultNodes: b1: r1{x3}, r2{x5,x1,x6}; b2: r1{x2}, r2{x4 (2 cpu)}
DEFAULT = [node("b1", "r1", "x3", 1, memory=GI), node("b1", "r2", "x5", 1, memory=GI),
           node("b1", "r2", "x1", 1, memory=GI), node("b1", "r2", "x6", 1, memory=GI),
           node("b2", "r1", "x2", 1, memory=GI), node("b2", "r2", "x4", 2, pods=40, memory=4 * GI)]
# scatteredNodes: b1/r1{x3:4,x5:1,x1:1}, b2/r1{x6:2,x2:1}
SCATTERED = [node("b1", "r1", "x3", 4), node("b1", "r1", "x5", 1), node("b1", "r1", "x1", 1),
             node("b2", "r1", "x6", 2), node("b2", "r1", "x2", 1)]
# binaryTreesNodes: b1/r1{x3,x5} b1/r2{x1,x6} b2/r1{x2,x4} b2/r2{x7,x8}, 1 cpu each
BINARY = [node("b1", "r1", "x3", 1), node("b1", "r1", "x5", 1), node("b1", "r2", "x1", 1), node("b1", "r2", "x6", 1),
          node("b2", "r1", "x2", 1), node("b2", "r1", "x4", 1), node("b2", "r2", "x7", 1), node("b2", "r2", "x8", 1)]


def solver(nodes: list[NodeInfo], levels: tuple[str, ...], *, reference: bool = False,
           tolerations: tuple[TolerationSpec, ...] = ()) -> TasSolver:
    s = TasSolver(reference=reference)
    s.set_flavor(FlavorSpec(name="tas-flavor", topology=TopologySpecIn(name="default", levels=levels),
                            node_labels={"tas": "yes"}, tolerations=tolerations))
    for n in nodes:
        s.upsert_node(n)
    return s


def domains(outcome: Placement | PlacementFailure, pod_set: str = "main") -> list[tuple[tuple[str, ...], int]]:
    assert isinstance(outcome, Placement), outcome
    placed = outcome.for_pod_set(pod_set)
    assert placed is not None
    return [(d.values, d.count) for d in placed.domains]
