"""What `kq get` shows for each kind: its columns, from the typed objects (kq.api Structs).

The columns follow Kueue's printer columns (and kubectl's for core kinds); workloads
get a STATE column that sums up their conditions. Pure: `now` is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from kq.api import constants as c
from kq.api.meta import Condition, find_condition
from kq.cli.tables import NONE, Table, age, between, with_namespace

# Workload states, in the order they win when several conditions hold.
FINISHED, DEACTIVATED, EVICTED, ADMITTED, QUOTA_RESERVED, PENDING = (
    "Finished", "Deactivated", "Evicted", "Admitted", "QuotaReserved", "Pending")


def _status(conditions: Sequence[Any], type_: str) -> str:
    cond = next((x for x in conditions if x.type == type_), None)
    return cond.status if cond is not None else ""


def _true(conditions: Sequence[Any], type_: str) -> bool:
    return _status(conditions, type_) == "True"


def workload_state(wl: Any) -> str:
    """One word for where a workload is: Finished > Deactivated > Evicted > Admitted > QuotaReserved > Pending."""
    conds = wl.status.conditions
    if _true(conds, c.WORKLOAD_FINISHED):
        return FINISHED
    if wl.spec.active is False:
        return DEACTIVATED
    if _true(conds, c.WORKLOAD_EVICTED):
        return EVICTED
    if _true(conds, c.WORKLOAD_ADMITTED):
        return ADMITTED
    if _true(conds, c.WORKLOAD_QUOTA_RESERVED):
        return QUOTA_RESERVED
    return PENDING


def workload_reason(wl: Any) -> Condition | None:
    """The condition that explains the current state: why it is pending, or how it was admitted."""
    conds = wl.status.conditions
    state = workload_state(wl)
    order = {
        FINISHED: (c.WORKLOAD_FINISHED,),
        DEACTIVATED: (c.WORKLOAD_EVICTED, c.WORKLOAD_DEACTIVATION_TARGET),
        EVICTED: (c.WORKLOAD_EVICTED, c.WORKLOAD_PREEMPTED),
        ADMITTED: (c.WORKLOAD_ADMITTED,),
        QUOTA_RESERVED: (c.WORKLOAD_ADMITTED, c.WORKLOAD_QUOTA_RESERVED),
        PENDING: (c.WORKLOAD_QUOTA_RESERVED, c.WORKLOAD_REQUEUED),
    }[state]
    for type_ in order:
        cond = find_condition(conds, type_)
        if cond is not None:
            return cond
    return None


def _workloads(objs: Sequence[Any], now: datetime) -> Table:
    rows = []
    for wl in objs:
        conds = wl.status.conditions
        adm = wl.status.admission
        rows.append((wl.metadata.name, wl.spec.queue_name, adm.cluster_queue if adm else "",
                     _status(conds, c.WORKLOAD_ADMITTED), _status(conds, c.WORKLOAD_FINISHED),
                     workload_state(wl), age(wl.metadata.creation_timestamp, now)))
    return Table(("NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "STATE", "AGE"), rows)


def _cluster_queues(objs: Sequence[Any], now: datetime) -> Table:
    rows = [(cq.metadata.name, cq.spec.cohort_name, str(cq.status.pending_workloads),
             str(cq.status.admitted_workloads), age(cq.metadata.creation_timestamp, now)) for cq in objs]
    return Table(("NAME", "COHORT", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "AGE"), rows)


def _local_queues(objs: Sequence[Any], now: datetime) -> Table:
    rows = [(lq.metadata.name, lq.spec.cluster_queue, str(lq.status.pending_workloads),
             str(lq.status.admitted_workloads), age(lq.metadata.creation_timestamp, now)) for lq in objs]
    return Table(("NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "AGE"), rows)


def _cohorts(objs: Sequence[Any], now: datetime) -> Table:
    rows = [(x.metadata.name, x.spec.parent_name, age(x.metadata.creation_timestamp, now)) for x in objs]
    return Table(("NAME", "PARENT", "AGE"), rows)


def _priority_classes(objs: Sequence[Any], now: datetime) -> Table:
    rows = [(x.metadata.name, str(x.value), age(x.metadata.creation_timestamp, now)) for x in objs]
    return Table(("NAME", "VALUE", "AGE"), rows)


def _multikueue_clusters(objs: Sequence[Any], now: datetime) -> Table:
    rows = [(x.metadata.name, _status(x.status.conditions, c.ACTIVE), age(x.metadata.creation_timestamp, now))
            for x in objs]
    return Table(("NAME", "CONNECTED", "AGE"), rows)


def job_status(job: Any) -> str:
    conds = job.status.conditions
    for type_, shown in (("Complete", "Complete"), ("Failed", "Failed"), ("FailureTarget", "Failing"),
                         ("SuccessCriteriaMet", "Completing"), ("Suspended", "Suspended")):
        if _true(conds, type_):
            return shown
    if job.spec.suspend:
        return "Suspended"
    return "Running"


def _jobs(objs: Sequence[Any], now: datetime) -> Table:
    rows = []
    for job in objs:
        completions = job.spec.completions if job.spec.completions is not None else 1
        rows.append((job.metadata.name, job_status(job), f"{job.status.succeeded}/{completions}",
                     between(job.status.start_time, job.status.completion_time, now),
                     age(job.metadata.creation_timestamp, now)))
    return Table(("NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"), rows)


def pod_status(pod: Any) -> str:
    if pod.metadata.deletion_timestamp:
        return "Terminating"
    if pod.status.phase in ("", "Pending") and pod.spec.scheduling_gates:
        return "SchedulingGated"
    if pod.status.reason:
        return pod.status.reason
    return pod.status.phase or "Pending"


def _pods(objs: Sequence[Any], now: datetime) -> Table:
    rows = []
    for pod in objs:
        total = len(pod.spec.containers)
        ready = total if _true(pod.status.conditions, "Ready") else 0
        rows.append((pod.metadata.name, f"{ready}/{total}", pod_status(pod), "0", pod.spec.node_name or NONE,
                     age(pod.metadata.creation_timestamp, now)))
    return Table(("NAME", "READY", "STATUS", "RESTARTS", "NODE", "AGE"), rows)


def _nodes(objs: Sequence[Any], now: datetime) -> Table:
    rows = []
    for node in objs:
        ready = _status(node.status.conditions, "Ready")
        status = "Ready" if ready == "True" else ("NotReady" if ready else "Unknown")
        if node.spec.unschedulable:
            status += ",SchedulingDisabled"
        prefix = "node-role.kubernetes.io/"
        roles = ",".join(sorted(k[len(prefix):] for k in node.metadata.labels if k.startswith(prefix))) or NONE
        alloc = node.status.allocatable
        rows.append((node.metadata.name, status, roles, str(alloc.get("cpu", "")), str(alloc.get("memory", "")),
                     age(node.metadata.creation_timestamp, now)))
    return Table(("NAME", "STATUS", "ROLES", "CPU", "MEMORY", "AGE"), rows)


def _namespaces(objs: Sequence[Any], now: datetime) -> Table:
    rows = [(x.metadata.name, x.status.phase or "Active", age(x.metadata.creation_timestamp, now)) for x in objs]
    return Table(("NAME", "STATUS", "AGE"), rows)


def _generic(objs: Sequence[Any], now: datetime) -> Table:
    return Table(("NAME", "AGE"), [(x.metadata.name, age(x.metadata.creation_timestamp, now)) for x in objs])


_VIEWS: dict[str, Callable[[Sequence[Any], datetime], Table]] = {
    "workload": _workloads,
    "clusterqueue": _cluster_queues,
    "localqueue": _local_queues,
    "cohort": _cohorts,
    "workloadpriorityclass": _priority_classes,
    "multikueuecluster": _multikueue_clusters,
    "job": _jobs,
    "pod": _pods,
    "node": _nodes,
    "namespace": _namespaces,
}


def _labels(obj: Any) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(obj.metadata.labels.items())) or NONE


def _workload_wide(wl: Any) -> tuple[str, ...]:
    why = workload_reason(wl)
    return (str(wl.spec.priority) if wl.spec.priority is not None else NONE, why.reason if why else NONE)


# `-o wide`: the columns Kueue prints at priority 1 and a few more, after the others (as kubectl does).
_WIDE: dict[str, tuple[tuple[str, ...], Callable[[Any], tuple[str, ...]]]] = {
    "workload": (("PRIORITY", "REASON"), _workload_wide),
    "clusterqueue": (("STRATEGY", "RESERVING WORKLOADS", "STOP POLICY"), lambda cq: (
        cq.spec.queueing_strategy, str(cq.status.reserving_workloads), cq.spec.stop_policy)),
    "localqueue": (("RESERVING WORKLOADS", "STOP POLICY"), lambda lq: (
        str(lq.status.reserving_workloads), lq.spec.stop_policy)),
    "pod": (("LABELS",), lambda pod: (_labels(pod),)),
}


def _widen(kind: str, table: Table, objs: Sequence[Any]) -> Table:
    headers, extra = _WIDE.get(kind, (("LABELS",), lambda o: (_labels(o),)))
    return Table((*table.headers, *headers), [(*row, *extra(o)) for row, o in zip(table.rows, objs, strict=True)])


def table_for(kind: str, objs: Sequence[Any], now: datetime, *, all_namespaces: bool = False,
              wide: bool = False) -> Table:
    """The table `kq get <kind>` prints; `kind` is the lower-case kind token ("workload")."""
    table = _VIEWS.get(kind, _generic)(objs, now)
    if wide:
        table = _widen(kind, table, objs)
    if all_namespaces:
        table = with_namespace(table, [o.metadata.namespace for o in objs])
    return table
