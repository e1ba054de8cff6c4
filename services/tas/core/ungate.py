"""Which gated pods of a pod set go to which domain (Kueue's topology ungater, pkg/controller/tas).

Pods carrying an index label are ranked (pod index, plus sub-group index x sub-group
size, minus the rank offset of a leader/worker group) and rank r goes to the domain
holding the r-th pod of the assignment; without usable ranks, gated pods fill the
domains greedily after the pods already ungated there. The result is the node
selector to add to each pod (the domain's label values) when its gate is removed.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from kq.api.topology import topology_domains
from kq.api.workload import TopologyAssignment

__all__ = ["PodView", "RankLabels", "PodToUngate", "pods_to_ungate", "group_rank_offsets"]


class PodView(msgspec.Struct, frozen=True, kw_only=True):
    """What the ungater needs of a live (not terminated) pod of the pod set."""

    key: str
    gated: bool  # still has the kueue.x-k8s.io/topology scheduling gate
    labels: dict[str, str] = {}
    node_selector: dict[str, str] = {}


class RankLabels(msgspec.Struct, frozen=True, kw_only=True):
    """From podSets[].topologyRequest: podIndexLabel, subGroupIndexLabel, subGroupCount."""

    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None


class PodToUngate(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    node_selector: dict[str, str]  # to merge into the pod's spec.nodeSelector


def group_rank_offsets(counts: dict[str, int]) -> dict[str, tuple[int, int]]:
    """(offset, max rank) per pod set of a leader/worker group: the smaller one ranks first."""
    if len(counts) != 2:
        return {name: (0, n) for name, n in counts.items()}
    (a, na), (b, nb) = counts.items()
    small, large = (a, b) if na <= nb else (b, a)
    return {small: (0, counts[small]), large: (counts[small], counts[large] + counts[small])}


def _uint(labels: dict[str, str], key: str, bound: int) -> int | None:
    text = labels.get(key)
    if text is None or not text.isdigit():
        return None
    value = int(text)
    return value if value < bound else None


def _ranks(pods: Sequence[PodView], count: int, req: RankLabels, offset: int,
           max_rank: int) -> dict[int, PodView] | None:
    if req.pod_index_label is None:
        return None
    job_size = count
    if req.sub_group_index_label is not None:
        if not req.sub_group_count or req.sub_group_count <= 0:
            return None
        job_size = count // req.sub_group_count
    out: dict[int, PodView] = {}
    for pod in pods:
        index = _uint(pod.labels, req.pod_index_label, max_rank)
        if index is None:
            return None
        rank = index - offset
        if req.sub_group_index_label is not None:
            job = _uint(pod.labels, req.sub_group_index_label, req.sub_group_count or 0)
            if job is None or index >= job_size:
                return None
            rank = index + job * job_size - offset
        if rank < 0 or rank >= count or rank in out:
            return None
        out[rank] = pod
    return out


def pods_to_ungate(assignment: TopologyAssignment, count: int, pods: Sequence[PodView], ranks: RankLabels | None,
                   *, offset: int = 0, max_rank: int | None = None,
                   unhealthy_nodes: frozenset[str] = frozenset()) -> list[PodToUngate]:
    levels = assignment.levels
    domains = topology_domains(assignment)
    by_rank = [d.values for d in domains for _ in range(d.count)]

    def selector(values: tuple[str, ...]) -> dict[str, str]:
        return dict(zip(levels, values, strict=True))

    def held_back(values: tuple[str, ...]) -> bool:
        # a node awaiting replacement: its pods stay gated until the new domain is known
        return bool(unhealthy_nodes) and levels[-1] == "kubernetes.io/hostname" and values[-1] in unhealthy_nodes

    ranked = _ranks(pods, count, ranks, offset, max_rank if max_rank is not None else count) if ranks else None
    if ranked is not None and all(r < len(by_rank) for r in ranked) and all(
        tuple(p.node_selector.get(k) for k in levels) == by_rank[r] for r, p in ranked.items() if not p.gated
    ):
        return [PodToUngate(key=p.key, node_selector=selector(by_rank[r]))
                for r, p in sorted(ranked.items()) if p.gated and not held_back(by_rank[r])]
    ungated: dict[tuple[str | None, ...], int] = {}
    for p in pods:
        if not p.gated:
            values = tuple(p.node_selector.get(k) for k in levels)
            ungated[values] = ungated.get(values, 0) + 1
    gated = sorted((p for p in pods if p.gated), key=lambda p: p.key)
    out: list[PodToUngate] = []
    taken = 0
    for d in domains:
        room = max(d.count - ungated.get(d.values, 0), 0)
        for p in gated[taken : taken + room]:
            if not held_back(d.values):
                out.append(PodToUngate(key=p.key, node_selector=selector(d.values)))
        taken += min(room, len(gated) - taken)
    return out
