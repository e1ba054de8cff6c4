"""Kueue's topology assignment for one pod set (or a leader + workers group).

Behaviour follows KEP-2724 and pkg/cache/scheduler/tas_flavor_snapshot.go
(findTopologyAssignment with TASProfileMixed on, balanced placement off):
phase 1 counts pods/slices per domain (services.tas.core.counts), phase 2 picks
the domain(s) at the requested level (BestFit; LeastFreeCapacity when
unconstrained; preferred climbs a level when no single domain fits), then
descends level by level keeping the number of domains used small.
"""

from __future__ import annotations

from typing import NamedTuple

from services.tas.core.counts import LEADER, POD, POD_WL, SLC, SLC_WL, State
from services.tas.core.tree import CapacityTree

__all__ = ["Params", "NoFit", "find_assignment"]

_BIG = 1 << 62


class Params(NamedTuple):
    pods: int  # worker pods
    slice_size: int
    level: int  # requested level
    slice_level: int
    required: bool
    least_free: bool  # unconstrained: LeastFreeCapacity instead of BestFit
    leader_count: int  # 1 with a leader pod set, else 0


class NoFit(NamedTuple):
    fitted: int  # slices (or leaders) that fit
    wanted: int
    empty_level: int | None = None  # the level has no domain at all


class Assignment(NamedTuple):
    workers: list[tuple[int, int]]  # (leaf domain, pods), sorted by values
    leaders: list[tuple[int, int]]


def find_assignment(tree: CapacityTree, state: State, p: Params) -> Assignment | NoFit:
    found = _find_level(tree, state, p, p.level)
    if isinstance(found, NoFit):
        return found
    fit_level, fit = found
    fit = _minimum(state, tree, fit, p.pods, p.leader_count, p.slice_size, p.least_free, True)
    cur = fit_level
    while cur < min(tree.last, p.slice_level):
        lower = [c for d in fit for c in tree.dchildren[d]]
        fit = _minimum(state, tree, _sorted(tree, state, lower, p.least_free), p.pods, p.leader_count,
                       p.slice_size, p.least_free, True)
        cur += 1
    while cur < tree.last:
        nxt: list[int] = []
        for d in fit:
            st = state(d)
            kids = _sorted(tree, state, tree.dchildren[d], p.least_free)
            nxt.extend(_minimum(state, tree, kids, st[POD], st[LEADER], 1, p.least_free, False))
        fit = nxt
        cur += 1
    key = tree.dvalues.__getitem__
    fit.sort(key=key)
    leaders = [(d, state(d)[LEADER]) for d in fit if p.leader_count and state(d)[LEADER] > 0]
    workers = [(d, state(d)[POD]) for d in fit if state(d)[POD] > 0]
    return Assignment(workers, leaders)


def _sorted(tree: CapacityTree, state: State, domains: list[int], least_free: bool) -> list[int]:
    """Kueue's sortedDomains: slices (desc for BestFit, asc for LeastFree), pods asc, values asc."""
    sign = 1 if least_free else -1
    values = tree.dvalues
    return sorted(domains, key=lambda d: (sign * state(d)[SLC], state(d)[POD], values[d]))


def _sorted_with_leader(tree: CapacityTree, state: State, domains: list[int], least_free: bool) -> list[int]:
    sign = 1 if least_free else -1
    values = tree.dvalues
    return sorted(domains, key=lambda d: (-state(d)[LEADER], sign * state(d)[SLC_WL], state(d)[POD_WL], values[d]))


def _best_fit(state: State, domains: list[int], needed: int, field: int, leader_count: int) -> int:
    """First domain with the smallest count >= needed; the first domain when none fits."""
    best, best_count = domains[0], _BIG
    for d in domains:
        st = state(d)
        if st[LEADER] < leader_count:
            continue
        c = st[field]
        if needed <= c < best_count:
            best, best_count = d, c
    return best


def _find_level(tree: CapacityTree, state: State, p: Params, level: int) -> tuple[int, list[int]] | NoFit:
    fast = state.src.fast
    if fast is not None and p.leader_count == 0:
        return _find_level_fast(tree, state, p, level)
    domains = list(tree.by_level[level].values())
    if not domains:
        return NoFit(0, p.pods // p.slice_size, level)
    # Kueue sorts the level (sortedDomainsWithLeader) and scans it. The same picks as minima,
    # no sort: the first domain of that order fits exactly when some domain fits.
    src_rows = getattr(state.src, "state", None)
    rows: list[list[int]] | dict[int, list[int]] = (
        src_rows if src_rows is not None and not state.touched() else {d: state.peek(d) for d in domains})
    values, sign = tree.dvalues, (1 if p.least_free else -1)

    def order(d: int) -> tuple[int, int, int, tuple[str, ...]]:
        st = rows[d]
        return (-st[LEADER], sign * st[SLC_WL], st[POD_WL], values[d])

    wanted = p.pods // p.slice_size
    lc = p.leader_count
    field = SLC_WL if lc else SLC
    fitting = [d for d in domains if rows[d][LEADER] >= lc and rows[d][field] >= wanted]
    if fitting:
        if p.least_free:
            return level, [min(fitting, key=order)]
        tightest = min(rows[d][field] for d in fitting)
        return level, [min((d for d in fitting if rows[d][field] == tightest), key=order)]
    if p.required:
        if p.least_free:
            return NoFit(rows[max(domains, key=order)][POD], wanted)
        return NoFit(rows[min(domains, key=order)][SLC], wanted)
    if level > 0 and not p.least_free:
        return _find_level(tree, state, p, level - 1)
    return _spread(tree, state, p, level, _sorted_with_leader(tree, state, domains, p.least_free), wanted)


def _spread(tree: CapacityTree, state: State, p: Params, level: int, ordered: list[int],
            wanted: int) -> tuple[int, list[int]] | NoFit:
    results: list[int] = []
    remaining, remaining_leaders = wanted, p.leader_count
    ordered = _prioritize_leader(state, ordered, p.pods, p.leader_count, p.slice_size, True)
    idx = 0
    while remaining_leaders > 0 and idx < len(ordered) and state(ordered[idx])[LEADER] > 0:
        d = ordered[idx]
        if not p.least_free and state(d)[SLC_WL] >= remaining:
            d = _best_fit(state, ordered[idx:], remaining, SLC_WL, remaining_leaders)
        results.append(d)
        remaining_leaders -= state(d)[LEADER]
        remaining -= state(d)[SLC_WL]
        idx += 1
    if remaining_leaders > 0:
        return NoFit(p.leader_count - remaining_leaders, wanted)
    rest = _sorted(tree, state, ordered[idx:], p.least_free)
    i = 0
    while remaining > 0 and i < len(rest):
        d = rest[i]
        if not p.least_free and state(d)[SLC] >= remaining:
            d = _best_fit(state, rest[i:], remaining, SLC, 0)
        results.append(d)
        remaining -= state(d)[SLC]
        i += 1
    if remaining > 0:
        return NoFit(wanted - remaining, wanted)
    return level, results


def _find_level_fast(tree: CapacityTree, state: State, p: Params, level: int) -> tuple[int, list[int]] | NoFit:
    """_find_level without leaders, by bisection in the view's sorted index."""
    agg = state.src.fast
    assert agg is not None
    wanted = p.pods // p.slice_size
    if not tree.by_level[level]:
        return NoFit(0, wanted, level)
    if p.least_free:
        d = agg.first_at_least(level, wanted)
        if d is not None:
            return level, [d]
        if p.required:
            return NoFit(state(agg.last(level))[POD], wanted)
        results: list[int] = []
        remaining = wanted
        for d in agg.ascending_from(level, 1):
            results.append(d)
            remaining -= state(d)[SLC]
            if remaining <= 0:
                return level, results
        return NoFit(wanted - remaining, wanted)
    top = agg.most(level)
    assert top is not None
    if state(top)[SLC] >= wanted:
        best = agg.first_at_least(level, wanted)
        assert best is not None
        return level, [best]
    if p.required:
        return NoFit(state(top)[SLC], wanted)
    if level > 0:
        return _find_level_fast(tree, state, p, level - 1)
    results = []
    remaining = wanted
    for d in agg.descending(level):
        cur = state(d)[SLC]
        if cur >= remaining:
            best = agg.first_at_least(level, remaining)
            if best is not None and state(best)[SLC] < cur:
                d = best
        results.append(d)
        remaining -= state(d)[SLC]
        if remaining <= 0:
            return level, results
    return NoFit(wanted - remaining, wanted)


def _prioritize_leader(state: State, domains: list[int], count: int, leader_count: int, slice_size: int,
                       slices: bool) -> list[int]:
    if leader_count == 0 or len(domains) < 2:
        return domains
    needed = count // slice_size if slices else count
    field, wl_field = (SLC, SLC_WL) if slices else (POD, POD_WL)
    available = sum(state(d)[field] for d in domains)
    for i, d in enumerate(domains):
        st = state(d)
        if st[LEADER] < leader_count:
            continue
        if available - (st[field] - st[wl_field]) < needed:
            continue
        if i == 0:
            return domains
        return [d, *domains[:i], *domains[i + 1 :]]
    return domains


def _minimum(state: State, tree: CapacityTree, domains: list[int], count: int, leader_count: int, slice_size: int,
             least_free: bool, slices: bool) -> list[int]:
    """Kueue's updateCountsToMinimumGeneric: take domains in order until count is met."""
    domains = _prioritize_leader(state, domains, count, leader_count, slice_size, slices)
    field, wl_field = (SLC, SLC_WL) if slices else (POD, POD_WL)
    unit = slice_size if slices else 1
    remaining = count // slice_size if slices else count
    remaining_leaders = leader_count
    result: list[int] = []
    for i, dom in enumerate(domains):
        if remaining_leaders > 0:
            st = state(dom)
            if not least_free and st[wl_field] >= remaining and st[LEADER] >= remaining_leaders:
                dom = _best_fit(state, domains[i:], remaining, wl_field, remaining_leaders)
                st = state(dom)
            if st[wl_field] >= remaining and st[LEADER] >= remaining_leaders:
                st[field] = remaining
                st[LEADER] = remaining_leaders
                st[POD] = remaining * unit
                result.append(dom)
                return result
            if st[wl_field] > remaining:
                st[wl_field] = remaining
            if st[LEADER] > remaining_leaders:
                st[LEADER] = remaining_leaders
            st[field] = st[wl_field]
            st[POD] = st[wl_field] * unit
            remaining_leaders -= st[LEADER]
            remaining -= st[wl_field]
            result.append(dom)
            continue
        if not least_free and state(dom)[field] >= remaining:
            dom = _best_fit(state, domains[i:], remaining, field, 0)
        st = state(dom)
        st[LEADER] = 0
        if st[field] >= remaining:
            st[POD] = remaining * unit
            st[field] = remaining
            result.append(dom)
            return result
        st[POD] = st[field] * unit
        remaining -= st[field]
        result.append(dom)
    return result
