"""Node failure: a replacement for the pods of an admitted pod set that were on a lost node.

As Kueue's findReplacementAssignment: the pods on the node are placed again, within
the domain of the required level that holds the rest of the pod set (or, with
slices, within the slice domain the lost pods leave incomplete); anywhere the
request allows otherwise. The lost node itself is never used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kq.api.topology import TopologyDomain
from services.tas.core.model import HeldPodSet, PlacementFailure, PodSetPlacement, PodSetRequest

if TYPE_CHECKING:
    from services.tas.core.solver import TasSolver

__all__ = ["replace_node", "rehold_pod_set"]


def _fail(flavor: str, ps: PodSetRequest, message: str) -> PlacementFailure:
    return PlacementFailure(flavor=flavor, pod_set=ps.name, kind="NoReplacement", message=message)


def replace_node(solver: TasSolver, workload: str, ps: PodSetRequest,
                 node: str) -> tuple[PodSetPlacement, tuple[TopologyDomain, ...]] | PlacementFailure:
    record = solver.holds.get(workload)
    if record is None:
        return _fail("", ps, f"workload {workload} has no topology placement to repair")
    tree = solver.trees.get(record.flavor)
    if tree is None:
        return _fail(record.flavor, ps, f"no topology-aware flavor {record.flavor!r}")
    if not tree.host_leaves:
        return _fail(tree.flavor.name, ps, "node replacement needs kubernetes.io/hostname as the lowest topology level")
    mine = [h for h in record.pod_sets if h.pod_set == ps.name]
    lost = sum(h.count for h in mine if h.values[-1] == node)
    kept = [h for h in mine if h.values[-1] != node]
    current = tuple(TopologyDomain(h.values, h.count) for h in kept)
    if lost == 0:
        return solver.pod_set_placement(tree, ps, [(tree.by_level[tree.last][d.values], d.count) for d in current]), ()
    for h in kept:
        leaf = tree.leaf_of(h.values)
        if leaf is None or not tree.leaf_nodes.get(leaf):
            return _fail(tree.flavor.name, ps, "Cannot replace the node, because the existing topologyAssignment is "
                         f"invalid, as it contains the stale domain {h.values[-1]}")
    restrict: int | None = None
    request = ps
    size = ps.slice_size or 1
    kept_leaves = [tree.by_level[tree.last][h.values] for h in kept]
    if ps.slice_level is not None and lost % size != 0:
        level = tree.levels.index(ps.slice_level)
        per_domain: dict[int, int] = {}
        for leaf, h in zip(kept_leaves, kept, strict=True):
            a = tree.ancestor_at(leaf, level)
            per_domain[a] = per_domain.get(a, 0) + h.count
        for a in sorted(per_domain, key=tree.dvalues.__getitem__):
            if (per_domain[a] + lost) % size == 0:
                restrict = a
                break
        request = PodSetRequest(name=ps.name, count=lost, requests=ps.requests, mode=ps.mode, level=ps.level,
                                tolerations=ps.tolerations, node_selector=ps.node_selector)
    else:
        request = PodSetRequest(name=ps.name, count=lost, requests=ps.requests, mode=ps.mode, level=ps.level,
                                slice_level=ps.slice_level, slice_size=ps.slice_size,
                                tolerations=ps.tolerations, node_selector=ps.node_selector)
        if ps.mode == "required" and ps.level in tree.levels and kept_leaves:
            restrict = tree.ancestor_at(kept_leaves[0], tree.levels.index(ps.level))
    placed = solver.place_group(tree, [request], restrict=restrict, exclude=frozenset({node}))
    if isinstance(placed, PlacementFailure):
        return _fail(tree.flavor.name, ps, f"cannot find replacement assignment for unhealthy node {node}: "
                     f"{placed.message}")
    replacement = placed[0].domains
    merged: dict[tuple[str, ...], int] = {}
    for d in (*current, *replacement):
        merged[d.values] = merged.get(d.values, 0) + d.count
    chosen = [(tree.by_level[tree.last][v], n) for v, n in sorted(merged.items())]
    return solver.pod_set_placement(tree, ps, chosen), replacement


def rehold_pod_set(solver: TasSolver, workload: str, placement: PodSetPlacement, requests: dict[str, int]) -> None:
    """Hold `placement` for its pod set instead of what the workload held for it."""
    record = solver.holds[workload]
    others = tuple(h for h in record.pod_sets if h.pod_set != placement.pod_set)
    mine = tuple(HeldPodSet(pod_set=placement.pod_set, values=d.values, count=d.count, requests=requests)
                 for d in placement.domains)
    state = record.state
    solver.assume(workload, record.flavor, others + mine)
    if state == "confirmed":
        solver.confirm(workload)
