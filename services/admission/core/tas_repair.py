"""TAS node failure in the admission core: replace the lost node within the workload's
constraints, or evict (Kueue's TASFailedNodeReplacement with FailFast, its default).

An admitted workload whose topology assignment places pods on a node recorded in
status.unhealthyNodes is not evicted at once: the solver is asked for a replacement of that one
node (a PlacementRequest with `repair_node`; the solver keeps the other pods where they are and
places the lost ones inside the domain the request requires, never on the failed node). Placed:
a TopologyRepair writes the merged assignment into status.admission (same quota, same flavors)
and clears unhealthyNodes. Not placed, or more than one failed node: evicted with reason
NodeFailures and Kueue's message, then requeued and placed again from scratch.
"""

from __future__ import annotations

import msgspec

from .decisions import PlacementRequest, PodSetAsk, TopologyRepair
from .model import PlacementAnswer, Workload
from .parts import Parts
from .placements import pod_set_asks
from .workloads import ReservedInfo

NODE_FAILURES = "NodeFailures"


def _no_replacement(nodes: list[str]) -> str:
    return f"Workload was evicted as there was no replacement for unhealthy node(s): {','.join(nodes)}"


def _asks_on_node(p: Parts, info: ReservedInfo, node: str, used_by: set[str]) -> list[PodSetAsk] | str:
    cq = p.tree.cqs.get(info.cq)
    if cq is None:
        return f"ClusterQueue {info.cq} not found"
    specs = {ps.name: ps for ps in info.wl.pod_sets}
    mine = [(specs[psa.name], psa.count, set(psa.flavors.values())) for psa in info.admission.pod_sets
            if psa.name in used_by and psa.name in specs]
    return pod_set_asks(mine, cq, p.tree.flavors)


def repair_or_evict(p: Parts, w: Workload, info: ReservedInfo, failed: dict[str, set[str]]) -> str | None:
    """Ask for a replacement (once per failed node and workload version); `failed`: failed node
    -> the pod sets placed on it. Returns the eviction message when there can be none."""
    nodes = sorted(failed)
    if len(nodes) > 1:  # Kueue replaces a single node; several failed nodes evict at once
        return _no_replacement(nodes)
    node = nodes[0]
    fingerprint = f"repair:{node}:{w.resource_version}"
    if p.placements.current(w.key, fingerprint) is None:
        asks = _asks_on_node(p, info, node, failed[node])
        if isinstance(asks, str) or not asks:
            return _no_replacement(nodes)
        p.placements.ask(PlacementRequest(id="", workload=w.key, uid=w.uid, cluster_queue=info.cq,
                                          fingerprint=fingerprint, pod_sets=tuple(asks), repair_node=node))
    return None


def on_repair_answer(p: Parts, a: PlacementAnswer, req: PlacementRequest) -> str | None:
    """The solver answered a repair question: write the merged assignment; or the eviction
    message when it found no replacement."""
    p.placements.consume(a.workload)
    info = p.book.reserved.get(a.workload)
    w = p.book.workloads.get(a.workload)
    if info is None or w is None or info.assumed or w.uid != a.uid or w.evicted_reason is not None:
        return None  # no longer admitted as it was when we asked
    if not a.placed or a.victims:
        return _no_replacement([req.repair_node])
    pod_sets = tuple(msgspec.structs.replace(ps, topology_assignment=a.topology.get(ps.name, ps.topology_assignment))
                     for ps in info.admission.pod_sets)
    info.admission = msgspec.structs.replace(info.admission, pod_sets=pod_sets)  # the failed node is no longer used
    p.placements.repaired(TopologyRepair(
        id=f"repair:{w.uid}:{w.resource_version}:{req.repair_node}", workload=w.key, uid=w.uid,
        cluster_queue=info.cq, pod_sets=pod_sets, admitted=w.admitted, node=req.repair_node))
    return None
