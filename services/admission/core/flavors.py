"""Flavor assignment (Kueue pkg/scheduler/flavorassigner/flavorassigner.go).

For each pod set and each resource group it needs, flavors are tried in the order the
ClusterQueue lists them; each is classified as fit (possibly borrowing), preempt (with or
without candidates) or no fit, and flavorFungibility decides whether to stop at the first
acceptable flavor or keep looking for a better one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Protocol, TypeVar

from .assignment import FIT, NO_FIT, PREEMPT, Assignment, FlavorChoice, PodSetResult, most_severe
from .model import FlavorFungibility, PodSet, ResourceFlavor
from .placements import tas_mismatch
from .quantities import format_quantity
from .quota import FR, available, lowest_fitting_subtree_height, potential_available
from .runtime import ClusterQueueRuntime
from .selectors import flavor_matches_affinity, taint_string, untolerated_taint
from .workloads import PendingInfo, ScanProgress, pod_set_totals, resource_order

T = TypeVar("T")

# Granular preemption modes (worst to best) and what preemption simulation can answer.
GM_NO_FIT, GM_NO_CANDIDATES, GM_PREEMPT, GM_RECLAIM, GM_FIT = 0, 1, 2, 3, 4
NO_CANDIDATES, POSSIBLE_PREEMPT, POSSIBLE_RECLAIM = 0, 1, 2
_GM_FROM_POSSIBILITY = {NO_CANDIDATES: GM_NO_CANDIDATES, POSSIBLE_PREEMPT: GM_PREEMPT, POSSIBLE_RECLAIM: GM_RECLAIM}
_WORST = (GM_NO_FIT, 1 << 62)


class PreemptionOracle(Protocol):
    def simulate(self, info: PendingInfo, cq: ClusterQueueRuntime, fr: FR, quantity: int) -> tuple[int, int]:
        """(possibility, borrowing height after the preemptions) for `quantity` of `fr`."""
        ...


def _fam(gm: int) -> int:
    if gm == GM_NO_FIT:
        return NO_FIT
    if gm == GM_FIT:
        return FIT
    return PREEMPT


def is_preferred(a: tuple[int, int], b: tuple[int, int], fung: FlavorFungibility) -> bool:
    """Is granular mode `a` (preemption mode, borrowing height) better than `b`?"""
    if a[0] == GM_NO_FIT:
        return False
    if b[0] == GM_NO_FIT:
        return True
    a_nc, b_nc = a[0] == GM_NO_CANDIDATES, b[0] == GM_NO_CANDIDATES
    if a_nc != b_nc:
        return not a_nc
    if fung.preference == "PreemptionOverBorrowing":
        if a[1] != b[1]:
            return a[1] < b[1]
        return a[0] > b[0]
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] < b[1]


def should_try_next_flavor(mode: tuple[int, int], fung: FlavorFungibility) -> bool:
    if mode[0] in (GM_NO_FIT, GM_NO_CANDIDATES):
        return True
    if mode[0] in (GM_PREEMPT, GM_RECLAIM) and fung.when_can_preempt == "TryNextFlavor":
        return True
    return mode[1] != 0 and fung.when_can_borrow == "TryNextFlavor"


class FlavorAssigner:
    def __init__(
        self,
        info: PendingInfo,
        cq: ClusterQueueRuntime,
        flavors: Mapping[str, ResourceFlavor],
        oracle: PreemptionOracle,
        fair_sharing: bool,
        cycle: int,
        nomination: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.info = info
        self.cq = cq
        self.flavors = flavors
        self.oracle = oracle
        self.fair_sharing = fair_sharing
        self.cycle = cycle
        self.nomination = nomination
        self.last: ScanProgress | None = info.last_assignment
        self.flavor_groups = cq.flavor_groups

    def assign(self, counts: list[int] | None = None) -> Assignment:
        cq = self.cq
        a = Assignment(cq.generation, self.cycle)
        covers_pods = "pods" in cq.rg_by_resource
        for i, ps in enumerate(self.info.wl.pod_sets):
            count = ps.count if counts is None else counts[i]
            requests = pod_set_totals(ps, count)
            if covers_pods:
                requests["pods"] = count * 1000
            result = PodSetResult(ps.name, count, requests)
            assigned: dict[str, FlavorChoice] = {}
            reasons: list[str] = []
            complete = True
            for res in sorted(requests, key=resource_order) if len(requests) > 1 else list(requests):
                qty = requests[res]
                if res not in cq.rg_by_resource:
                    if qty == 0:
                        continue
                    complete, reasons = False, [f"resource {res} unavailable in ClusterQueue"]
                    break
                if res in assigned:
                    continue
                found, status = self._find_flavor(i, ps, requests, res, a.usage, result)
                if not found:
                    complete, reasons = False, status
                    break
                assigned.update(found)
                reasons.extend(status)
            if complete:
                result.flavors = {r: c for r, c in assigned.items() if r in requests}
            result.reasons = reasons
            a.append(result)
            if not result.flavors and requests:
                a.resolve_no_fit_reason(self.flavor_groups)
                return a
        a.resolve_no_fit_reason(self.flavor_groups)
        return a

    def _check_flavor(self, name: str, ps: PodSet, covered: AbstractSet[str]) -> str | None:
        flavor = self.flavors.get(name)
        if flavor is None:
            return f"flavor {name} not found"
        mismatch = tas_mismatch(ps, flavor, self.cq, self.flavors, covered)
        if mismatch is not None:
            return mismatch
        taint = untolerated_taint(flavor, ps)
        if taint is not None:
            return f"untolerated taint {taint_string(taint)} in flavor {name}"
        if not flavor_matches_affinity(flavor, ps):
            return f"flavor {name} doesn't match node affinity"
        return None

    def _find_flavor(
        self,
        ps_index: int,
        ps: PodSet,
        requests: dict[str, int],
        res: str,
        assigned_usage: dict[FR, int],
        result: PodSetResult,
    ) -> tuple[dict[str, FlavorChoice] | None, list[str]]:
        cq = self.cq
        fung = cq.spec.flavor_fungibility
        covered, names = cq.rg_flavors[res]
        ordered = sorted(requests, key=resource_order) if len(requests) > 1 else requests
        reqs = [(r, requests[r]) for r in ordered if r in covered]
        reasons: list[str] = []
        best: dict[str, FlavorChoice] | None = None
        best_mode = _WORST
        start = self.last.next_flavor(ps_index, res) if self.last is not None else 0
        attempted = -1
        pinned = self.nomination.get(ps.name, {}).get(res) if self.nomination else None
        for idx in range(start, len(names)):
            attempted = idx
            name = names[idx]
            if self.nomination and name != pinned:
                reasons.append(
                    f"skipping flavor {name} as it is not found in the nomination mapping for resource {res}"
                )
                continue
            problem = self._check_flavor(name, ps, covered)
            if problem is not None:
                reasons.append(problem)
                self._attempt(result, name, NO_FIT, "NoMatchingFlavor")
                continue
            choices: dict[str, FlavorChoice] = {}
            rep = (GM_FIT, 0)
            no_fit_reason: str | None = None
            for r, val in reqs:
                fr = (name, r)
                gm, borrow, msg, reason = self._fits_quota(fr, assigned_usage.get(fr, 0), val)
                if msg is not None:
                    reasons.append(msg)
                    no_fit_reason = most_severe(no_fit_reason, reason)
                mode = (gm, borrow)
                if is_preferred(rep, mode, fung):
                    rep = mode
                if rep[0] == GM_NO_FIT:
                    continue
                choices[r] = FlavorChoice(name, _fam(gm), borrow)
            self._attempt(result, name, _fam(rep[0]), no_fit_reason)
            if not should_try_next_flavor(rep, fung):
                best, best_mode = choices, rep
                break
            if is_preferred(rep, best_mode, fung):
                best, best_mode = choices, rep
        if best:
            tried = -1 if attempted == len(names) - 1 else attempted
            for choice in best.values():
                choice.tried_idx = tried
        if best_mode[0] == GM_FIT:
            return best, []
        return best, reasons

    @staticmethod
    def _attempt(result: PodSetResult, flavor: str, mode: int, reason: str | None) -> None:
        prev = result.attempts.get(flavor)
        if prev is None:
            result.attempts[flavor] = (mode, reason)
        else:
            result.attempts[flavor] = (min(prev[0], mode), most_severe(prev[1], reason))

    def _fits_quota(self, fr: FR, assumed: int, request: int) -> tuple[int, int, str | None, str | None]:
        """(granular mode, borrowing height, reason text or None, no-fit reason) for one flavor/resource."""
        cq = self.cq
        node = cq.node
        flavor, res = fr
        avail = max(0, available(node, fr))
        max_capacity = potential_available(node, fr)
        val = assumed + request
        if val > max_capacity:
            return (
                GM_NO_FIT,
                0,
                f"insufficient quota for {res} in flavor {flavor}, previously considered podsets requests "
                f"({format_quantity(res, assumed)}) + current podset request ({format_quantity(res, request)}) "
                f"> maximum capacity ({format_quantity(res, max_capacity)})",
                "ExceedsMaxQuota",
            )
        borrow, may_reclaim = lowest_fitting_subtree_height(node, fr, val)
        if val <= avail:
            return GM_FIT, borrow, None, None
        msg = f"insufficient unused quota for {res} in flavor {flavor}, {format_quantity(res, val - avail)} more needed"
        quota = node.quotas.get(fr)
        nominal = quota.nominal if quota is not None else 0
        if nominal >= val or may_reclaim or self._can_preempt_while_borrowing():
            possibility, borrow_after = self.oracle.simulate(self.info, cq, fr, val)
            return _GM_FROM_POSSIBILITY[possibility], borrow_after, msg, None
        return GM_NO_FIT, borrow, msg, "WaitingForQuota"

    def _can_preempt_while_borrowing(self) -> bool:
        p = self.cq.spec.preemption
        if p.borrow_within_cohort is not None and p.borrow_within_cohort.policy != "Never":
            return True
        return self.fair_sharing and p.reclaim_within_cohort != "Never"


def search_partial_counts(pod_sets: tuple[PodSet, ...], fits: Callable[[list[int]], T | None]) -> T | None:
    """Largest pod counts (down to each minCount) for which `fits(counts)` returns a result.

    Kueue PodSetReducer.Search: a binary search over the total reduction, spread over the
    pod sets in proportion to how much each may shrink. The last probe need not succeed.
    """
    full = [ps.count for ps in pod_sets]
    deltas = [ps.count - (ps.min_count if ps.min_count is not None else ps.count) for ps in pod_sets]
    total = sum(deltas)
    if total == 0:
        return None
    last_good_idx = 0
    last_result: T | None = None

    def probe(i: int) -> bool:
        nonlocal last_good_idx, last_result
        counts = [f - (d * i) // total for f, d in zip(full, deltas, strict=True)]
        r = fits(counts)
        if r is not None:
            last_good_idx, last_result = i, r
            return True
        return False

    lo, hi = 0, total + 1  # Go sort.Search over [0, total]
    while lo < hi:
        mid = (lo + hi) // 2
        if not probe(mid):
            lo = mid + 1
        else:
            hi = mid
    return last_result if lo == last_good_idx else None
