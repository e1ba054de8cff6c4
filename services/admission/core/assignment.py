"""The result of flavor assignment: per pod set flavors, modes and reasons (Kueue flavorassigner.Assignment)."""

from __future__ import annotations

from .model import PodSetAssignment, Workload
from .quota import FR
from .workloads import ScanProgress, pod_set_totals

# Flavor assignment modes, worst to best (Kueue FlavorAssignmentMode).
NO_FIT, PREEMPT, DEFERRED_FIT, FIT = 0, 1, 2, 3
MODE_NAMES = {NO_FIT: "NoFit", PREEMPT: "Preempt", DEFERRED_FIT: "DeferredFit", FIT: "Fit"}

# Granular reasons for a pending workload, least to most severe.
_SEVERITY = {"TopologyPlacementFailed": 1, "WaitingForQuota": 2, "ExceedsMaxQuota": 3, "NoMatchingFlavor": 4}


def severity(reason: str | None) -> int:
    return _SEVERITY.get(reason or "", 0)


def most_severe(a: str | None, b: str | None) -> str | None:
    return a if severity(a) >= severity(b) else b


class FlavorChoice:
    __slots__ = ("name", "mode", "tried_idx", "borrow")

    def __init__(self, name: str, mode: int, borrow: int) -> None:
        self.name = name
        self.mode = mode
        self.tried_idx = -1
        self.borrow = borrow

    def __repr__(self) -> str:
        return f"{self.name}:{MODE_NAMES[self.mode]}"


class PodSetResult:
    __slots__ = ("name", "count", "requests", "flavors", "reasons", "error", "attempts")

    def __init__(self, name: str, count: int, requests: dict[str, int]) -> None:
        self.name = name
        self.count = count
        self.requests = requests  # totals for `count` pods, "pods" included when the queue covers it
        self.flavors: dict[str, FlavorChoice] = {}
        self.reasons: list[str] = []
        self.error: str | None = None
        # flavor -> (worst mode, most severe no-fit reason) over the resources tried
        self.attempts: dict[str, tuple[int, str | None]] = {}

    def is_fit(self) -> bool:
        return self.error is None and not self.reasons

    def mode(self) -> int:
        if self.is_fit():
            return FIT
        if self.error is not None or not self.flavors:
            return NO_FIT
        return min(f.mode for f in self.flavors.values())

    def message(self) -> str:
        if self.error is not None:
            return self.error
        return ", ".join(sorted(self.reasons))


class Assignment:
    __slots__ = ("pod_sets", "borrowing", "usage", "last_state", "_mode", "no_fit_reason")

    def __init__(self, cq_generation: int, cycle: int) -> None:
        self.pod_sets: list[PodSetResult] = []
        self.borrowing = 0  # height of the lowest cohort subtree that fits; 0: no borrowing
        self.usage: dict[FR, int] = {}
        self.last_state = ScanProgress([], cq_generation, cycle)
        self._mode: int | None = None
        self.no_fit_reason: str | None = None

    def append(self, ps: PodSetResult) -> None:
        self.pod_sets.append(ps)
        tried: dict[str, int] = {}
        for res, choice in ps.flavors.items():
            if choice.borrow > self.borrowing:
                self.borrowing = choice.borrow
            fr = (choice.name, res)
            self.usage[fr] = self.usage.get(fr, 0) + ps.requests.get(res, 0)
            tried[res] = choice.tried_idx
        self.last_state.tried.append(tried)
        self._mode = None

    def mode(self) -> int:
        if not self.pod_sets:
            return NO_FIT
        if self._mode is None:
            self._mode = min(ps.mode() for ps in self.pod_sets)
        return self._mode

    def set_mode(self, mode: int) -> None:
        self._mode = mode
        for ps in self.pod_sets:
            for choice in ps.flavors.values():
                choice.mode = mode

    def message(self) -> str:
        parts: list[str] = []
        for ps in self.pod_sets:
            if ps.is_fit():
                continue
            if ps.error is not None:
                return f"failed to assign flavors to pod set {ps.name}: {ps.error}"
            parts.append(f"couldn't assign flavors to pod set {ps.name}: {ps.message()}")
        return "; ".join(parts)

    def frs_needing_preemption(self) -> frozenset[FR]:
        return frozenset(
            (c.name, res) for ps in self.pod_sets for res, c in ps.flavors.items() if c.mode == PREEMPT
        )

    def flavor_mapping(self) -> dict[str, dict[str, str]]:
        return {ps.name: {res: c.name for res, c in ps.flavors.items()} for ps in self.pod_sets}

    def total_requests_for(self, wl: Workload) -> dict[FR, int]:
        """The workload's quota needs under this assignment, without the synthetic "pods" requests."""
        usage: dict[FR, int] = {}
        for ps_spec, ps in zip(wl.pod_sets, self.pod_sets, strict=False):
            for res, q in pod_set_totals(ps_spec, ps.count).items():
                choice = ps.flavors.get(res)
                if q == 0 or choice is None:
                    continue
                fr = (choice.name, res)
                usage[fr] = usage.get(fr, 0) + q
        return usage

    def to_pod_set_assignments(self) -> tuple[PodSetAssignment, ...]:
        return tuple(
            PodSetAssignment(
                name=ps.name,
                flavors={res: c.name for res, c in sorted(ps.flavors.items())},
                resource_usage={res: ps.requests.get(res, 0) for res in sorted(ps.flavors)},
                count=ps.count,
            )
            for ps in self.pod_sets
        )

    def resolve_no_fit_reason(self, flavor_groups: dict[str, int]) -> None:
        """The most telling granular reason when nothing fits (Kueue resolveNoFitReason)."""
        if self.mode() != NO_FIT:
            return
        overall: str | None = None
        for ps in self.pod_sets:
            if ps.mode() != NO_FIT:
                continue
            if not ps.attempts:
                overall = most_severe(overall, "NoMatchingFlavor")
                continue
            per_group: dict[int, str | None] = {}
            for i, (flavor, (mode, reason)) in enumerate(ps.attempts.items()):
                if mode != NO_FIT:
                    continue
                group = flavor_groups.get(flavor, -1 - i)
                if group not in per_group or severity(reason) < severity(per_group[group]):
                    per_group[group] = reason
            ps_reason: str | None = None
            for reason in per_group.values():
                ps_reason = most_severe(ps_reason, reason)
            overall = most_severe(overall, ps_reason)
        self.no_fit_reason = overall
