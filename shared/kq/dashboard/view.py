"""What the dashboard shows, computed from what the bus holds: pure, no I/O, no clock.

Inputs are the mirror's typed objects (ClusterQueues, LocalQueues, Cohorts, Workloads), the
visibility API's answer per ClusterQueue (positions, from the admission leader) and the latest
decisions (KQ_EVENTS). The output is one DashboardState, which the page renders as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from kq.api.kueue import ClusterQueue, Cohort, LocalQueue
from kq.api.meta import find_condition
from kq.api.workload import Workload
from kq.messages import (
    Decision,
    WorkloadAdmittedEvent,
    WorkloadEvictedEvent,
    WorkloadPendingEvent,
    WorkloadPreemptedEvent,
)
from kq.quantity import QuantityError, format_resource_amount, resource_amount
from kq.visibility import PendingWorkloadsSummary

RECENT_DECISIONS = 30  # how many of the latest admissions, preemptions and evictions the page lists


class ResourceBar(msgspec.Struct, frozen=True, kw_only=True):
    """One (flavor, resource) of a ClusterQueue: usage and reservation against the nominal quota."""

    flavor: str
    resource: str
    nominal: str  # formatted as Kubernetes does ("4", "500m", "8Gi")
    used: str
    reserved: str
    borrowed: str
    used_pct: float  # of the nominal quota; above 100 while borrowing
    reserved_pct: float


class PendingRow(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    name: str
    local_queue: str
    priority: int
    position_in_cluster_queue: int
    position_in_local_queue: int
    reason: str  # the QuotaReserved=False reason, e.g. Pending
    message: str  # why it waits, as the scheduler said it


class LocalQueueRow(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    name: str
    pending: int
    admitted: int
    stop_policy: str


class ClusterQueueCard(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    cohort: str
    active: bool
    inactive_reason: str
    pending: int
    reserving: int
    admitted: int
    bars: tuple[ResourceBar, ...]
    local_queues: tuple[LocalQueueRow, ...]
    pending_workloads: tuple[PendingRow, ...]
    positions_known: bool  # False when no admission leader answered for this queue


class CohortNode(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    parent: str
    depth: int
    cluster_queues: tuple[str, ...]


class DecisionRow(msgspec.Struct, frozen=True, kw_only=True):
    at: str
    kind: str  # Admitted | Preempted | Evicted | Pending
    namespace: str
    name: str
    detail: str  # the ClusterQueue, the preemptor, or the reason
    message: str


class DashboardState(msgspec.Struct, frozen=True, kw_only=True):
    cluster: str
    cohorts: tuple[CohortNode, ...]
    cluster_queues: tuple[ClusterQueueCard, ...]
    recent: tuple[DecisionRow, ...]


def _amount(resource: str, value: object) -> int:
    try:
        return resource_amount(resource, value)  # type: ignore[arg-type]  # a Quantity is str | int | float
    except QuantityError:
        return 0


def _pct(part: int, whole: int) -> float:
    if whole <= 0:
        return 100.0 if part > 0 else 0.0
    return round(100.0 * part / whole, 1)


def resource_bars(cq: ClusterQueue) -> tuple[ResourceBar, ...]:
    usage = {(f.name, r.name): r for f in cq.status.flavors_usage for r in f.resources}
    reservation = {(f.name, r.name): r for f in cq.status.flavors_reservation for r in f.resources}
    bars = []
    for group in cq.spec.resource_groups:
        for flavor in group.flavors:
            for quota in flavor.resources:
                res = quota.name
                nominal = _amount(res, quota.nominal_quota)
                used_u = usage.get((flavor.name, res))
                resv_u = reservation.get((flavor.name, res))
                used = _amount(res, used_u.total) if used_u else 0
                reserved = _amount(res, resv_u.total) if resv_u else 0
                borrowed = _amount(res, resv_u.borrowed) if resv_u else 0
                bars.append(ResourceBar(
                    flavor=flavor.name, resource=res, nominal=format_resource_amount(res, nominal),
                    used=format_resource_amount(res, used), reserved=format_resource_amount(res, reserved),
                    borrowed=format_resource_amount(res, borrowed), used_pct=_pct(used, nominal),
                    reserved_pct=_pct(reserved, nominal)))
    return tuple(bars)


def _why_pending(wl: Workload | None) -> tuple[str, str]:
    if wl is None:
        return "", ""
    cond = find_condition(wl.status.conditions, "QuotaReserved")
    if cond is None or cond.status == "True":
        return "", ""
    return cond.reason, cond.message


def pending_rows(summary: PendingWorkloadsSummary | None,
                 workloads: Mapping[tuple[str, str], Workload]) -> tuple[PendingRow, ...]:
    if summary is None:
        return ()
    rows = []
    for item in summary.items:
        reason, message = _why_pending(workloads.get((item.metadata.namespace, item.metadata.name)))
        rows.append(PendingRow(
            namespace=item.metadata.namespace, name=item.metadata.name, local_queue=item.local_queue_name,
            priority=item.priority, position_in_cluster_queue=item.position_in_cluster_queue,
            position_in_local_queue=item.position_in_local_queue, reason=reason, message=message))
    return tuple(rows)


def cohort_tree(cohorts: Iterable[Cohort], cqs: Iterable[ClusterQueue]) -> tuple[CohortNode, ...]:
    """Every cohort named by a Cohort object or a ClusterQueue, roots first, depth-first by name."""
    parent: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    for c in cohorts:
        parent[c.metadata.name] = c.spec.parent_name
        if c.spec.parent_name:
            parent.setdefault(c.spec.parent_name, "")
    for cq in cqs:
        if cq.spec.cohort_name:
            parent.setdefault(cq.spec.cohort_name, "")
            members.setdefault(cq.spec.cohort_name, []).append(cq.metadata.name)
    children: dict[str, list[str]] = {}
    for name, up in parent.items():
        children.setdefault(up, []).append(name)
    out: list[CohortNode] = []
    seen: set[str] = set()

    def walk(name: str, depth: int) -> None:
        if name in seen:  # a cycle in user input: show each cohort once
            return
        seen.add(name)
        out.append(CohortNode(name=name, parent=parent.get(name, ""), depth=depth,
                              cluster_queues=tuple(sorted(members.get(name, ())))))
        for child in sorted(children.get(name, ())):
            walk(child, depth + 1)

    roots = sorted(n for n, up in parent.items() if not up or up not in parent)
    for root in roots:
        walk(root, 0)
    for name in sorted(parent):  # members of a cycle have no root
        walk(name, 0)
    return tuple(out)


def decision_row(d: Decision) -> DecisionRow:
    kind = type(d).__struct_config__.tag  # the tagged union's tag: Admitted, Pending, ...
    match d:
        case WorkloadAdmittedEvent():
            detail = d.cluster_queue + (" (borrowing)" if d.borrowing else "")
        case WorkloadPreemptedEvent():
            detail = f"{d.reason} by {d.preemptor}"
        case WorkloadEvictedEvent() | WorkloadPendingEvent():
            detail = d.reason
    return DecisionRow(at=d.at, kind=str(kind), namespace=d.namespace, name=d.name, detail=detail, message=d.message)


def recent_decisions(decisions: Iterable[Decision], limit: int = RECENT_DECISIONS) -> tuple[DecisionRow, ...]:
    """The latest admissions, preemptions and evictions, newest first (Pending is shown per workload)."""
    shown = [d for d in decisions if not isinstance(d, WorkloadPendingEvent)]
    shown.sort(key=lambda d: (d.at, d.id), reverse=True)
    return tuple(decision_row(d) for d in shown[:limit])


def dashboard_state(cluster: str, *, cluster_queues: Iterable[ClusterQueue], local_queues: Iterable[LocalQueue],
                    cohorts: Iterable[Cohort], workloads: Iterable[Workload],
                    pending: Mapping[str, PendingWorkloadsSummary | None],
                    decisions: Iterable[Decision]) -> DashboardState:
    cqs = sorted(cluster_queues, key=lambda c: c.metadata.name)
    by_key = {(w.metadata.namespace or "", w.metadata.name): w for w in workloads}
    lqs_of: dict[str, list[LocalQueueRow]] = {}
    for lq in sorted(local_queues, key=lambda q: (q.metadata.namespace or "", q.metadata.name)):
        lqs_of.setdefault(lq.spec.cluster_queue, []).append(LocalQueueRow(
            namespace=lq.metadata.namespace or "", name=lq.metadata.name, pending=lq.status.pending_workloads,
            admitted=lq.status.admitted_workloads, stop_policy=lq.spec.stop_policy))
    cards = []
    for cq in cqs:
        active = find_condition(cq.status.conditions, "Active")
        name = cq.metadata.name
        cards.append(ClusterQueueCard(
            name=name, cohort=cq.spec.cohort_name, active=active is not None and active.status == "True",
            inactive_reason="" if active is None or active.status == "True" else active.message or active.reason,
            pending=cq.status.pending_workloads, reserving=cq.status.reserving_workloads,
            admitted=cq.status.admitted_workloads, bars=resource_bars(cq), local_queues=tuple(lqs_of.get(name, ())),
            pending_workloads=pending_rows(pending.get(name), by_key), positions_known=pending.get(name) is not None))
    return DashboardState(cluster=cluster, cohorts=cohort_tree(cohorts, cqs), cluster_queues=tuple(cards),
                          recent=recent_decisions(decisions))
