"""Pure conversion from kq.api Kubernetes objects to the admission core's domain events.

Times become float seconds since the Unix epoch (the shell must pass `now` on the same clock);
quantities become ints in milli-units (kq.quantity.to_milli). Pod set requests follow
Kubernetes' effective pod requests: containers summed, init containers as a peak (sidecars
counted alongside), limits standing in for missing requests, pod overhead added.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, get_args

from kq.api import core as api_core
from kq.api import kueue as api
from kq.api.meta import Condition, LabelSelector, ObjectMeta, find_condition, parse_time
from kq.quantity import parse_quantity, to_milli

from .model import (
    Admission,
    AdmissionCheck,
    AdmissionCheckRule,
    AdmissionCheckState,
    BorrowWithinCohort,
    ClusterQueue,
    Cohort,
    Event,
    FairSharingConfig,
    FairSharingStrategy,
    FlavorFungibility,
    FlavorQuotas,
    LabelSelectorRequirement,
    LocalQueue,
    Namespace,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSet,
    PodSetAssignment,
    Preemption,
    RequeuingTimestamp,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    SchedulerConfig,
    Taint,
    Toleration,
    Topology,
    Workload,
    WorkloadPriorityClass,
)
from .model import LabelSelector as DomainSelector
from .validation import InvalidEvent

if TYPE_CHECKING:
    from kq.config import KueueConfig

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


# Timestamp text -> seconds: a Workload carries a few, and many Workloads share the same second
# (bounded; only successful parses are kept).
_SECONDS_CACHE: dict[str, float] = {}
_SECONDS_CACHE_MAX = 4096


def to_seconds(timestamp: str | None) -> float | None:
    if timestamp is None:
        return None
    seconds = _SECONDS_CACHE.get(timestamp)
    if seconds is None:
        seconds = parse_time(timestamp).timestamp()
        if len(_SECONDS_CACHE) >= _SECONDS_CACHE_MAX:
            _SECONDS_CACHE.clear()
        _SECONDS_CACHE[timestamp] = seconds
    return seconds


# Quantity text -> milli-units. The same few strings ("1", "500m", "2Gi") recur in every
# workload, and exact parsing goes through Fractions: remember each string's value (bounded;
# only successful parses are kept, so a bad quantity is reported every time).
_MILLI_CACHE: dict[str, int] = {}
_MILLI_CACHE_MAX = 4096


def _milli(value: object, where: str) -> int:
    if type(value) is str:
        cached = _MILLI_CACHE.get(value)
        if cached is not None:
            return cached
    try:
        milli = to_milli(value)  # type: ignore[arg-type]  # any decoded JSON value: to_milli refuses the wrong ones
    except ValueError as e:
        raise InvalidEvent(f"{where}: {e}") from None
    if type(value) is str and len(_MILLI_CACHE) < _MILLI_CACHE_MAX:
        _MILLI_CACHE[value] = milli
    return milli


def _resource_list(resources: Mapping[str, object], where: str) -> dict[str, int]:
    get = _MILLI_CACHE.get
    out: dict[str, int] = {}
    for r, q in resources.items():
        milli = get(q) if type(q) is str else None
        out[r] = milli if milli is not None else _milli(q, f"{where}[{r}]")
    return out


def _selector(s: LabelSelector | None) -> DomainSelector | None:
    if s is None:
        return None
    return DomainSelector(
        match_labels=dict(s.match_labels),
        match_expressions=tuple(
            LabelSelectorRequirement(key=e.key, operator=e.operator, values=e.values) for e in s.match_expressions
        ),
    )


def _taint(t: api_core.Taint) -> Taint:
    return Taint(key=t.key, value=t.value, effect=t.effect)


def _toleration(t: api_core.Toleration) -> Toleration:
    return Toleration(
        key=t.key, operator="Exists" if t.operator == "Exists" else "Equal", value=t.value, effect=t.effect
    )


def _groups(groups: tuple[api.ResourceGroup, ...], where: str) -> tuple[ResourceGroup, ...]:
    out: list[ResourceGroup] = []
    for i, rg in enumerate(groups):
        flavors: list[FlavorQuotas] = []
        for j, fq in enumerate(rg.flavors):
            quotas: list[ResourceQuota] = []
            for k, rq in enumerate(fq.resources):
                at = f"{where}.resourceGroups[{i}].flavors[{j}].resources[{k}]"
                quotas.append(
                    ResourceQuota(
                        name=rq.name,
                        nominal=_milli(rq.nominal_quota, f"{at}.nominalQuota"),
                        borrowing_limit=None
                        if rq.borrowing_limit is None
                        else _milli(rq.borrowing_limit, f"{at}.borrowingLimit"),
                        lending_limit=(
                            None if rq.lending_limit is None else _milli(rq.lending_limit, f"{at}.lendingLimit")
                        ),
                    )
                )
            flavors.append(FlavorQuotas(name=fq.name, resources=tuple(quotas)))
        out.append(ResourceGroup(covered_resources=rg.covered_resources, flavors=tuple(flavors)))
    return tuple(out)


def _weight(fs: api.FairSharing | None, where: str) -> float:
    if fs is None:
        return 1.0
    try:
        return float(parse_quantity(fs.weight))
    except ValueError as e:
        raise InvalidEvent(f"{where}.fairSharing.weight: {e}") from None


def scheduler_config(kueue: KueueConfig) -> SchedulerConfig:
    """The scheduler's part of the Kueue Configuration (fair sharing, requeuing timestamp)."""
    fs = kueue.fair_sharing
    fair = None
    if fs is not None and fs.enable:
        strategies: list[FairSharingStrategy] = []
        for s in fs.preemption_strategies:
            if s not in _STRATEGIES:
                raise InvalidEvent(f"fairSharing.preemptionStrategies: unsupported value {s!r}")
            strategies.append(_STRATEGIES[s])
        fair = FairSharingConfig(preemption_strategies=tuple(strategies))
    given = "Eviction"
    if kueue.wait_for_pods_ready is not None:
        given = kueue.wait_for_pods_ready.requeuing_strategy.timestamp
    timestamp = _TIMESTAMPS.get(given)
    if timestamp is None:
        raise InvalidEvent(f"waitForPodsReady.requeuingStrategy.timestamp: unsupported value {given!r}")
    wfpr = kueue.wait_for_pods_ready
    block = wfpr is not None and wfpr.enable and wfpr.block_admission
    return SchedulerConfig(fair_sharing=fair, requeuing_timestamp=timestamp, block_admission=block)


_STRATEGIES: dict[str, FairSharingStrategy] = {s: s for s in get_args(FairSharingStrategy)}
_TIMESTAMPS: dict[str, RequeuingTimestamp] = {t: t for t in get_args(RequeuingTimestamp)}


# --- configuration objects --------------------------------------------------------------------------


def resource_flavor(rf: api.ResourceFlavor) -> ResourceFlavor:
    return ResourceFlavor(
        name=rf.metadata.name,
        node_labels=dict(rf.spec.node_labels),
        node_taints=tuple(_taint(t) for t in rf.spec.node_taints),
        tolerations=tuple(_toleration(t) for t in rf.spec.tolerations),
        topology_name=rf.spec.topology_name,
    )


def cluster_queue(obj: api.ClusterQueue) -> ClusterQueue:
    spec = obj.spec
    where = f"ClusterQueue {obj.metadata.name}: spec"
    bwc = spec.preemption.borrow_within_cohort
    checks: tuple[AdmissionCheckRule, ...] = ()
    if spec.admission_checks_strategy is not None:
        checks = tuple(
            AdmissionCheckRule(name=r.name, on_flavors=r.on_flavors)
            for r in spec.admission_checks_strategy.admission_checks
        )
    return ClusterQueue(
        name=obj.metadata.name,
        cohort=spec.cohort_name or None,
        resource_groups=_groups(spec.resource_groups, where),
        queueing_strategy=spec.queueing_strategy,
        namespace_selector=_selector(spec.namespace_selector),
        preemption=Preemption(
            within_cluster_queue=spec.preemption.within_cluster_queue,
            reclaim_within_cohort=spec.preemption.reclaim_within_cohort,
            borrow_within_cohort=BorrowWithinCohort(
                policy=bwc.policy, max_priority_threshold=bwc.max_priority_threshold
            ),
        ),
        flavor_fungibility=FlavorFungibility(
            when_can_borrow=spec.flavor_fungibility.when_can_borrow,
            when_can_preempt=spec.flavor_fungibility.when_can_preempt,
            preference=spec.flavor_fungibility.preference,
        ),
        fair_weight=_weight(spec.fair_sharing, where),
        admission_checks=checks,
        stop_policy=spec.stop_policy,
    )


def cohort(obj: api.Cohort) -> Cohort:
    where = f"Cohort {obj.metadata.name}: spec"
    return Cohort(
        name=obj.metadata.name,
        parent=obj.spec.parent_name or None,
        resource_groups=_groups(obj.spec.resource_groups, where),
        fair_weight=_weight(obj.spec.fair_sharing, where),
    )


def local_queue(obj: api.LocalQueue) -> LocalQueue:
    return LocalQueue(
        namespace=obj.metadata.namespace,
        name=obj.metadata.name,
        cluster_queue=obj.spec.cluster_queue,
        stop_policy=obj.spec.stop_policy,
    )


def namespace(obj: api_core.Namespace) -> Namespace:
    return Namespace(name=obj.metadata.name, labels=dict(obj.metadata.labels))


def priority_class(obj: api.WorkloadPriorityClass) -> WorkloadPriorityClass:
    return WorkloadPriorityClass(name=obj.metadata.name, value=obj.value)


def admission_check(obj: api.AdmissionCheck) -> AdmissionCheck:
    cond = find_condition(obj.status.conditions, "Active")
    return AdmissionCheck(name=obj.metadata.name, active=cond is not None and cond.status == "True",
                          controller_name=obj.spec.controller_name)


# --- workloads --------------------------------------------------------------------------------------


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for r, q in more.items():
        total[r] = total.get(r, 0) + q


def _container_requests(c: api_core.Container, where: str) -> dict[str, int]:
    reqs = _resource_list(c.resources.limits, f"{where}.resources.limits")
    reqs.update(_resource_list(c.resources.requests, f"{where}.resources.requests"))  # limits stand in for requests
    return reqs


def pod_requests(spec: api_core.PodSpec, where: str = "spec") -> dict[str, int]:
    """Effective requests of one pod in milli-units (k8s resourcehelpers.PodRequests)."""
    total: dict[str, int] = {}
    for i, c in enumerate(spec.containers):
        _add(total, _container_requests(c, f"{where}.containers[{i}]"))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, c in enumerate(spec.init_containers):
        reqs = _container_requests(c, f"{where}.initContainers[{i}]")
        if c.restart_policy == "Always":
            _add(total, reqs)
            _add(sidecars, reqs)
            reqs = dict(sidecars)
        else:
            reqs = dict(reqs)
            _add(reqs, sidecars)
        for r, q in reqs.items():
            init_peak[r] = max(init_peak.get(r, 0), q)
    for r, q in init_peak.items():
        total[r] = max(total.get(r, 0), q)
    if spec.resources is not None and spec.resources.requests:
        total.update(_resource_list(spec.resources.requests, f"{where}.resources.requests"))
    _add(total, _resource_list(spec.overhead, f"{where}.overhead"))
    return total


def _affinity(spec: api_core.PodSpec) -> tuple[NodeSelectorTerm, ...]:
    aff = spec.affinity
    if aff is None or aff.node_affinity is None:
        return ()
    required = aff.node_affinity.required_during_scheduling_ignored_during_execution
    if required is None:
        return ()
    return tuple(
        NodeSelectorTerm(
            match_expressions=tuple(
                NodeSelectorRequirement(key=e.key, operator=e.operator, values=e.values) for e in term.match_expressions
            )
        )
        for term in required.node_selector_terms
    )


def _true_in(by_type: dict[str, Condition], type_: str) -> Condition | None:
    c = by_type.get(type_)
    return c if c is not None and c.status == "True" else None


def pod_sets(sets: tuple[api.PodSet, ...], key: str) -> tuple[PodSet, ...]:
    """A Workload's spec.podSets as the core's pod sets (`key` names the Workload in errors)."""
    return tuple(
        PodSet(
            name=ps.name,
            count=ps.count,
            min_count=ps.min_count,
            requests=pod_requests(ps.template.spec, f"{key}: spec.podSets[{i}].template.spec"),
            node_selector=dict(ps.template.spec.node_selector),
            tolerations=tuple(_toleration(t) for t in ps.template.spec.tolerations),
            required_affinity=_affinity(ps.template.spec),
            topology_request=ps.topology_request,
        )
        for i, ps in enumerate(sets)
    )


def workload_key(meta: ObjectMeta) -> str:
    return f"Workload {meta.namespace}/{meta.name}"


class WorkloadSpecFields(Protocol):
    """What workload_of reads of a Workload's spec besides its pod sets (the shell may decode a
    slimmer spec than kq.api's, with the pod sets converted apart)."""

    @property
    def queue_name(self) -> str: ...
    @property
    def priority(self) -> int | None: ...
    @property
    def priority_class_ref(self) -> api.PriorityClassRef | None: ...
    @property
    def is_active(self) -> bool: ...
    @property
    def maximum_execution_time_seconds(self) -> int | None: ...


def workload(obj: api.Workload) -> Workload:
    return workload_of(obj.metadata, obj.spec, obj.status, pod_sets(obj.spec.pod_sets, workload_key(obj.metadata)))


def workload_of(
    meta: ObjectMeta, spec: WorkloadSpecFields, status: api.WorkloadStatus, sets: tuple[PodSet, ...]
) -> Workload:
    """The core's Workload from its parts, its pod sets already converted (pod_sets above)."""
    key = workload_key(meta)
    counts = {ps.name: ps.count for ps in sets}
    conds: dict[str, Condition] = {}  # by type, the first of each (find_condition's answer): one pass
    for c in status.conditions:
        conds.setdefault(c.type, c)
    reserved = _true_in(conds, "QuotaReserved")
    admission = None
    if reserved is not None and status.admission is not None:
        admission = Admission(
            cluster_queue=status.admission.cluster_queue,
            pod_sets=tuple(
                PodSetAssignment(
                    name=psa.name,
                    flavors=dict(psa.flavors),
                    resource_usage=_resource_list(
                        psa.resource_usage, f"{key}: status.admission.podSetAssignments[{i}]"
                    ),
                    count=psa.count if psa.count is not None else counts.get(psa.name, 0),
                    topology_assignment=psa.topology_assignment,
                    delayed_topology_request=psa.delayed_topology_request,
                )
                for i, psa in enumerate(status.admission.pod_set_assignments)
            ),
        )
    evicted = _true_in(conds, "Evicted")
    admitted = _true_in(conds, "Admitted")
    requeue_at = None
    if status.requeue_state is not None:
        requeue_at = to_seconds(status.requeue_state.requeue_at)
    requeued = conds.get("Requeued")
    # Requeued=False(Deactivated) on an active workload: Kueue's workload controller flips it to
    # True (Reactivated) at once, so a reactivated workload is not held back by it. After an
    # AdmissionCheck eviction it turns it True once requeueState.requeueAt (if any) has passed.
    reactivated = requeued is not None and requeued.reason == "Deactivated" and spec.is_active
    after_check = requeued is not None and requeued.reason == "AdmissionCheck"
    if requeued is not None and requeued.status == "False" and not reactivated and not after_check:
        requeue_at = math.inf  # Kueue keeps it out of the queue until Requeued turns True
    priority_class = None
    if spec.priority_class_ref is not None and spec.priority_class_ref.kind == "WorkloadPriorityClass":
        priority_class = spec.priority_class_ref.name
    return Workload(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resource_version,
        queue_name=spec.queue_name,
        priority=spec.priority,
        priority_class=priority_class,
        creation_time=to_seconds(meta.creation_timestamp) or 0.0,
        pod_sets=sets,
        active=spec.is_active,
        job_uid=meta.labels.get(JOB_UID_LABEL, ""),
        admission=admission,
        quota_reserved_time=to_seconds(reserved.last_transition_time) if reserved is not None else None,
        admitted=admitted is not None,
        finished=_true_in(conds, "Finished") is not None,
        evicted_reason=evicted.reason if evicted is not None else None,
        evicted_time=to_seconds(evicted.last_transition_time) if evicted is not None else None,
        requeue_at=requeue_at,
        admission_checks=tuple(
            AdmissionCheckState(name=c.name, state=c.state, message=c.message) for c in status.admission_checks
        ),
        unhealthy_nodes=tuple(n.name for n in status.unhealthy_nodes),
        admitted_time=to_seconds(admitted.last_transition_time) if admitted is not None else None,
        max_execution_s=spec.maximum_execution_time_seconds,
        past_execution_s=status.accumulated_past_execution_time_seconds or 0,
        pods_ready=_true_in(conds, "PodsReady") is not None,
    )


def event_from_api(obj: object) -> Event | None:
    """The domain event for a kq.api object, or None for kinds the admission core ignores."""
    match obj:
        case api.Workload():
            return workload(obj)
        case api.ClusterQueue():
            return cluster_queue(obj)
        case api.Cohort():
            return cohort(obj)
        case api.LocalQueue():
            return local_queue(obj)
        case api.ResourceFlavor():
            return resource_flavor(obj)
        case api.WorkloadPriorityClass():
            return priority_class(obj)
        case api.AdmissionCheck():
            return admission_check(obj)
        case api.Topology():
            return Topology(name=obj.metadata.name)
        case api_core.Namespace():
            return namespace(obj)
    return None
