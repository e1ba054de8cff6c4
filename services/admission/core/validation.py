"""Reject malformed events before they touch any state; errors name the object and the field."""

from __future__ import annotations

from typing import get_args

from .model import (
    AdmissionCheck,
    BorrowPolicy,
    ClusterQueue,
    Cohort,
    Deleted,
    Event,
    FungibilityPolicy,
    FungibilityPreference,
    Kind,
    LocalQueue,
    Namespace,
    PlacementAnswer,
    PreemptionPolicy,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    StopPolicy,
    Topology,
    Workload,
    WorkloadPriorityClass,
)


class InvalidEvent(ValueError):
    """An event the core refuses; the message says which object and which field."""


def _enum(value: object, allowed: object, where: str) -> None:
    options = get_args(allowed)
    if value not in options:
        raise InvalidEvent(f"{where}: unsupported value {value!r} (expected one of {', '.join(map(str, options))})")


def _name(value: str, where: str) -> None:
    if not value:
        raise InvalidEvent(f"{where}: must not be empty")


def _groups(groups: tuple[ResourceGroup, ...], where: str, has_parent: bool) -> None:
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for i, rg in enumerate(groups):
        at = f"{where}.resourceGroups[{i}]"
        if not rg.covered_resources:
            raise InvalidEvent(f"{at}.coveredResources: must not be empty")
        for r in rg.covered_resources:
            if r in seen_resources:
                raise InvalidEvent(f"{at}.coveredResources: {r} is covered by more than one resource group")
            seen_resources.add(r)
        for j, fq in enumerate(rg.flavors):
            fat = f"{at}.flavors[{j}]"
            _name(fq.name, f"{fat}.name")
            if fq.name in seen_flavors:
                raise InvalidEvent(f"{fat}.name: flavor {fq.name} appears more than once")
            seen_flavors.add(fq.name)
            names = [rq.name for rq in fq.resources]
            if sorted(names) != sorted(rg.covered_resources) or len(set(names)) != len(names):
                raise InvalidEvent(
                    f"{fat}.resources: must list exactly the covered resources {list(rg.covered_resources)}"
                )
            for k, rq in enumerate(fq.resources):
                rat = f"{fat}.resources[{k}]"
                if rq.nominal < 0:
                    raise InvalidEvent(f"{rat}.nominalQuota: must be >= 0")
                if rq.borrowing_limit is not None:
                    if rq.borrowing_limit < 0:
                        raise InvalidEvent(f"{rat}.borrowingLimit: must be >= 0")
                    if not has_parent:
                        raise InvalidEvent(f"{rat}.borrowingLimit: must be nil when there is no cohort")
                if rq.lending_limit is not None:
                    if rq.lending_limit < 0:
                        raise InvalidEvent(f"{rat}.lendingLimit: must be >= 0")
                    if not has_parent:
                        raise InvalidEvent(f"{rat}.lendingLimit: must be nil when there is no cohort")


def _cluster_queue(cq: ClusterQueue) -> None:
    where = f"ClusterQueue {cq.name}: spec"
    _name(cq.name, "ClusterQueue: metadata.name")
    if cq.cohort == "":
        raise InvalidEvent(f"{where}.cohortName: must be omitted rather than empty")
    _groups(cq.resource_groups, where, cq.cohort is not None)
    _enum(cq.queueing_strategy, QueueingStrategy, f"{where}.queueingStrategy")
    _enum(cq.stop_policy, StopPolicy, f"{where}.stopPolicy")
    p = cq.preemption
    _enum(p.within_cluster_queue, PreemptionPolicy, f"{where}.preemption.withinClusterQueue")
    _enum(p.reclaim_within_cohort, PreemptionPolicy, f"{where}.preemption.reclaimWithinCohort")
    if p.within_cluster_queue == "Any":
        raise InvalidEvent(f"{where}.preemption.withinClusterQueue: Any is not allowed")
    if p.borrow_within_cohort is not None:
        _enum(p.borrow_within_cohort.policy, BorrowPolicy, f"{where}.preemption.borrowWithinCohort.policy")
    f = cq.flavor_fungibility
    _enum(f.when_can_borrow, FungibilityPolicy, f"{where}.flavorFungibility.whenCanBorrow")
    _enum(f.when_can_preempt, FungibilityPolicy, f"{where}.flavorFungibility.whenCanPreempt")
    if f.preference is not None:
        _enum(f.preference, FungibilityPreference, f"{where}.flavorFungibility.preference")
    if cq.fair_weight < 0:
        raise InvalidEvent(f"{where}.fairSharing.weight: must be >= 0")
    flavors = {fq.name for rg in cq.resource_groups for fq in rg.flavors}
    for i, rule in enumerate(cq.admission_checks):
        _name(rule.name, f"{where}.admissionChecksStrategy.admissionChecks[{i}].name")
        for fl in rule.on_flavors:
            if fl not in flavors:
                raise InvalidEvent(
                    f"{where}.admissionChecksStrategy.admissionChecks[{i}].onFlavors: {fl} is not a flavor of the queue"
                )


def _workload(w: Workload) -> None:
    where = f"Workload {w.namespace}/{w.name}"
    _name(w.namespace, f"{where}: metadata.namespace")
    _name(w.name, f"{where}: metadata.name")
    _name(w.uid, f"{where}: metadata.uid")
    if not w.pod_sets:
        raise InvalidEvent(f"{where}: spec.podSets: must not be empty")
    names: set[str] = set()
    for i, ps in enumerate(w.pod_sets):
        at = f"{where}: spec.podSets[{i}]"
        _name(ps.name, f"{at}.name")
        if ps.name in names:
            raise InvalidEvent(f"{at}.name: duplicate pod set {ps.name}")
        names.add(ps.name)
        if ps.count < 0:
            raise InvalidEvent(f"{at}.count: must be >= 0")
        if ps.min_count is not None and not 0 <= ps.min_count <= ps.count:
            raise InvalidEvent(f"{at}.minCount: must be between 0 and count")
        for r, q in ps.requests.items():
            if q < 0:
                raise InvalidEvent(f"{at}.requests[{r}]: must be >= 0")
    if w.admission is not None:
        _name(w.admission.cluster_queue, f"{where}: status.admission.clusterQueue")


def validate(event: Event) -> None:
    match event:
        case ClusterQueue():
            _cluster_queue(event)
        case Cohort():
            _name(event.name, "Cohort: metadata.name")
            if event.parent == event.name:
                raise InvalidEvent(f"Cohort {event.name}: spec.parentName: a cohort cannot be its own parent")
            _groups(event.resource_groups, f"Cohort {event.name}: spec", event.parent is not None)
            if event.fair_weight < 0:
                raise InvalidEvent(f"Cohort {event.name}: spec.fairSharing.weight: must be >= 0")
        case LocalQueue():
            _name(event.namespace, "LocalQueue: metadata.namespace")
            _name(event.name, "LocalQueue: metadata.name")
            _name(event.cluster_queue, f"LocalQueue {event.namespace}/{event.name}: spec.clusterQueue")
            _enum(event.stop_policy, StopPolicy, f"LocalQueue {event.namespace}/{event.name}: spec.stopPolicy")
        case Workload():
            _workload(event)
        case PlacementAnswer():
            _name(event.workload.partition("/")[2], "PlacementAnswer: workload")
        case ResourceFlavor() | Namespace() | WorkloadPriorityClass() | AdmissionCheck() | Topology():
            _name(event.name, f"{type(event).__name__}: metadata.name")
        case Deleted():
            _enum(event.kind, Kind, "Deleted.kind")
            _name(event.name, f"Deleted {event.kind}: name")
        case _:
            raise InvalidEvent(f"unknown event type {type(event).__name__}")
