"""Pending workloads of a queue with their positions, from the core's queues (Kueue's visibility
API). Pure. Kueue's order: every pending workload of the ClusterQueue (active or set aside) by
priority, then queue-order time; a LocalQueue's positions count its own workloads in that order."""

from __future__ import annotations

from datetime import UTC, datetime

from kq.visibility import PendingWorkload, PendingWorkloadMeta, PendingWorkloadsRequest, PendingWorkloadsSummary
from services.admission.core.state import SchedulerState
from services.admission.core.workloads import PendingInfo


def _ordered(state: SchedulerState, cq: str) -> list[PendingInfo]:
    rt = state.cqs[cq]
    return sorted(rt.queue.infos(), key=lambda i: (-i.priority, i.order_ts, i.wl.uid))


def _time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pending_workloads(state: SchedulerState, req: PendingWorkloadsRequest) -> PendingWorkloadsSummary | None:
    """None when the queue is unknown. ValueError for a request that names no queue or both kinds."""
    if (req.cluster_queue is None) == (req.local_queue is None):
        raise ValueError("name a ClusterQueue (clusterQueue) or a LocalQueue (namespace, localQueue)")
    if req.offset < 0 or req.limit < 0:
        raise ValueError(f"offset and limit must not be negative (offset {req.offset}, limit {req.limit})")
    lq_key: str | None = None
    if req.cluster_queue is not None:
        cq = req.cluster_queue
    else:
        lq_key = f"{req.namespace or 'default'}/{req.local_queue}"
        lq = state.local_queues.get(lq_key)
        if lq is None:
            return None
        cq = lq.spec.cluster_queue
    if cq not in state.cqs:
        return None if lq_key is None else PendingWorkloadsSummary()
    # Only the requested page is built: a client paging through 100,000 pending workloads asks
    # for every page, and building all of them for each page held admission's loop for seconds.
    items: list[PendingWorkload] = []
    in_lq: dict[str, int] = {}
    end = req.offset + req.limit
    matched = 0
    for pos, info in enumerate(_ordered(state, cq)):
        if matched >= end:
            break
        wl = info.wl
        key = f"{wl.namespace}/{wl.queue_name}"
        lq_pos = in_lq.get(key, 0)
        in_lq[key] = lq_pos + 1
        if lq_key is not None and key != lq_key:
            continue
        matched += 1
        if matched <= req.offset:
            continue
        items.append(PendingWorkload(
            metadata=PendingWorkloadMeta(name=wl.name, namespace=wl.namespace,
                                         creation_timestamp=_time(wl.creation_time)),
            priority=info.priority, local_queue_name=wl.queue_name, position_in_cluster_queue=pos,
            position_in_local_queue=lq_pos))
    return PendingWorkloadsSummary(items=tuple(items))
