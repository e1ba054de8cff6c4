"""Fluent builders for the admission core's records (after Kueue's test wrappers).

    cq("cq-a").cohort("co").flavor("default", cpu="4").preemption(within="LowerPriority").obj()
    wl("ns/w1").queue("main").priority(5).at(1.0).pods("main", 1, cpu="2").obj()
"""

from __future__ import annotations

import re

from services.admission.core import (
    Admission,
    AdmissionCheckRule,
    BorrowWithinCohort,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    LabelSelector,
    LocalQueue,
    PodSet,
    PodSetAssignment,
    Preemption,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Taint,
    Toleration,
    Workload,
)
from services.admission.core.model import AdmissionCheckState

_SUFFIX = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def milli(q: str | int) -> int:
    """"4" -> 4000, "500m" -> 500, "1Gi" -> 1073741824000 (test helper, not a full quantity parser)."""
    if isinstance(q, int):
        return q * 1000
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?", q)
    if not m:
        raise ValueError(f"bad quantity {q!r}")
    num, suffix = m.group(1), m.group(2) or ""
    if suffix == "m":
        return int(float(num))
    return round(float(num) * _SUFFIX[suffix] * 1000)


Q = str | int | tuple  # "4" or ("4", borrowingLimit, lendingLimit) with None for unset


def _quota(resource: str, spec: Q) -> ResourceQuota:
    if isinstance(spec, tuple):
        nominal, borrow, lend = [*spec, None, None][:3]
        return ResourceQuota(
            name=resource,
            nominal=milli(nominal),
            borrowing_limit=None if borrow is None else milli(borrow),
            lending_limit=None if lend is None else milli(lend),
        )
    return ResourceQuota(name=resource, nominal=milli(spec))


def fq(flavor: str, **resources: Q) -> FlavorQuotas:
    """Quotas of one flavor: fq("on-demand", cpu="4", memory=("8Gi", None, "4Gi"))."""
    return FlavorQuotas(name=flavor, resources=tuple(_quota(r, q) for r, q in resources.items()))


class _GroupsMixin:
    _groups: list[ResourceGroup]

    def group(self, *flavors: FlavorQuotas):
        """One resource group; covered resources are those of its first flavor."""
        covered = tuple(rq.name for rq in flavors[0].resources)
        self._groups.append(ResourceGroup(covered_resources=covered, flavors=tuple(flavors)))
        return self

    def flavor(self, name: str, **resources: Q):
        """A resource group with a single flavor."""
        return self.group(fq(name, **resources))


class CQ(_GroupsMixin):
    def __init__(self, name: str) -> None:
        self._name = name
        self._cohort: str | None = None
        self._groups = []
        self._strategy = "BestEffortFIFO"
        self._selector: LabelSelector | None = LabelSelector()
        self._preemption = Preemption()
        self._fungibility = FlavorFungibility()
        self._weight = 1.0
        self._checks: list[AdmissionCheckRule] = []
        self._stop = "None"

    def cohort(self, name: str) -> CQ:
        self._cohort = name
        return self

    def strict(self) -> CQ:
        self._strategy = "StrictFIFO"
        return self

    def selector(self, selector: LabelSelector | None) -> CQ:
        self._selector = selector
        return self

    def preemption(
        self,
        within: str = "Never",
        reclaim: str = "Never",
        borrow: str | None = None,
        threshold: int | None = None,
    ) -> CQ:
        bwc = None if borrow is None else BorrowWithinCohort(policy=borrow, max_priority_threshold=threshold)  # type: ignore[arg-type]  # policies as str
        self._preemption = Preemption(
            within_cluster_queue=within,  # type: ignore[arg-type]  # the builder takes Kueue's spelling as str
            reclaim_within_cohort=reclaim,  # type: ignore[arg-type]  # the builder takes Kueue's spelling as str
            borrow_within_cohort=bwc,
        )
        return self

    def fungibility(self, borrow: str = "MayStopSearch", preempt: str = "TryNextFlavor", preference: str | None = None) -> CQ:
        self._fungibility = FlavorFungibility(
            when_can_borrow=borrow,  # type: ignore[arg-type]  # the builder takes Kueue's spelling as str
            when_can_preempt=preempt,  # type: ignore[arg-type]  # the builder takes Kueue's spelling as str
            preference=preference,  # type: ignore[arg-type]  # the builder takes Kueue's spelling as str
        )
        return self

    def weight(self, w: float) -> CQ:
        self._weight = w
        return self

    def check(self, name: str, *on_flavors: str) -> CQ:
        self._checks.append(AdmissionCheckRule(name=name, on_flavors=on_flavors))
        return self

    def stop(self, policy: str) -> CQ:
        self._stop = policy
        return self

    def obj(self) -> ClusterQueue:
        return ClusterQueue(
            name=self._name,
            cohort=self._cohort,
            resource_groups=tuple(self._groups),
            queueing_strategy=self._strategy,  # type: ignore[arg-type]  # the builder takes Kueue's spelling as str
            namespace_selector=self._selector,
            preemption=self._preemption,
            flavor_fungibility=self._fungibility,
            fair_weight=self._weight,
            admission_checks=tuple(self._checks),
            stop_policy=self._stop,  # type: ignore[arg-type]  # the builder takes Kueue's spelling as str
        )


def cq(name: str) -> CQ:
    return CQ(name)


class CohortB(_GroupsMixin):
    def __init__(self, name: str) -> None:
        self._name = name
        self._parent: str | None = None
        self._groups = []
        self._weight = 1.0

    def parent(self, name: str) -> CohortB:
        self._parent = name
        return self

    def weight(self, w: float) -> CohortB:
        self._weight = w
        return self

    def obj(self) -> Cohort:
        return Cohort(name=self._name, parent=self._parent, resource_groups=tuple(self._groups), fair_weight=self._weight)


def cohort(name: str) -> CohortB:
    return CohortB(name)


def lq(key: str, cluster_queue: str, stop: str = "None") -> LocalQueue:
    ns, name = key.split("/")
    return LocalQueue(namespace=ns, name=name, cluster_queue=cluster_queue, stop_policy=stop)  # type: ignore[arg-type]  # Kueue's stopPolicy spelling, as str


def flavor(name: str, labels: dict[str, str] | None = None, taints: tuple[Taint, ...] = (), tolerations: tuple[Toleration, ...] = ()) -> ResourceFlavor:
    return ResourceFlavor(name=name, node_labels=labels or {}, node_taints=taints, tolerations=tolerations)


class WL:
    _uids = 0

    def __init__(self, key: str) -> None:
        self._ns, self._name = key.split("/")
        WL._uids += 1
        self._uid = f"uid-{self._name}"
        self._queue = "main"
        self._priority: int | None = None
        self._created = 0.0
        self._pod_sets: list[PodSet] = []
        self._admission: Admission | None = None
        self._admitted = False
        self._reserved_at: float | None = None
        self._evicted: str | None = None
        self._checks: tuple[AdmissionCheckState, ...] = ()

    def queue(self, name: str) -> WL:
        self._queue = name
        return self

    def uid(self, uid: str) -> WL:
        self._uid = uid
        return self

    def priority(self, p: int) -> WL:
        self._priority = p
        return self

    def at(self, t: float) -> WL:
        self._created = t
        return self

    def pods(self, name: str, count: int, min_count: int | None = None, **requests: str | int) -> WL:
        self._pod_sets.append(
            PodSet(name=name, count=count, min_count=min_count, requests={r: milli(q) for r, q in requests.items()})
        )
        return self

    def podset(self, ps: PodSet) -> WL:
        self._pod_sets.append(ps)
        return self

    def reserved(self, cluster_queue: str, flavors: dict[str, str] | str, at: float = 0.0, admitted: bool = True) -> WL:
        """Already holding quota: every resource of every pod set in `flavors` (one flavor name for all)."""
        psas = []
        for ps in self._pod_sets:
            fl = {r: (flavors if isinstance(flavors, str) else flavors[r]) for r in ps.requests}
            psas.append(
                PodSetAssignment(
                    name=ps.name, flavors=fl, resource_usage={r: q * ps.count for r, q in ps.requests.items()}, count=ps.count
                )
            )
        self._admission = Admission(cluster_queue=cluster_queue, pod_sets=tuple(psas))
        self._admitted = admitted
        self._reserved_at = at
        return self

    def evicted(self, reason: str = "Preempted") -> WL:
        self._evicted = reason
        return self

    def checks(self, **states: str) -> WL:
        self._checks = tuple(AdmissionCheckState(name=n, state=s) for n, s in states.items())  # type: ignore[arg-type]  # states as plain strings
        return self

    def obj(self) -> Workload:
        return Workload(
            namespace=self._ns,
            name=self._name,
            uid=self._uid,
            resource_version="1",
            queue_name=self._queue,
            priority=self._priority,
            creation_time=self._created,
            pod_sets=tuple(self._pod_sets) or (PodSet(name="main", count=1, requests={}),),
            admission=self._admission,
            quota_reserved_time=self._reserved_at,
            admitted=self._admitted,
            evicted_reason=self._evicted,
            evicted_time=0.0 if self._evicted else None,
            admission_checks=self._checks,
        )


def wl(key: str) -> WL:
    return WL(key)
