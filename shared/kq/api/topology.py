"""Between Kueue v1beta2's compact TopologyAssignment (slices) and plain (values, count) domains.

Expansion follows pkg/util/tas InternalSeqFrom; compaction produces Kueue's
single-slice encoding (longest common prefix/suffix per level, universal
values and pod counts where all domains agree), which every reader accepts.
"""

from __future__ import annotations

import msgspec

from kq.api.workload import (
    TopologyAssignment,
    TopologyAssignmentSlice,
    TopologyAssignmentSliceLevelIndividualValues,
    TopologyAssignmentSliceLevelValues,
    TopologyAssignmentSlicePodCounts,
)

__all__ = ["TopologyDomain", "topology_domains", "compact_topology_assignment"]


class TopologyDomain(msgspec.Struct, frozen=True):
    values: tuple[str, ...]  # one value per level, top level first
    count: int  # pods placed in this domain; shadows tuple.count, which no one calls


def _value_at(level: TopologyAssignmentSliceLevelValues, i: int) -> str:
    if level.universal is not None:
        return level.universal
    ind = level.individual
    if ind is None:
        raise ValueError("topology slice level has neither universal nor individual values")
    return (ind.prefix or "") + ind.roots[i] + (ind.suffix or "")


def topology_domains(assignment: TopologyAssignment) -> list[TopologyDomain]:
    """Every domain of the assignment, in slice order."""
    out: list[TopologyDomain] = []
    for sl in assignment.slices:
        if len(sl.values_per_level) != len(assignment.levels):
            raise ValueError("valuesPerLevel must have one entry per level")
        for i in range(sl.domain_count):
            pc = sl.pod_counts
            count = pc.universal if pc.universal is not None else pc.individual[i]
            out.append(TopologyDomain(tuple(_value_at(lv, i) for lv in sl.values_per_level), count))
    return out


def _common_affixes(values: list[str]) -> tuple[str, str]:
    prefix = suffix = values[0]
    for v in values[1:]:
        n = 0
        while n < min(len(prefix), len(v)) and prefix[n] == v[n]:
            n += 1
        prefix = prefix[:n]
        n = 0
        while n < min(len(suffix), len(v)) and suffix[-1 - n] == v[-1 - n]:
            n += 1
        suffix = suffix[len(suffix) - n :]
    shortest = min(len(v) for v in values)
    if len(prefix) + len(suffix) > shortest:  # e.g. {"ababa", "aba"}: affixes must not overlap
        prefix = prefix[: shortest - len(suffix)]
    return prefix, suffix


def _level_values(values: list[str]) -> TopologyAssignmentSliceLevelValues:
    if all(v == values[0] for v in values):
        return TopologyAssignmentSliceLevelValues(universal=values[0])
    prefix, suffix = _common_affixes(values)
    roots = tuple(v[len(prefix) : len(v) - len(suffix)] for v in values)
    return TopologyAssignmentSliceLevelValues(
        individual=TopologyAssignmentSliceLevelIndividualValues(
            roots=roots, prefix=prefix or None, suffix=suffix or None
        )
    )


def compact_topology_assignment(levels: tuple[str, ...], domains: list[TopologyDomain]) -> TopologyAssignment:
    """The single-slice v1beta2 encoding of `domains` (no slices when there are none)."""
    if not domains:
        return TopologyAssignment(levels=tuple(levels), slices=())
    for d in domains:
        if len(d.values) != len(levels):
            raise ValueError(f"domain {d.values} does not have one value per level {levels}")
    counts = [d.count for d in domains]
    pod_counts = (
        TopologyAssignmentSlicePodCounts(universal=counts[0])
        if all(c == counts[0] for c in counts)
        else TopologyAssignmentSlicePodCounts(individual=tuple(counts))
    )
    per_level = tuple(_level_values([d.values[i] for d in domains]) for i in range(len(levels)))
    sl = TopologyAssignmentSlice(domain_count=len(domains), values_per_level=per_level, pod_counts=pod_counts)
    return TopologyAssignment(levels=tuple(levels), slices=(sl,))
