"""Workload events: keeping quota reservations, queues and pending messages in step with the mirror.

A workload is in exactly one of: reserving quota (`state.reserved`, assumed by us or seen with an
admission), admissible and pending (`state.pending`, queued in its ClusterQueue or blocked by a
missing/stopped queue), or neither (finished, inactive).
"""

from __future__ import annotations

import heapq
import math

import msgspec
from typing import TYPE_CHECKING

from . import check_rules
from .decisions import AdmissionDecision, PendingDecision
from .model import Admission, Workload
from .quota import add_usages, remove_usages
from .runtime import ClusterQueueRuntime, LocalQueueRuntime
from .workloads import PendingInfo, ReservedInfo, effective_priority, order_timestamp

if TYPE_CHECKING:
    from .state import SchedulerState


def _rv(v: str) -> int | None:
    return int(v) if v.isdigit() else None


def _relevant(a: Workload, b: Workload) -> bool:
    """Could the change let a parked workload in? (Kueue ClusterQueue.PushOrUpdate)"""
    return (a.pod_sets, a.priority, a.priority_class, a.queue_name, a.evicted_reason, a.evicted_time, a.requeue_at) != (
        b.pod_sets,
        b.priority,
        b.priority_class,
        b.queue_name,
        b.evicted_reason,
        b.evicted_time,
        b.requeue_at,
    )


def _only_version_changed(old: Workload, new: Workload) -> bool:
    return msgspec.structs.replace(old, resource_version=new.resource_version) == new


def _assumed(state: SchedulerState, key: str) -> bool:
    info = state.reserved.get(key)
    return info is not None and info.assumed


def _refresh_records(state: SchedulerState, w: Workload) -> None:
    """Same facts, newer version (e.g. the echo of our own pending message): keep everything else."""
    state.workloads[w.key] = w
    info = state.pending.get(w.key)
    if info is not None:
        info.wl = w
    reserved = state.reserved.get(w.key)
    if reserved is not None:
        reserved.wl = w


# --- entry points ----------------------------------------------------------------------------------


def apply_workload(state: SchedulerState, w: Workload) -> None:
    key = w.key
    old = state.workloads.get(key)
    if old is not None:
        if old.uid != w.uid:
            delete_workload(state, key)
            old = None
        elif old == w:
            return
        elif _only_version_changed(old, w) and not _assumed(state, key):
            _refresh_records(state, w)
            return
        else:
            new_rv, old_rv = _rv(w.resource_version), _rv(old.resource_version)
            if new_rv is not None and old_rv is not None and new_rv < old_rv:
                return  # older than what we have: a redelivery
    state.workloads[key] = w
    _clear_issued(state, w)
    _sync_reservation(state, w)
    _sync_pending(state, w)
    check_rules.evaluate(state, w)


def delete_workload(state: SchedulerState, key: str) -> None:
    w = state.workloads.pop(key, None)
    if key in state.reserved:
        release_reserved(state, key, notify=True)
    info = state.pending.get(key)
    if info is not None:
        _drop_pending(state, key)
        cq = state.cq_for_lq(info.lq_key)
        if cq is not None:
            state.request_requeue(cq.node)  # Kueue requeues on any workload deletion
    state.reported_pending.pop(key, None)
    state.outbox.pending.pop(key, None)
    state.evictions_issued.pop(key, None)
    state.checks_ready_issued.pop(key, None)
    state.deactivations_issued.pop(key, None)
    if w is not None:
        state.forget_counter(w.uid)


def assume(state: SchedulerState, d: AdmissionDecision) -> None:
    """Reserve the quota of our own admission until the mirror confirms or the shell refutes it."""
    key = d.workload
    w = state.workloads.get(key)
    pending = state.pending.get(key)
    if w is None or pending is None or w.uid != d.uid:
        raise ValueError(f"cannot assume {key}: not a pending workload with uid {d.uid}")
    _drop_pending(state, key)
    admission = Admission(cluster_queue=d.cluster_queue, pod_sets=d.pod_sets)
    info = ReservedInfo(w, admission, pending.priority, pending.order_ts, state.now, d.admitted, assumed=True)
    add_reserved(state, info)
    state.reported_pending.pop(key, None)
    state.outbox.pending.pop(key, None)


def forget(state: SchedulerState, key: str) -> None:
    """The admission was refused: release the assumed quota and queue the workload again."""
    info = state.reserved.get(key)
    if info is None or not info.assumed:
        return
    release_reserved(state, key, notify=False)
    w = state.workloads.get(key)
    if w is not None:
        _sync_pending(state, w)


def priority_class_changed(state: SchedulerState, name: str) -> None:
    for info in list(state.pending.values()):
        if info.wl.priority is None and info.wl.priority_class == name:
            _sync_pending(state, info.wl, force_relevant=True)
    for r in state.reserved.values():
        if r.wl.priority is None and r.wl.priority_class == name:
            r.priority = effective_priority(r.wl, state.priority_classes)
            state.bump_cq(r.cq)


# --- reservations ------------------------------------------------------------------------------------


def _clear_issued(state: SchedulerState, w: Workload) -> None:
    key = w.key
    if key in state.evictions_issued and (w.evicted_reason is not None or w.admission is None or not w.active):
        del state.evictions_issued[key]
    if key in state.checks_ready_issued and (w.admitted or w.admission is None):
        del state.checks_ready_issued[key]
    if key in state.deactivations_issued and not w.active:
        del state.deactivations_issued[key]


def _sync_reservation(state: SchedulerState, w: Workload) -> None:
    key = w.key
    holds = w.admission is not None and w.active and not w.finished
    info = state.reserved.get(key)
    if info is not None and info.assumed and not holds and w.active and not w.finished:
        rv = _rv(w.resource_version)
        if info.applied_rv is None or rv is None or rv < info.applied_rv:
            info.wl = w  # an update from before our admission landed; keep the assumption
            return
    if not holds:
        if info is not None:
            release_reserved(state, key, notify=True)
        return
    assert w.admission is not None
    priority = effective_priority(w, state.priority_classes)
    reserved_time = w.quota_reserved_time
    if reserved_time is None:
        reserved_time = info.reserved_time if info is not None else math.inf  # Kueue: "now", the newest
    new = ReservedInfo(
        w, w.admission, priority, order_timestamp(w, state.config.requeuing_timestamp), reserved_time, w.admitted, False
    )
    if info is not None and info.cq == new.cq and info.usage == new.usage:
        _update_in_place(state, info, new)
        return
    if info is not None:
        release_reserved(state, key, notify=not info.assumed)
    add_reserved(state, new)


def _update_in_place(state: SchedulerState, info: ReservedInfo, new: ReservedInfo) -> None:
    changed = (info.evicted, info.admitted, info.priority, info.assumed, info.reserved_time) != (
        new.evicted,
        new.admitted,
        new.priority,
        new.assumed,
        new.reserved_time,
    )
    cq = state.cqs.get(info.cq)
    if cq is not None and cq.workloads.get(info.key) is info and info.admitted != new.admitted:
        sign = 1 if new.admitted else -1
        cq.add_admitted(info, sign)
        lq = _lq_of(state, info, cq)
        if lq is not None:
            lq.admitted += sign
            _add_into(lq.admitted_usage, info.usage, sign)
            state.dirty_lqs[lq.key] = None
        state.dirty_cqs[cq.name] = None
    info.wl = new.wl
    info.admission = new.admission
    info.evicted, info.admitted, info.priority = new.evicted, new.admitted, new.priority
    info.order_ts, info.reserved_time, info.assumed = new.order_ts, new.reserved_time, False
    if changed:
        state.bump_cq(info.cq)


def _add_into(target: dict, usage: dict, sign: int) -> None:
    for fr, v in usage.items():
        target[fr] = target.get(fr, 0) + sign * v


def _lq_of(state: SchedulerState, info: ReservedInfo, cq: ClusterQueueRuntime) -> LocalQueueRuntime | None:
    lq = state.lqs.get(info.lq_key)
    return lq if lq is not None and lq.spec.cluster_queue == cq.name else None


def _attach(state: SchedulerState, cq: ClusterQueueRuntime, info: ReservedInfo, count_lq: bool) -> None:
    cq.workloads[info.key] = info
    add_usages(cq.node, info.usage)
    if info.admitted:
        cq.add_admitted(info, 1)
    if count_lq:
        lq = _lq_of(state, info, cq)
        if lq is not None:
            lq.reserving += 1
            _add_into(lq.reserved_usage, info.usage, 1)
            if info.admitted:
                lq.admitted += 1
                _add_into(lq.admitted_usage, info.usage, 1)
            state.dirty_lqs[lq.key] = None
    state.dirty_cqs[cq.name] = None
    state.bump_node(cq.node)


def add_reserved(state: SchedulerState, info: ReservedInfo) -> None:
    state.reserved[info.key] = info
    cq = state.cqs.get(info.cq)
    if cq is None:
        state.orphans_by_cq.setdefault(info.cq, {})[info.key] = None
        return
    _attach(state, cq, info, count_lq=True)


def release_reserved(state: SchedulerState, key: str, notify: bool) -> None:
    info = state.reserved.pop(key)
    cq = state.cqs.get(info.cq)
    if cq is None or cq.workloads.get(key) is not info:
        orphans = state.orphans_by_cq.get(info.cq)
        if orphans is not None:
            orphans.pop(key, None)
            if not orphans:
                del state.orphans_by_cq[info.cq]
        return
    del cq.workloads[key]
    remove_usages(cq.node, info.usage)
    if info.admitted:
        cq.add_admitted(info, -1)
    lq = _lq_of(state, info, cq)
    if lq is not None:
        lq.reserving -= 1
        _add_into(lq.reserved_usage, info.usage, -1)
        if info.admitted:
            lq.admitted -= 1
            _add_into(lq.admitted_usage, info.usage, -1)
        state.dirty_lqs[lq.key] = None
    cq.generation += 1  # freed quota may let workloads fit: flavor scans start over
    state.dirty_cqs[cq.name] = None
    state.bump_node(cq.node)
    if notify:
        state.request_requeue(cq.node)


def adopt_orphans(state: SchedulerState, cq: ClusterQueueRuntime) -> None:
    for key in state.orphans_by_cq.pop(cq.name, {}):
        _attach(state, cq, state.reserved[key], count_lq=False)


def recount_lq(state: SchedulerState, lq_key: str) -> None:
    lq = state.lqs[lq_key]
    lq.reserving = lq.admitted = 0
    lq.reserved_usage, lq.admitted_usage = {}, {}
    cq = state.cqs.get(lq.spec.cluster_queue)
    if cq is not None:
        for info in cq.workloads.values():
            if info.lq_key == lq_key:
                lq.reserving += 1
                _add_into(lq.reserved_usage, info.usage, 1)
                if info.admitted:
                    lq.admitted += 1
                    _add_into(lq.admitted_usage, info.usage, 1)
    state.dirty_lqs[lq_key] = None


# --- pending workloads -----------------------------------------------------------------------------


def _sync_pending(state: SchedulerState, w: Workload, force_relevant: bool = False) -> None:
    key = w.key
    admissible = w.active and not w.finished and w.admission is None and key not in state.reserved
    prev = state.pending.get(key)
    if not admissible:
        if prev is not None:
            _drop_pending(state, key)
        return
    priority = effective_priority(w, state.priority_classes)
    info = PendingInfo(w, priority, order_timestamp(w, state.config.requeuing_timestamp))
    relevant = force_relevant or prev is None or prev.priority != priority or _relevant(prev.wl, w)
    if prev is not None:
        if prev.shape == info.shape:
            info.last_assignment = prev.last_assignment  # keep the flavor scan progress
        if prev.lq_key != info.lq_key:
            _drop_pending(state, key)
            relevant = True
    state.pending[key] = info
    state.pending_by_lq.setdefault(info.lq_key, {})[key] = None
    state.mark_lq(info.lq_key)
    enqueue(state, info, relevant)


def _drop_pending(state: SchedulerState, key: str) -> None:
    info = state.pending.pop(key)
    cq = state.cq_for_lq(info.lq_key)
    if cq is not None and cq.queue.delete(key) is not None:
        state.dirty_cqs[cq.name] = None
    by = state.pending_by_lq.get(info.lq_key)
    if by is not None:
        by.pop(key, None)
        if not by:
            del state.pending_by_lq[info.lq_key]
    state.mark_lq(info.lq_key)


def enqueue(state: SchedulerState, info: PendingInfo, relevant: bool = True) -> None:
    cq = state.cq_for_lq(info.lq_key)
    if cq is None:
        report_blocker(state, info)
        return
    cq.queue.push_or_update(info, state.now, relevant)
    at = info.wl.requeue_at
    if at is not None and state.now < at < math.inf:
        heapq.heappush(state.timers, (at, info.key, info.uid))
    state.dirty_cqs[cq.name] = None
    if not cq.active or state.in_cycle(cq):
        report_blocker(state, info)


def enqueue_lq_workloads(state: SchedulerState, lq_key: str) -> None:
    for key in list(state.pending_by_lq.get(lq_key, ())):
        enqueue(state, state.pending[key])


def dequeue_lq_workloads(state: SchedulerState, lq_key: str) -> None:
    cq = state.cq_for_lq(lq_key)
    if cq is None:
        return
    for key in state.pending_by_lq.get(lq_key, ()):
        cq.queue.delete(key)
    state.dirty_cqs[cq.name] = None


# --- why a workload cannot even be tried ------------------------------------------------------------


def blocker(state: SchedulerState, info: PendingInfo) -> tuple[str, str] | None:
    queue_name = info.wl.queue_name
    lq = state.lqs.get(info.lq_key)
    if lq is None:
        return "Misconfigured", f"LocalQueue {queue_name} doesn't exist"
    if lq.stopped:
        return "Suspended", f"LocalQueue {queue_name} is stopped"
    cq = state.cqs.get(lq.spec.cluster_queue)
    if cq is None:
        return "Misconfigured", f"ClusterQueue {lq.spec.cluster_queue} doesn't exist"
    if cq.stopped:
        return "Suspended", f"ClusterQueue {cq.name} is stopped"
    if not cq.active or state.in_cycle(cq):
        return "Suspended", f"ClusterQueue {cq.name} is inactive"
    return None


def report_blocker(state: SchedulerState, info: PendingInfo) -> None:
    b = blocker(state, info)
    if b is not None:
        report_pending(state, info.wl, b[0], b[1])


def report_blockers_for_lq(state: SchedulerState, lq_key: str) -> None:
    for key in state.pending_by_lq.get(lq_key, ()):
        report_blocker(state, state.pending[key])


def report_blockers_for_cq(state: SchedulerState, cq: ClusterQueueRuntime) -> None:
    for lq_key in cq.lqs:
        report_blockers_for_lq(state, lq_key)


def report_pending(state: SchedulerState, w: Workload, reason: str, message: str) -> None:
    key = w.key
    if state.reported_pending.get(key) == (reason, message):
        return
    state.reported_pending[key] = (reason, message)
    state.outbox.pending[key] = PendingDecision(
        id=state.decision_id("pending", w.uid, w.resource_version),
        workload=key,
        uid=w.uid,
        reason=reason,
        message=message,
    )


# --- stop policies -------------------------------------------------------------------------------------


def drain_cluster_queue(state: SchedulerState, cq: ClusterQueueRuntime) -> None:
    for info in list(cq.workloads.values()):
        check_rules.drain_if_needed(state, info)


def drain_local_queue(state: SchedulerState, lq: LocalQueueRuntime) -> None:
    cq = state.cqs.get(lq.spec.cluster_queue)
    if cq is None:
        return
    for info in list(cq.workloads.values()):
        if info.lq_key == lq.key:
            check_rules.drain_if_needed(state, info)
