"""A Workload as the core reads it (kq.api types in, WorkloadView out)."""

from __future__ import annotations

from functools import lru_cache

from kq.api import constants as k
from kq.api.kueue import Workload
from kq.api.meta import parse_time

from .model import Key, WorkloadView


@lru_cache(maxsize=4096)
def _parse(text: str) -> float:
    return parse_time(text).timestamp()


def _seconds(text: str | None) -> float | None:
    """Condition times are whole seconds and recur across workloads: parse each once."""
    return _parse(text) if text else None


def workload_view(cluster: str, wl: Workload) -> WorkloadView:
    meta, st = wl.metadata, wl.status
    by_type = {c.type: c for c in st.conditions}
    admitted = by_type.get(k.WORKLOAD_ADMITTED)
    ready = by_type.get(k.WORKLOAD_PODS_READY)
    requeued = by_type.get(k.WORKLOAD_REQUEUED)
    rs = st.requeue_state

    def true(type_: str) -> bool:
        c = by_type.get(type_)
        return c is not None and c.status == "True"

    is_admitted = admitted is not None and admitted.status == "True"
    return WorkloadView(
        key=Key(cluster, meta.namespace, meta.name),
        uid=meta.uid,
        resource_version=meta.resource_version,
        active=wl.spec.is_active,
        finished=true(k.WORKLOAD_FINISHED),
        deleting=meta.deletion_timestamp is not None,
        quota_reserved=true(k.WORKLOAD_QUOTA_RESERVED),
        admitted=is_admitted,
        admitted_at=_seconds(admitted.last_transition_time) if is_admitted and admitted is not None else None,
        admitted_at_text=(admitted.last_transition_time or "") if is_admitted and admitted is not None else "",
        evicted=true(k.WORKLOAD_EVICTED),
        pods_ready_status=ready.status if ready is not None else None,
        pods_ready_reason=ready.reason if ready is not None else "",
        pods_ready_at=_seconds(ready.last_transition_time) if ready is not None else None,
        requeue_count=(rs.count or 0) if rs is not None else 0,
        requeue_at=_seconds(rs.requeue_at) if rs is not None else None,
        requeue_at_text=(rs.requeue_at or "") if rs is not None else "",
        requeued_status=requeued.status if requeued is not None else None,
        requeued_reason=requeued.reason if requeued is not None else "",
    )
