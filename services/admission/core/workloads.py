"""Per-workload facts the scheduler derives once: priority, queue order, requests, usage, shape."""

from __future__ import annotations

from collections.abc import Mapping

from .model import Admission, PodSet, Workload
from .quota import FR

# The shape of a workload as far as scheduling is concerned (Kueue's scheduling equivalence hash):
# equal shapes get equal flavor-assignment outcomes in the same state.
Shape = tuple[object, ...]


_FNV_OFFSET, _FNV_PRIME, _MASK = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1
_RESOURCE_ORDER: dict[str, tuple[int, str]] = {}


def resource_order(name: str) -> tuple[int, str]:
    """Kueue iterates a pod set's requests in FNV-1a-64 hash order of the resource names
    (resources.SliceRequests); resource groups are visited in that order, which decides
    which group's failure is reported when several would fail."""
    key = _RESOURCE_ORDER.get(name)
    if key is None:
        h = _FNV_OFFSET
        for b in name.encode():
            h = ((h ^ b) * _FNV_PRIME) & _MASK
        key = _RESOURCE_ORDER[name] = (h, name)
    return key


def effective_priority(w: Workload, classes: Mapping[str, int]) -> int:
    if w.priority is not None:
        return w.priority
    if w.priority_class is not None:
        return classes.get(w.priority_class, 0)
    return 0


def order_timestamp(w: Workload, requeuing_timestamp: str) -> float:
    """Kueue workload.Ordering.GetQueueOrderTimestamp (PrioritySortingWithinCohort on)."""
    if w.evicted_time is not None:
        if w.evicted_reason == "PodsReadyTimeout" and requeuing_timestamp == "Eviction":
            return w.evicted_time
        if w.evicted_reason == "AdmissionCheck":
            return w.evicted_time
    return w.creation_time


def pod_set_totals(ps: PodSet, count: int | None = None) -> dict[str, int]:
    """Requests of `count` pods (default: all of them); negative requests count as zero."""
    n = ps.count if count is None else count
    return {r: max(0, q) * n for r, q in ps.requests.items()}


def shape_of(w: Workload, priority: int) -> Shape:
    return (
        priority,
        tuple(
            (
                ps.name,
                ps.count,
                ps.min_count,
                tuple(sorted(ps.requests.items())),
                tuple(sorted(ps.node_selector.items())),
                ps.tolerations,
                ps.required_affinity,
                ps.topology_request,  # TAS: the same quota need may fit one topology and not another
            )
            for ps in w.pod_sets
        ),
    )


def admission_usage(admission: Admission) -> dict[FR, int]:
    usage: dict[FR, int] = {}
    for psa in admission.pod_sets:
        for res, q in psa.resource_usage.items():
            flavor = psa.flavors.get(res)
            if flavor is None or not q:
                continue
            fr = (flavor, res)
            usage[fr] = usage.get(fr, 0) + q
    return usage


def can_be_partially_admitted(w: Workload) -> bool:
    return any(ps.min_count is not None and ps.count > ps.min_count for ps in w.pod_sets)


class ScanProgress:
    """Where the flavor scan stopped per pod set and resource (Kueue AssignmentClusterQueueState).

    An index of -1 means every flavor was tried; the next attempt starts from the first one.
    """

    __slots__ = ("tried", "cq_generation", "cycle")

    def __init__(self, tried: list[dict[str, int]], cq_generation: int, cycle: int) -> None:
        self.tried = tried
        self.cq_generation = cq_generation
        self.cycle = cycle

    def pending_flavors(self) -> bool:
        return any(idx != -1 for ps in self.tried for idx in ps.values())

    def next_flavor(self, ps_index: int, resource: str) -> int:
        if ps_index >= len(self.tried):
            return 0
        idx = self.tried[ps_index].get(resource)
        return 0 if idx is None else idx + 1

    def outdated(self, cq_generation: int, cycle: int) -> bool:
        # Kueue FlavorFungibilityPreserveScanProgress: progress from the current or the previous
        # cycle is kept even when the ClusterQueue generation moved on.
        if cycle - self.cycle <= 1:
            return False
        return cq_generation > self.cq_generation


class PendingInfo:
    """A workload waiting in a ClusterQueue's queue."""

    __slots__ = ("key", "wl", "priority", "order_ts", "shape", "last_assignment", "seq", "lq_key")

    def __init__(self, wl: Workload, priority: int, order_ts: float) -> None:
        self.key = wl.key
        self.wl = wl
        self.priority = priority
        self.order_ts = order_ts
        self.shape = shape_of(wl, priority)
        self.last_assignment: ScanProgress | None = None
        self.seq = 0  # heap entry generation, owned by the queue
        self.lq_key = f"{wl.namespace}/{wl.queue_name}"

    @property
    def uid(self) -> str:
        return self.wl.uid

    def pending_flavors(self) -> bool:
        return self.last_assignment is not None and self.last_assignment.pending_flavors()


class ReservedInfo:
    """A workload holding quota in a ClusterQueue (assumed by us or seen with status.admission)."""

    __slots__ = (
        "key",
        "uid",
        "wl",
        "cq",
        "admission",
        "usage",
        "frs",
        "priority",
        "order_ts",
        "reserved_time",
        "evicted",
        "admitted",
        "lq_key",
        "assumed",
        "applied_rv",
    )

    def __init__(
        self,
        wl: Workload,
        admission: Admission,
        priority: int,
        order_ts: float,
        reserved_time: float,
        admitted: bool,
        assumed: bool,
    ) -> None:
        self.key = wl.key
        self.uid = wl.uid
        self.wl = wl
        self.cq = admission.cluster_queue
        self.admission = admission
        self.usage = admission_usage(admission)
        self.frs = frozenset((f, r) for psa in admission.pod_sets for r, f in psa.flavors.items())
        self.priority = priority
        self.order_ts = order_ts
        self.reserved_time = reserved_time
        self.evicted = wl.evicted_reason is not None
        self.admitted = admitted
        self.lq_key = f"{wl.namespace}/{wl.queue_name}"
        self.assumed = assumed
        self.applied_rv: int | None = None  # set when the shell reports the admit command applied

    def uses_any(self, frs: frozenset[FR] | set[FR]) -> bool:
        return not self.frs.isdisjoint(frs)

    def flavors(self) -> set[str]:
        return {f for psa in self.admission.pod_sets for f in psa.flavors.values()}
