"""The worker side of the manager's lease (pure): which copies on a worker must stop because their
manager has not renewed its lease on them in time (LEASE_ANNOTATION, written by the manager's
dispatcher on the copy that runs the Job).

A worker cut off from its manager cannot be told that the manager gave up on it; with this, the
copy stops itself (it is deactivated on the worker, so the worker's queues do not start it again)
a quarter of workerLostTimeout before the manager runs the workload elsewhere. Kueue has no such
guard; a worker that runs Kueue instead of kq keeps running its copy until the manager reaches it
again (then the copy is removed).
"""

from __future__ import annotations

from kq.api import constants as k
from kq.api.kueue import Workload
from kq.api.meta import condition_is_true, parse_time

from .model import LEASE_ANNOTATION


def expired_copies(workloads: list[Workload], now: float) -> list[Workload]:
    """Copies (origin label) running a Job, holding quota, whose manager lease ran out, not yet stopped."""
    out = []
    for wl in workloads:
        if k.MULTIKUEUE_ORIGIN_LABEL not in wl.metadata.labels:
            continue
        text = wl.metadata.annotations.get(LEASE_ANNOTATION)
        if not text or wl.spec.active is False or wl.metadata.deletion_timestamp is not None:
            continue
        if condition_is_true(wl.status.conditions, k.WORKLOAD_FINISHED):
            continue
        if not condition_is_true(wl.status.conditions, k.WORKLOAD_QUOTA_RESERVED):
            continue
        if wl.metadata.controller_ref() is None:
            continue  # no Job adopted it: nothing runs (only the winning copy ever gets a Job)
        try:
            until = parse_time(text).timestamp()
        except ValueError:
            continue
        if until < now:
            out.append(wl)
    return out
