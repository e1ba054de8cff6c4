"""What a check observed, derived purely from Kubernetes objects.

The derivations follow FORMAT.md "Checks" and Kueue's own readings of a
Workload's conditions (pkg/workload: IsFinished, IsAdmitted,
HasQuotaReservation, IsEvicted; SetQuotaReservation resets Preempted to False
with a "Previously: ..." message, so a Preempted condition of any status means
the workload was preempted at least once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from kq.api.kueue import ClusterQueue, Workload
from kq.api.meta import Condition, find_condition
from kq.api.topology import topology_domains
from kq.quantity import canonical_quantity


class _Out(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=False):
    pass


class ObservedDomain(_Out, frozen=True, kw_only=True, order=True):
    values: tuple[str, ...]
    count: int


class ObservedWorkload(_Out, frozen=True, kw_only=True):
    workload: str  # the Workload's own name (generated for a Job's)
    state: str  # pending | quotaReserved | admitted | finished | deactivated
    succeeded: bool | None
    cluster_queue: str | None
    flavors: dict[str, dict[str, str]] | None  # podset -> resource -> flavor
    topology: dict[str, tuple[ObservedDomain, ...]] | None
    cluster: str | None
    nominated_clusters: tuple[str, ...] | None
    preempted: bool
    preemption_reason: str | None
    evictions: int
    count: dict[str, int] | None
    message: str | None
    requeue_count: int


class ObservedClusterQueue(_Out, frozen=True, kw_only=True):
    admitted_workloads: int | None
    pending_workloads: int | None
    reserving_workloads: int | None
    usage: dict[str, dict[str, str]]  # flavor -> resource -> quantity reserved
    borrowed: dict[str, dict[str, str]]
    active: bool | None


class ObservedRemote(_Out, frozen=True, kw_only=True):
    present: tuple[str, ...]
    absent: tuple[str, ...]


class Observed(_Out, frozen=True, kw_only=True):
    workloads: dict[str, ObservedWorkload | None]  # None: no such workload
    cluster_queues: dict[str, ObservedClusterQueue | None]  # None: no such ClusterQueue
    remote: dict[str, ObservedRemote]


def _cond(wl: Workload, type_: str) -> Condition | None:
    return find_condition(wl.status.conditions, type_)


def _true(wl: Workload, type_: str) -> bool:
    c = _cond(wl, type_)
    return c is not None and c.status == "True"


def workload_state(wl: Workload) -> str:
    """pending | quotaReserved | admitted | finished | deactivated (FORMAT.md)."""
    if _true(wl, "Finished"):
        return "finished"
    if wl.spec.active is False:
        return "deactivated"
    if _true(wl, "Admitted"):
        return "admitted"
    admission = wl.status.admission
    # An evicted workload keeps its admission until the quota is released.
    if _true(wl, "QuotaReserved") or admission is not None:
        return "quotaReserved"
    return "pending"


def _reason_message(wl: Workload, state: str) -> str | None:
    """The workload's current reason: why it is pending, or how it was admitted."""
    order = {
        "finished": ("Finished",),
        "deactivated": ("Evicted", "QuotaReserved"),
        "admitted": ("Admitted",),
        "quotaReserved": ("Evicted", "QuotaReserved") if _true(wl, "Evicted") else ("QuotaReserved", "Admitted"),
        "pending": ("QuotaReserved", "Evicted"),
    }[state]
    for type_ in order:
        c = _cond(wl, type_)
        if c is not None:
            return c.message
    return None


HOSTNAME_LABEL = "kubernetes.io/hostname"


class TopologyView(msgspec.Struct, frozen=True, kw_only=True):
    """What it takes to read a hostname-only topologyAssignment with every level of its Topology:
    Kueue records only the hostname level when the Topology's lowest level is the hostname."""

    flavor_levels: dict[str, tuple[str, ...]] = {}  # TAS flavor -> its Topology's levels, top first
    host_labels: dict[str, dict[str, str]] = {}  # hostname label value -> that node's labels


def _full_values(values: tuple[str, ...], levels: tuple[str, ...], flavor_levels: tuple[str, ...] | None,
                 view: TopologyView) -> tuple[str, ...]:
    if levels != (HOSTNAME_LABEL,) or not flavor_levels or len(flavor_levels) == 1:
        return values
    labels = view.host_labels.get(values[0])
    if labels is None or any(lv not in labels for lv in flavor_levels):
        return values
    return tuple(labels[lv] for lv in flavor_levels)


def _observed_topology(a, view: TopologyView | None) -> tuple[ObservedDomain, ...]:
    ta = a.topology_assignment
    flavor_levels = None
    if view is not None:
        flavor_levels = next((view.flavor_levels[f] for f in a.flavors.values() if f in view.flavor_levels), None)
    return tuple(sorted(
        ObservedDomain(values=_full_values(d.values, tuple(ta.levels), flavor_levels, view or TopologyView()),
                       count=d.count)
        for d in topology_domains(ta)
    ))


def topology_view(flavors: Sequence, topologies: Sequence, nodes: Sequence) -> TopologyView:
    levels = {t.metadata.name: tuple(lv.node_label for lv in t.spec.levels) for t in topologies}
    flavor_levels: Mapping[str, tuple[str, ...]] = {
        f.metadata.name: levels[f.spec.topology_name] for f in flavors
        if f.spec.topology_name and f.spec.topology_name in levels
    }
    hosts = {n.metadata.labels[HOSTNAME_LABEL]: dict(n.metadata.labels) for n in nodes
             if HOSTNAME_LABEL in n.metadata.labels}
    return TopologyView(flavor_levels=dict(flavor_levels), host_labels=hosts)


def observe_workload(wl: Workload, view: TopologyView | None = None) -> ObservedWorkload:
    state = workload_state(wl)
    st = wl.status
    admission = st.admission
    finished = _cond(wl, "Finished")
    preempted = _cond(wl, "Preempted")
    stats = st.scheduling_stats.evictions if st.scheduling_stats is not None else ()
    preempted_ever = preempted is not None or any(e.reason == "Preempted" and e.count > 0 for e in stats)
    flavors = count = topology = None
    if admission is not None:
        flavors = {a.name: dict(sorted(a.flavors.items())) for a in admission.pod_set_assignments}
        # count may be missing on old objects: then the pod set's full count was admitted.
        spec_counts = {ps.name: ps.count for ps in wl.spec.pod_sets}
        count = {
            a.name: a.count if a.count is not None else spec_counts.get(a.name, 0)
            for a in admission.pod_set_assignments
        }
        topology = {
            a.name: _observed_topology(a, view)
            for a in admission.pod_set_assignments
            if a.topology_assignment is not None
        } or None
    requeue = st.requeue_state
    return ObservedWorkload(
        workload=wl.metadata.name,
        state=state,
        succeeded=(finished.reason == "Succeeded") if state == "finished" and finished is not None else None,
        cluster_queue=admission.cluster_queue if admission is not None else None,
        flavors=flavors,
        topology=topology,
        cluster=st.cluster_name,
        nominated_clusters=st.nominated_cluster_names or None,
        preempted=preempted_ever,
        preemption_reason=preempted.reason if preempted is not None and preempted.status == "True" else None,
        evictions=sum(e.count for e in stats),
        count=count,
        message=_reason_message(wl, state),
        requeue_count=(requeue.count or 0) if requeue is not None else 0,
    )


def _per_flavor(usages: Sequence, borrowed: bool) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for fu in usages:
        out[fu.name] = {
            r.name: canonical_quantity(r.borrowed if borrowed else r.total)
            for r in fu.resources
        }
    return out


def observe_cluster_queue(cq: ClusterQueue) -> ObservedClusterQueue:
    st = cq.status
    active = next((c.status == "True" for c in st.conditions if c.type == "Active"), None)
    return ObservedClusterQueue(
        admitted_workloads=st.admitted_workloads,
        pending_workloads=st.pending_workloads,
        reserving_workloads=st.reserving_workloads,
        usage=_per_flavor(st.flavors_reservation, borrowed=False),
        borrowed=_per_flavor(st.flavors_reservation, borrowed=True),
        active=active,
    )
