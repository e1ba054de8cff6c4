"""ClusterQueue and LocalQueue status, reported only when it changed since the last report."""

from __future__ import annotations

from collections.abc import Mapping

from .decisions import ClusterQueueStatus, FlavorUsage, LocalQueueStatus, ResourceUsage
from .fair_share import dominant_resource_share
from .ownership import owns_cq, owns_lq
from .parts import Parts
from .quota import FR
from .runtime import ClusterQueueRuntime, LocalQueueRuntime


def _flavor_usage(cq: ClusterQueueRuntime, usage: Mapping[FR, int], with_borrowed: bool) -> tuple[FlavorUsage, ...]:
    borrowed_shown = with_borrowed and cq.node.parent is not None  # Kueue: borrowed=0 outside a cohort
    return tuple(
        FlavorUsage(
            name=flavor,
            resources=tuple(
                ResourceUsage(
                    name=r,
                    total=(used := usage.get((flavor, r), 0)),
                    borrowed=max(0, used - nominal) if borrowed_shown else 0,
                )
                for r, nominal in resources
            ),
        )
        for flavor, resources in cq.status_layout
    )


def cluster_queue_status(p: Parts, cq: ClusterQueueRuntime) -> ClusterQueueStatus:
    share = None
    if p.config.fair_sharing is not None:
        share = dominant_resource_share(cq.node).weighted_share()
    return ClusterQueueStatus(
        name=cq.name,
        pending_workloads=len(cq.queue),
        reserving_workloads=len(cq.workloads),
        admitted_workloads=cq.admitted_count,
        flavors_reservation=_flavor_usage(cq, cq.node.usage, True),
        flavors_usage=_flavor_usage(cq, cq.admitted_usage, True),
        active=cq.active,
        active_reason=cq.active_reason,
        active_message=cq.active_message,
        weighted_share=share,
    )


def local_queue_status(p: Parts, lq: LocalQueueRuntime) -> LocalQueueStatus:
    cq = p.tree.cqs.get(lq.spec.cluster_queue)
    if lq.stopped:
        active, reason, message = False, "Stopped", "LocalQueue is stopped"
    elif cq is None:
        active, reason, message = False, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue"
    elif not cq.active:
        active, reason, message = False, "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"
    else:
        active, reason, message = True, "Ready", "Can submit new workloads to localQueue"
    reserved: tuple[FlavorUsage, ...] = ()
    admitted: tuple[FlavorUsage, ...] = ()
    if cq is not None:
        reserved = _flavor_usage(cq, lq.reserved_usage, False)
        admitted = _flavor_usage(cq, lq.admitted_usage, False)
    return LocalQueueStatus(
        namespace=lq.spec.namespace,
        name=lq.spec.name,
        pending_workloads=p.book.pending_count_of_lq(lq.key),
        reserving_workloads=lq.reserving,
        admitted_workloads=lq.admitted,
        flavors_reservation=reserved,
        flavors_usage=admitted,
        active=active,
        active_reason=reason,
        active_message=message,
    )


def changed_statuses(p: Parts) -> tuple[tuple[ClusterQueueStatus, ...], tuple[LocalQueueStatus, ...]]:
    """The statuses of the queues marked since the last call that differ from their last report."""
    cq_names, lq_keys = p.reporter.take_dirty()
    if p.owns is not None:  # sharded: only the queues of our trees (ownership.py)
        cq_names = [n for n in cq_names if owns_cq(p, n)]
        lq_keys = [k for k in lq_keys if owns_lq(p, k)]
    cqs: list[ClusterQueueStatus] = []
    for name in cq_names:
        cq = p.tree.cqs.get(name)
        if cq is not None and p.reporter.offer_cq(status := cluster_queue_status(p, cq)):
            cqs.append(status)
    lqs: list[LocalQueueStatus] = []
    for key in lq_keys:
        lq = p.tree.lqs.get(key)
        if lq is not None and p.reporter.offer_lq(key, lq_status := local_queue_status(p, lq)):
            lqs.append(lq_status)
    return tuple(cqs), tuple(lqs)
