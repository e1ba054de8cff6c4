"""The Kubernetes Events the scheduler's decisions call for, as RecordEvent commands. Pure.

Kueue's reasons and messages (pkg/scheduler/scheduler.go, preemption/preemption.go,
controller/core/workload_controller.go): QuotaReserved and Admitted (Normal) on an admitted
workload, Pending (Warning) with why, Preempted on the victim and PreemptedWorkload on the
preemptor, Evicted, AdmissionCheckRejected (Warning) on a deactivated workload. The watcher
aggregates repeats and rate-limits per object (services/watcher/core/events.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Literal

from kq.api.constants import KUEUE_GROUP, KUEUE_VERSION
from kq.api.events import ObjectReference
from kq.messages import RecordEvent, SetWorkloadPending, command_subject_of
from services.admission.core.decisions import CycleResult
from services.admission.core.state import SchedulerState
from services.admission.plan.metrics import queued_since
from services.admission.plan.outputs import WRITER, Outgoing, Outputs, rfc3339

API_VERSION = f"{KUEUE_GROUP}/{KUEUE_VERSION}"


class _Events:
    def __init__(self, cluster: str, epoch: int, now: float, writer: str) -> None:
        self.cluster, self.epoch, self.at, self.writer = cluster, epoch, rfc3339(now), writer
        self.out: list[Outgoing] = []

    def add(self, decision: str, workload: str, uid: str, type_: Literal["Normal", "Warning"], reason: str,
            message: str) -> None:
        ns, _, name = workload.partition("/")
        cmd = RecordEvent(id=f"event|e{self.epoch}|{self.cluster}|{workload}|{decision}|{reason}", cluster=self.cluster,
                          writer=self.writer, epoch=self.epoch,
                          involved=ObjectReference(api_version=API_VERSION, kind="Workload", namespace=ns, name=name,
                                                   uid=uid),
                          event_type=type_, reason=reason, action=reason, message=message, at=self.at)
        self.out.append(Outgoing(command_subject_of(cmd), cmd, cmd.id))


def pending_written(outputs: Outputs) -> set[str]:
    """Workloads whose pending condition goes out in these outputs (the pacer holds the others back;
    their Pending event goes with the condition, as Kueue emits it with the status update)."""
    return {f"{o.message.namespace}/{o.message.name}" for o in outputs.commands
            if isinstance(o.message, SetWorkloadPending)}


def record_events(results: Iterable[CycleResult], state: SchedulerState, cluster: str, epoch: int,
                  now: float, pending: Collection[str], writer: str = WRITER) -> list[Outgoing]:
    """The events of these cycles' decisions; Pending only for the workloads in `pending`."""
    ev = _Events(cluster, epoch, now, writer)
    for r in results:
        for a in r.admissions:
            wl = state.workloads.get(a.workload)
            wait = 0.0 if wl is None else max(0.0, now - queued_since(wl))
            ev.add(a.id, a.workload, a.uid, "Normal", "QuotaReserved",
                   f"Quota reserved in ClusterQueue {a.cluster_queue}, wait time since queued was {wait:.0f}s")
            if a.admitted:
                ev.add(a.id, a.workload, a.uid, "Normal", "Admitted",
                       f"Admitted by ClusterQueue {a.cluster_queue}, wait time since reservation was 0s")
        for c in r.checks_ready:
            wl = state.workloads.get(c.workload)
            since = wl.quota_reserved_time if wl is not None else None
            wait = 0.0 if since is None else max(0.0, now - since)
            ev.add(c.id, c.workload, c.uid, "Normal", "Admitted",
                   f"Admitted by ClusterQueue {c.cluster_queue}, wait time since reservation was {wait:.0f}s")
        for p in r.preemptions:
            ev.add(p.id, p.victim, p.victim_uid, "Normal", "Preempted", p.message)
            ev.add(p.id, p.preemptor, p.preemptor_uid, "Normal", "PreemptedWorkload",
                   f"Preempted workload {p.victim} (UID: {p.victim_uid}) in ClusterQueue {p.victim_cluster_queue}")
        for e in r.evictions:
            ev.add(e.id, e.workload, e.uid, "Normal", "Evicted", e.message)
        for x in r.deactivations:
            ev.add(x.id, x.workload, x.uid, "Warning", "AdmissionCheckRejected", f"Deactivated due to {x.message}")
        for q in r.pending:
            if q.workload in pending:
                ev.add(q.id, q.workload, q.uid, "Warning", "Pending", q.message)
    return ev.out
