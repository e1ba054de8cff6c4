"""What one gc pass removes (pure).

Orphans (Kueue's multikueue gc, multikueuecluster.go runGC): a Workload on a worker carrying our
origin label whose manager Workload no longer exists (or is another incarnation, by the origin
uid annotation), and an object there of a kind MultiKueue runs (a Job, JobSet, PyTorchJob, RayJob,
TrainJob, AppWrapper, ...) whose prebuilt Workload is such an orphan or missing. To never
race the dispatcher's creations against a mirror that lags by a moment, an object is removed only
when two passes in a row found it orphaned.

Retention (Kueue's objectRetentionPolicies.workloads): a finished Workload is deleted afterFinished
after it finished; one Kueue deactivated, afterDeactivatedByKueue after its eviction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec

from kq.api import constants as k
from kq.api.kueue import Workload
from kq.api.meta import find_condition, parse_time

NsName = tuple[str, str]
DEACTIVATED_BY_KUEUE_PREFIX = f"{k.REASON_DEACTIVATED}DueTo"
# Deactivations Kueue itself decides (a user's spec.active=false evicts with plain "Deactivated").
KUEUE_DEACTIVATION_CAUSES = (k.EVICTED_BY_ADMISSION_CHECK, k.REASON_REQUEUING_LIMIT_EXCEEDED,
                             k.REASON_MAXIMUM_EXECUTION_TIME_EXCEEDED)


def deactivated_by_kueue(reason: str) -> bool:
    return reason.startswith(DEACTIVATED_BY_KUEUE_PREFIX) or reason in KUEUE_DEACTIVATION_CAUSES


KindNsName = tuple[str, str, str]  # (kind token, namespace, name)


class Orphans(msgspec.Struct, frozen=True, kw_only=True):
    workloads: tuple[NsName, ...] = ()
    objects: tuple[KindNsName, ...] = ()  # Jobs, JobSets and every other kind MultiKueue runs


def orphans(remote_workloads: Sequence[Workload], remote_objects: Mapping[str, Sequence[Any]],
            manager: dict[NsName, str]) -> Orphans:
    """manager: (namespace, name) -> uid of every Workload on the manager; remote_objects: kind token
    -> the worker's objects of that kind carrying our origin label."""
    gone: set[NsName] = set()
    for wl in remote_workloads:
        key = (wl.metadata.namespace, wl.metadata.name)
        uid = manager.get(key)
        origin_uid = wl.metadata.annotations.get(k.MULTIKUEUE_ORIGIN_UID_ANNOTATION)
        if uid is None or (origin_uid is not None and origin_uid != uid):
            gone.add(key)
    doomed = []
    for kind, objs in remote_objects.items():
        for obj in objs:
            md = obj.metadata
            key = (md.namespace, md.labels.get(k.PREBUILT_WORKLOAD_LABEL, md.name))
            if key in gone or key not in manager:
                doomed.append((kind, md.namespace, md.name))
    return Orphans(workloads=tuple(sorted(gone)), objects=tuple(sorted(doomed)))


def confirmed(now: Orphans, before: Orphans | None) -> Orphans:
    """Only what the previous pass found orphaned too."""
    if before is None:
        return Orphans()
    return Orphans(workloads=tuple(w for w in now.workloads if w in before.workloads),
                   objects=tuple(o for o in now.objects if o in before.objects))


def expired(workloads: list[Workload], after_finished_s: float | None, after_deactivated_s: float | None,
            now: datetime) -> list[tuple[Workload, str]]:
    out = []
    for wl in workloads:
        if wl.metadata.deletion_timestamp is not None:
            continue
        fin = find_condition(wl.status.conditions, k.WORKLOAD_FINISHED)
        if after_finished_s is not None and fin is not None and fin.status == "True" and fin.last_transition_time:
            if (now - parse_time(fin.last_transition_time)).total_seconds() >= after_finished_s:
                out.append((wl, "AfterFinished"))
            continue
        ev = find_condition(wl.status.conditions, k.WORKLOAD_EVICTED)
        if (after_deactivated_s is not None and wl.spec.active is False and ev is not None and ev.status == "True"
                and deactivated_by_kueue(ev.reason) and ev.last_transition_time
                and (now - parse_time(ev.last_transition_time)).total_seconds() >= after_deactivated_s):
            out.append((wl, "AfterDeactivatedByKueue"))
    return out
