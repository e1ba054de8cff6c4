"""Workload events: keeping quota reservations, queues and pending messages in step with the mirror.

Moves workloads between the book's states (see book.py), accounting reserved quota in the queue
tree and its ClusterQueue/LocalQueue counters, and marking what must be reported.
"""

from __future__ import annotations

import math

import msgspec

from . import check_rules, tas_repair
from .decisions import AdmissionDecision
from .model import Admission, PlacementAnswer, Workload
from .parts import Parts
from .quota import add_usages, remove_usages
from .runtime import ClusterQueueRuntime, LocalQueueRuntime
from .workloads import PendingInfo, ReservedInfo, effective_priority, order_timestamp


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


def _refresh_records(p: Parts, w: Workload) -> None:
    """Same facts, newer version (e.g. the echo of our own pending message): keep everything else."""
    p.book.record(w)
    info = p.book.pending.get(w.key)
    if info is not None:
        info.wl = w
    reserved = p.book.reserved.get(w.key)
    if reserved is not None:
        reserved.wl = w


# --- entry points ----------------------------------------------------------------------------------


def apply_workload(p: Parts, w: Workload) -> None:
    key = w.key
    old = p.book.workloads.get(key)
    if old is not None:
        if old.uid != w.uid:
            delete_workload(p, key)
            old = None
        elif old == w:
            return
        elif _only_version_changed(old, w) and not p.book.assumed(key):
            _refresh_records(p, w)
            return
        else:
            new_rv, old_rv = _rv(w.resource_version), _rv(old.resource_version)
            if new_rv is not None and old_rv is not None and new_rv < old_rv:
                return  # older than what we have: a redelivery
    # Admitted by someone else's write while holding the same quota (the watcher sets it with a MultiKueue
    # check's Ready): the Event and metrics of our checks-ready decision are still ours to give.
    admitted_elsewhere = (old is not None and w.admitted and not old.admitted and old.admission is not None
                          and w.admission is not None and _same_reservation(w.admission, old.admission)
                          and not p.ledger.checks_ready_issued(key))
    p.book.record(w)
    p.ledger.clear_seen(w)
    _sync_reservation(p, w)
    if admitted_elsewhere and (info := p.book.reserved.get(key)) is not None:
        p.ledger.observe_admitted(w, info.cq)
    _sync_pending(p, w)
    check_rules.evaluate(p, w)
    if w.key in p.book.reserved:
        p.book.push_deadline(w)


def delete_workload(p: Parts, key: str) -> None:
    w = p.book.drop_record(key)
    p.placements.forget(key)
    if key in p.book.reserved:
        release_reserved(p, key, notify=True)
    info = p.book.pending.get(key)
    if info is not None:
        _drop_pending(p, key)
        cq = p.tree.cq_for_lq(info.lq_key)
        if cq is not None:
            p.tree.request_requeue(cq.node)  # Kueue requeues on any workload deletion
    p.reporter.forget_pending(key)
    p.ledger.forget_workload(key, w.uid if w is not None else None)


def assume(p: Parts, d: AdmissionDecision) -> None:
    """Reserve the quota of our own admission until the mirror confirms or the shell refutes it."""
    key = d.workload
    w = p.book.workloads.get(key)
    pending = p.book.pending.get(key)
    if w is None or pending is None or w.uid != d.uid:
        raise ValueError(f"cannot assume {key}: not a pending workload with uid {d.uid}")
    _drop_pending(p, key)
    admission = Admission(cluster_queue=d.cluster_queue, pod_sets=d.pod_sets)
    info = ReservedInfo(w, admission, pending.priority, pending.order_ts, p.now, d.admitted, assumed=True)
    add_reserved(p, info)
    p.reporter.forget_pending(key)


def forget(p: Parts, key: str) -> None:
    """The admission was refused: release the assumed quota and queue the workload again."""
    if not p.book.assumed(key):
        return
    release_reserved(p, key, notify=False)
    w = p.book.workloads.get(key)
    if w is not None:
        _sync_pending(p, w)


def forget_eviction(p: Parts, key: str) -> None:
    """The eviction was refused: it may be issued again."""
    if p.ledger.forget_eviction(key):
        info = p.book.reserved.get(key)
        if info is not None:
            p.tree.bump_cq(info.cq)


def admission_applied(p: Parts, key: str, resource_version: str) -> None:
    info = p.book.reserved.get(key)
    if info is not None and info.assumed and resource_version.isdigit():
        info.applied_rv = int(resource_version)
        # The mirror may have shown a newer version before this outcome came (the workload evicted
        # right after the admission landed): it was kept as older than our write; now it is known
        # newer, so it stands (else the assumption would hold the quota until the next record).
        w = p.book.workloads.get(key)
        seen = _rv(w.resource_version) if w is not None else None
        if w is not None and seen is not None and seen > info.applied_rv:
            _sync_reservation(p, w)
            _sync_pending(p, w)


def priority_class_changed(p: Parts, name: str) -> None:
    for info in list(p.book.pending.values()):
        if info.wl.priority is None and info.wl.priority_class == name:
            _sync_pending(p, info.wl, force_relevant=True)
    for r in p.book.reserved.values():
        if r.wl.priority is None and r.wl.priority_class == name:
            r.priority = effective_priority(r.wl, p.tree.priority_classes)
            p.tree.bump_cq(r.cq)


# --- reservations ------------------------------------------------------------------------------------


def _same_reservation(a: Admission, b: Admission) -> bool:
    """The same quota and placements, a delayed topology request's state apart (the watcher marks it
    Ready in the write that admits a MultiKueue workload whose worker placed it)."""
    def bare(adm: Admission) -> Admission:
        return msgspec.structs.replace(adm, pod_sets=tuple(
            msgspec.structs.replace(ps, delayed_topology_request=None) for ps in adm.pod_sets))
    return a == b or bare(a) == bare(b)


def _sync_reservation(p: Parts, w: Workload) -> None:
    key = w.key
    # A deactivated workload keeps its quota until the eviction it gets has stopped its job and
    # released the reservation (Kueue: quota is released only when QuotaReserved turns False).
    holds = w.admission is not None and not w.finished
    info = p.book.reserved.get(key)
    if info is not None and info.assumed and not holds and not w.finished:
        rv = _rv(w.resource_version)
        if info.applied_rv is None or rv is None or rv < info.applied_rv:
            info.wl = w  # an update from before our admission landed; keep the assumption
            return
    if not holds:
        if info is not None:
            release_reserved(p, key, notify=True)
        return
    assert w.admission is not None
    priority = effective_priority(w, p.tree.priority_classes)
    reserved_time = w.quota_reserved_time
    if reserved_time is None:
        reserved_time = info.reserved_time if info is not None else math.inf  # Kueue: "now", the newest
    new = ReservedInfo(
        w, w.admission, priority, order_timestamp(w, p.config.requeuing_timestamp), reserved_time, w.admitted, False
    )
    if info is not None and info.cq == new.cq and info.usage == new.usage:
        _update_in_place(p, info, new)
        return
    if info is not None:
        release_reserved(p, key, notify=not info.assumed)
    add_reserved(p, new)


def _update_in_place(p: Parts, info: ReservedInfo, new: ReservedInfo) -> None:
    changed = (info.evicted, info.admitted, info.priority, info.assumed, info.reserved_time) != (
        new.evicted,
        new.admitted,
        new.priority,
        new.assumed,
        new.reserved_time,
    )
    if info.wl.pods_ready != new.wl.pods_ready:
        _pods_ready_changed(p)
    cq = p.tree.cqs.get(info.cq)
    if cq is not None and cq.workloads.get(info.key) is info and info.admitted != new.admitted:
        sign = 1 if new.admitted else -1
        cq.add_admitted(info, sign)
        lq = _lq_of(p, info, cq)
        if lq is not None:
            lq.admitted += sign
            _add_into(lq.admitted_usage, info.usage, sign)
            p.reporter.mark_lq(lq.key)
        p.reporter.mark_cq(cq.name)
    info.wl = new.wl
    info.admission = new.admission
    info.evicted, info.admitted, info.priority = new.evicted, new.admitted, new.priority
    info.order_ts, info.reserved_time, info.assumed = new.order_ts, new.reserved_time, False
    if changed:
        p.tree.bump_cq(info.cq)


def _add_into(target: dict[tuple[str, str], int], usage: dict[tuple[str, str], int], sign: int) -> None:
    for fr, v in usage.items():
        target[fr] = target.get(fr, 0) + sign * v


def _lq_of(p: Parts, info: ReservedInfo, cq: ClusterQueueRuntime) -> LocalQueueRuntime | None:
    lq = p.tree.lqs.get(info.lq_key)
    return lq if lq is not None and lq.spec.cluster_queue == cq.name else None


def _attach(p: Parts, cq: ClusterQueueRuntime, info: ReservedInfo, count_lq: bool) -> None:
    cq.workloads[info.key] = info
    add_usages(cq.node, info.usage)
    if info.admitted:
        cq.add_admitted(info, 1)
    if count_lq:
        lq = _lq_of(p, info, cq)
        if lq is not None:
            lq.reserving += 1
            _add_into(lq.reserved_usage, info.usage, 1)
            if info.admitted:
                lq.admitted += 1
                _add_into(lq.admitted_usage, info.usage, 1)
            p.reporter.mark_lq(lq.key)
    p.reporter.mark_cq(cq.name)
    p.tree.bump_node(cq.node)


def add_reserved(p: Parts, info: ReservedInfo) -> None:
    p.book.put_reserved(info)
    cq = p.tree.cqs.get(info.cq)
    if cq is None:
        p.book.add_orphan(info.cq, info.key)
        return
    _attach(p, cq, info, count_lq=True)


def _pods_ready_changed(p: Parts) -> None:
    """With blockAdmission, admission anywhere waits on every reserving workload's PodsReady."""
    if p.config.block_admission:
        p.tree.bump_global()
        p.tree.requeue_all()


def release_reserved(p: Parts, key: str, notify: bool) -> None:
    info = p.book.pop_reserved(key)
    if not info.wl.pods_ready:
        _pods_ready_changed(p)
    cq = p.tree.cqs.get(info.cq)
    if cq is None or cq.workloads.get(key) is not info:
        p.book.drop_orphan(info.cq, key)
        return
    del cq.workloads[key]
    remove_usages(cq.node, info.usage)
    if info.admitted:
        cq.add_admitted(info, -1)
    lq = _lq_of(p, info, cq)
    if lq is not None:
        lq.reserving -= 1
        _add_into(lq.reserved_usage, info.usage, -1)
        if info.admitted:
            lq.admitted -= 1
            _add_into(lq.admitted_usage, info.usage, -1)
        p.reporter.mark_lq(lq.key)
    cq.generation += 1  # freed quota may let workloads fit: flavor scans start over
    p.reporter.mark_cq(cq.name)
    p.tree.bump_node(cq.node)
    if notify:
        p.tree.request_requeue(cq.node)


def adopt_orphans(p: Parts, cq: ClusterQueueRuntime) -> None:
    for info in p.book.take_orphans(cq.name):
        _attach(p, cq, info, count_lq=False)


def recount_lq(p: Parts, lq_key: str) -> None:
    lq = p.tree.lqs[lq_key]
    lq.reserving = lq.admitted = 0
    lq.reserved_usage, lq.admitted_usage = {}, {}
    cq = p.tree.cqs.get(lq.spec.cluster_queue)
    if cq is not None:
        for info in cq.workloads.values():
            if info.lq_key == lq_key:
                lq.reserving += 1
                _add_into(lq.reserved_usage, info.usage, 1)
                if info.admitted:
                    lq.admitted += 1
                    _add_into(lq.admitted_usage, info.usage, 1)
    p.reporter.mark_lq(lq_key)


# --- pending workloads -----------------------------------------------------------------------------


def _sync_pending(p: Parts, w: Workload, force_relevant: bool = False) -> None:
    key = w.key
    admissible = w.active and not w.finished and w.admission is None and key not in p.book.reserved
    prev = p.book.pending.get(key)
    if not admissible:
        if prev is not None:
            _drop_pending(p, key)
        return
    priority = effective_priority(w, p.tree.priority_classes)
    info = PendingInfo(w, priority, order_timestamp(w, p.config.requeuing_timestamp))
    relevant = force_relevant or prev is None or prev.priority != priority or _relevant(prev.wl, w)
    if prev is not None:
        if prev.shape == info.shape:
            info.last_assignment = prev.last_assignment  # keep the flavor scan progress
        if prev.lq_key != info.lq_key:
            _drop_pending(p, key)
            relevant = True
    p.book.put_pending(info)
    p.tree.mark_lq(info.lq_key)
    enqueue(p, info, relevant)


def _drop_pending(p: Parts, key: str) -> None:
    info = p.book.pop_pending(key)
    cq = p.tree.cq_for_lq(info.lq_key)
    if cq is not None and cq.queue.delete(key) is not None:
        p.reporter.mark_cq(cq.name)
    p.tree.mark_lq(info.lq_key)


def enqueue(p: Parts, info: PendingInfo, relevant: bool = True) -> None:
    cq = p.tree.cq_for_lq(info.lq_key)
    if cq is None:
        report_blocker(p, info)
        return
    cq.queue.push_or_update(info, p.now, relevant)
    at = info.wl.requeue_at
    if at is not None and p.now < at < math.inf:
        p.book.push_timer(at, info)
    p.reporter.mark_cq(cq.name)
    if not cq.active or p.tree.in_cycle(cq):
        report_blocker(p, info)


def enqueue_lq_workloads(p: Parts, lq_key: str) -> None:
    for info in p.book.pending_of_lq(lq_key):
        enqueue(p, info)


def dequeue_lq_workloads(p: Parts, lq_key: str) -> None:
    cq = p.tree.cq_for_lq(lq_key)
    if cq is None:
        return
    for info in p.book.pending_of_lq(lq_key):
        cq.queue.delete(info.key)
    p.reporter.mark_cq(cq.name)


# --- why a workload cannot even be tried ------------------------------------------------------------


def blocker(p: Parts, info: PendingInfo) -> tuple[str, str] | None:
    queue_name = info.wl.queue_name
    lq = p.tree.lqs.get(info.lq_key)
    if lq is None:
        return "Misconfigured", f"LocalQueue {queue_name} doesn't exist"
    if lq.stopped:
        return "Suspended", f"LocalQueue {queue_name} is stopped"
    cq = p.tree.cqs.get(lq.spec.cluster_queue)
    if cq is None:
        return "Misconfigured", f"ClusterQueue {lq.spec.cluster_queue} doesn't exist"
    if cq.stopped:
        return "Suspended", f"ClusterQueue {cq.name} is stopped"
    if not cq.active or p.tree.in_cycle(cq):
        return "Suspended", f"ClusterQueue {cq.name} is inactive"
    return None


def report_blocker(p: Parts, info: PendingInfo) -> None:
    b = blocker(p, info)
    if b is not None:
        report_pending(p, info.wl, b[0], b[1])


def report_blockers_for_lq(p: Parts, lq_key: str) -> None:
    for info in p.book.pending_of_lq(lq_key):
        report_blocker(p, info)


def report_blockers_for_cq(p: Parts, cq: ClusterQueueRuntime) -> None:
    for lq_key in cq.lqs:
        report_blockers_for_lq(p, lq_key)


def report_pending(p: Parts, w: Workload, reason: str, message: str) -> None:
    p.reporter.report_pending(w, reason, message, p.ids)


# --- stop policies -------------------------------------------------------------------------------------


def drain_cluster_queue(p: Parts, cq: ClusterQueueRuntime) -> None:
    for info in list(cq.workloads.values()):
        check_rules.drain_if_needed(p, info)


def drain_local_queue(p: Parts, lq: LocalQueueRuntime) -> None:
    cq = p.tree.cqs.get(lq.spec.cluster_queue)
    if cq is None:
        return
    for info in list(cq.workloads.values()):
        if info.lq_key == lq.key:
            check_rules.drain_if_needed(p, info)


def apply_placement_answer(p: Parts, a: PlacementAnswer) -> None:
    """The topology solver answered: bring the workload back to its queue's head to act on it."""
    req = p.placements.asked.get(a.workload)
    if not p.placements.accept(a):
        return
    if req is not None and req.repair_node:
        message = tas_repair.on_repair_answer(p, a, req)
        info_r = p.book.reserved.get(a.workload)
        w = p.book.workloads.get(a.workload)
        if message is not None and info_r is not None and w is not None:
            check_rules.issue_eviction(p, w, info_r.cq, tas_repair.NODE_FAILURES, message)
        return
    d = p.placements.provisional.pop(a.workload, None)
    if d is not None:
        if p.book.assumed(a.workload) and a.placed and not a.victims:
            pod_sets = tuple(msgspec.structs.replace(ps, topology_assignment=a.topology.get(ps.name))
                             for ps in d.pod_sets)
            done = msgspec.structs.replace(d, pod_sets=pod_sets)
            info_r = p.book.reserved[a.workload]
            info_r.admission = msgspec.structs.replace(info_r.admission, pod_sets=pod_sets)
            p.placements.consume(a.workload)
            p.placements.complete(done)
            return
        forget(p, a.workload)  # not placed (or only after preemptions): back to its queue with the answer
    info = p.book.pending.get(a.workload)
    if info is None:
        p.placements.forget(a.workload)
        return
    cq = p.tree.cq_for_lq(info.lq_key)
    if cq is None:
        return
    cq.queue.unpark(a.workload, p.now)
    p.tree.bump_cq(cq.name)
