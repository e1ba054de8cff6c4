"""Events about queues and the objects they refer to: the tree changes, then its workloads follow.

Each handler changes the queue tree first, then moves workloads (workload_sync) as the change
requires: a new ClusterQueue adopts its orphans and LocalQueues' workloads, a stopped one is
drained, a queue that turns inactive reports why its workloads cannot be tried.
"""

from __future__ import annotations

from . import workload_sync as ws
from .model import AdmissionCheck, ClusterQueue, Deleted, LocalQueue, Namespace, ResourceFlavor, WorkloadPriorityClass
from .parts import Parts
from .runtime import ClusterQueueRuntime


def refresh_active(p: Parts, cq: ClusterQueueRuntime) -> None:
    """Recompute the Active condition; on a change, refresh pending messages of its workloads."""
    if p.tree.refresh_active(cq):
        ws.report_blockers_for_cq(p, cq)


def apply_cluster_queue(p: Parts, spec: ClusterQueue) -> None:
    tree = p.tree
    cq = tree.cqs.get(spec.name)
    created = cq is None
    old_drain = "None"
    if cq is None:
        cq = ClusterQueueRuntime(spec)
        tree.add_cq(cq)
    elif cq.spec == spec:
        # The echo of a status write (or a label change): nothing the scheduler reads changed. Not
        # a rebuild of the cohort tree, with every queue in it marked to report and tried again.
        return
    else:
        old_drain = cq.spec.stop_policy
        cq.configure(spec)
    tree.link_cq(cq, spec.cohort)
    if created:
        ws.adopt_orphans(p, cq)
        for lq_key in list(tree.lqs_by_cq.get(spec.name, ())):
            cq.lqs[lq_key] = None
            ws.recount_lq(p, lq_key)
    tree.rebuild(cq.node)
    refresh_active(p, cq)
    if created:
        for lq_key in list(cq.lqs):
            ws.enqueue_lq_workloads(p, lq_key)
    if spec.stop_policy == "HoldAndDrain" and (created or old_drain != "HoldAndDrain"):
        ws.drain_cluster_queue(p, cq)
    tree.mark_cq_and_lqs(cq)


def _delete_cluster_queue(p: Parts, name: str) -> None:
    cq = p.tree.cqs.get(name)
    if cq is None:
        return
    queued = cq.queue.clear()
    p.book.orphan_all(name, list(cq.workloads))
    cq.workloads.clear()
    p.tree.unlink_cq(cq)
    for info in queued:
        ws.report_blocker(p, info)


def apply_local_queue(p: Parts, spec: LocalQueue) -> None:
    key = f"{spec.namespace}/{spec.name}"
    old = p.tree.lqs.get(key)
    if old is not None:
        if old.spec == spec:
            return
        ws.dequeue_lq_workloads(p, key)
        p.tree.unregister_lq(key, old.spec.cluster_queue)
        drain_now = spec.stop_policy == "HoldAndDrain" and old.spec.stop_policy != "HoldAndDrain"
    else:
        drain_now = spec.stop_policy == "HoldAndDrain"
    lq = p.tree.register_lq(spec)
    ws.recount_lq(p, key)
    ws.enqueue_lq_workloads(p, key)
    if drain_now:
        ws.drain_local_queue(p, lq)
    p.reporter.mark_lq(key)


def _delete_local_queue(p: Parts, key: str) -> None:
    old = p.tree.lqs.get(key)
    if old is None:
        return
    ws.dequeue_lq_workloads(p, key)
    p.tree.unregister_lq(key, old.spec.cluster_queue)
    del p.tree.lqs[key]
    p.reporter.forget_lq(key)
    ws.report_blockers_for_lq(p, key)


def _flavor_changed(p: Parts, name: str) -> None:
    p.tree.bump_global()
    for cq in p.tree.cqs.values():
        if name in cq.flavor_names:
            refresh_active(p, cq)
            p.tree.request_requeue(cq.node)


def _check_changed(p: Parts, name: str) -> None:
    p.tree.bump_global()
    for cq in p.tree.cqs.values():
        if name in cq.checks:
            refresh_active(p, cq)
            p.tree.request_requeue(cq.node)


def _namespaces_changed(p: Parts) -> None:
    p.tree.bump_global()
    p.tree.requeue_all()


def apply_flavor(p: Parts, event: ResourceFlavor) -> None:
    p.tree.flavors[event.name] = event
    _flavor_changed(p, event.name)


def apply_topology(p: Parts, name: str, exists: bool) -> None:
    """A TAS flavor's Topology appeared or went: the queues using such a flavor may flip Active."""
    if (name in p.tree.topologies) == exists:
        return
    if exists:
        p.tree.topologies.add(name)
    else:
        p.tree.topologies.discard(name)
    for flavor in [f.name for f in p.tree.flavors.values() if f.topology_name == name]:
        _flavor_changed(p, flavor)


def apply_namespace(p: Parts, event: Namespace) -> None:
    p.tree.namespaces[event.name] = dict(event.labels)
    _namespaces_changed(p)


def apply_priority_class(p: Parts, event: WorkloadPriorityClass) -> None:
    p.tree.priority_classes[event.name] = event.value
    ws.priority_class_changed(p, event.name)


def apply_admission_check(p: Parts, event: AdmissionCheck) -> None:
    p.tree.admission_checks[event.name] = event
    _check_changed(p, event.name)


def apply_deleted(p: Parts, d: Deleted) -> None:
    tree = p.tree
    match d.kind:
        case "Workload":
            ws.delete_workload(p, f"{d.namespace}/{d.name}")
        case "ClusterQueue":
            _delete_cluster_queue(p, d.name)
        case "Cohort":
            tree.delete_cohort(d.name)
        case "LocalQueue":
            _delete_local_queue(p, f"{d.namespace}/{d.name}")
        case "ResourceFlavor":
            if tree.flavors.pop(d.name, None) is not None:
                _flavor_changed(p, d.name)
        case "Namespace":
            if tree.namespaces.pop(d.name, None) is not None:
                _namespaces_changed(p)
        case "WorkloadPriorityClass":
            if tree.priority_classes.pop(d.name, None) is not None:
                ws.priority_class_changed(p, d.name)
        case "AdmissionCheck":
            if tree.admission_checks.pop(d.name, None) is not None:
                _check_changed(p, d.name)
        case "Topology":
            apply_topology(p, d.name, exists=False)
