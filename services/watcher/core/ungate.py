"""The TAS ungater's decisions: which gated pod goes to which domain of the topology assignment.

Pure (Kueue pkg/controller/tas/topology_ungater.go, behaviour only): the domains of a pod set's
topologyAssignment each take `count` pods. Pods already released (no topology gate) count
against the domain their node selector names; the gated ones fill what is left. Pods with a
completion index are ranked by it: index i belongs to the domain whose cumulative range holds
it (as Kueue's rank-based ordering does), so a recreated pod of index i goes back to the same
domain; a pod whose ranked domain is full, or a pod without an index, takes the first domain
(in assignment order) with room. A gated pod with no room anywhere stays gated.
"""

from __future__ import annotations

from typing import NamedTuple

from kq.api.constants import TOPOLOGY_SCHEDULING_GATE
from kq.api.core import Pod
from kq.api.topology import TopologyDomain, topology_domains
from kq.api.workload import TopologyAssignment

__all__ = ["Ungate", "plan_ungates", "is_topology_gated", "pod_index"]


class Ungate(NamedTuple):
    namespace: str
    name: str
    resource_version: str
    node_selector: dict[str, str]  # the pod's own selector plus the domain's level labels
    remaining_gates: tuple[str, ...]  # gate names left after removing the topology gate


def is_topology_gated(pod: Pod) -> bool:
    return any(g.name == TOPOLOGY_SCHEDULING_GATE for g in pod.spec.scheduling_gates)


def pod_index(pod: Pod, index_key: str | None) -> int | None:
    if not index_key:
        return None
    raw = pod.metadata.annotations.get(index_key) or pod.metadata.labels.get(index_key)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _domain_of(selector: dict[str, str], node_labels: dict[str, str] | None, levels: tuple[str, ...],
               domains: list[TopologyDomain]) -> int | None:
    """Which domain an already released pod counts against (by its selector, else its node's labels)."""
    for labels in (selector, node_labels or {}):
        values = tuple(labels.get(level) for level in levels)
        if None in values:
            continue
        for i, d in enumerate(domains):
            if d.values == values:
                return i
    return None


def _active(pod: Pod) -> bool:
    return pod.metadata.deletion_timestamp is None and pod.status.phase not in ("Succeeded", "Failed")


def plan_ungates(assignment: TopologyAssignment, pods: list[Pod], index_key: str | None,
                 node_labels: dict[str, dict[str, str]] | None = None) -> list[Ungate]:
    """The pods of one pod set to release now, each with the node selector of its domain."""
    levels = tuple(assignment.levels)
    domains = topology_domains(assignment)
    room = [d.count for d in domains]
    gated: list[Pod] = []
    for pod in pods:
        if not _active(pod):
            continue
        if is_topology_gated(pod):
            gated.append(pod)
            continue
        labels = (node_labels or {}).get(pod.spec.node_name) if pod.spec.node_name else None
        i = _domain_of(dict(pod.spec.node_selector), labels, levels, domains)
        if i is not None:
            room[i] -= 1
    # Ranked pods first (by index), then the rest by creation time and name: deterministic.
    gated.sort(key=lambda p: (pod_index(p, index_key) is None, pod_index(p, index_key) or 0,
                              p.metadata.creation_timestamp or "", p.metadata.name))
    bounds: list[int] = []
    total = 0
    for d in domains:
        total += d.count
        bounds.append(total)
    out: list[Ungate] = []
    for pod in gated:
        idx = pod_index(pod, index_key)
        target: int | None = None
        if idx is not None:
            ranked = next((i for i, b in enumerate(bounds) if idx < b), None)
            if ranked is not None and room[ranked] > 0:
                target = ranked
        if target is None:
            target = next((i for i, r in enumerate(room) if r > 0), None)
        if target is None:
            continue  # nothing left in the assignment for it (yet)
        room[target] -= 1
        selector = {**pod.spec.node_selector, **dict(zip(levels, domains[target].values, strict=False))}
        gates = tuple(g.name for g in pod.spec.scheduling_gates if g.name != TOPOLOGY_SCHEDULING_GATE)
        out.append(Ungate(pod.metadata.namespace, pod.metadata.name, pod.metadata.resource_version or "",
                          selector, gates))
    return out
