"""The Kubernetes Events the scheduler's decisions call for. Pure.

Each event rides on the command of the decision it reports (kq.messages.EventNote on
AdmitWorkload, EvictWorkload, DeactivateWorkload, SetWorkloadPending): the watcher records it once
that command's write is done. An event with no command of its own workload in the batch
(PreemptedWorkload on the preemptor) goes as a RecordEvent command.

Kueue's reasons and messages (pkg/scheduler/scheduler.go, preemption/preemption.go,
controller/core/workload_controller.go): QuotaReserved and Admitted (Normal) on an admitted
workload, Pending (Warning) with why, Preempted on the victim and PreemptedWorkload on the
preemptor, Evicted, AdmissionCheckRejected (Warning) on a deactivated workload. The watcher
aggregates repeats and rate-limits per object (services/watcher/core/events.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Literal

import msgspec

from kq.api.constants import KUEUE_GROUP, KUEUE_VERSION
from kq.api.events import ObjectReference
from kq.messages import EventNote, RecordEvent, command_subject_of
from services.admission.core.decisions import CycleResult
from services.admission.core.state import SchedulerState
from services.admission.plan.metrics import queued_since
from services.admission.plan.outputs import WRITER, Action, Outgoing, command_id, rfc3339

API_VERSION = f"{KUEUE_GROUP}/{KUEUE_VERSION}"


class _Events:
    def __init__(self, cluster: str, epoch: int, now: float, writer: str) -> None:
        self.cluster, self.epoch, self.at, self.writer = cluster, epoch, rfc3339(now), writer
        self.out: list[Outgoing] = []
        self.notes: dict[str, list[EventNote]] = {}  # command id -> the events riding on it
        self.carriers: Collection[str] = ()  # ids of the commands going out in this batch

    def add(self, decision: str, workload: str, uid: str, type_: Literal["Normal", "Warning"], reason: str,
            message: str, carrier: tuple[Action, str] | None = None, only_with_carrier: bool = False) -> None:
        """`carrier`: (action, decision id) of the command this event reports, when it has one;
        `only_with_carrier`: no event at all when that command does not go out."""
        if carrier is not None:
            cid = command_id(carrier[0], self.epoch, self.cluster, workload, carrier[1])
            if cid in self.carriers:
                self.notes.setdefault(cid, []).append(EventNote(event_type=type_, reason=reason, message=message,
                                                                at=self.at))
                return
        if only_with_carrier:
            return
        ns, _, name = workload.partition("/")
        cmd = RecordEvent(id=f"event|e{self.epoch}|{self.cluster}|{workload}|{decision}|{reason}", cluster=self.cluster,
                          writer=self.writer, epoch=self.epoch,
                          involved=ObjectReference(api_version=API_VERSION, kind="Workload", namespace=ns, name=name,
                                                   uid=uid),
                          event_type=type_, reason=reason, action=reason, message=message, at=self.at)
        self.out.append(Outgoing(command_subject_of(cmd), cmd, cmd.id))


def with_events(commands: list[Outgoing], results: Iterable[CycleResult], state: SchedulerState, cluster: str,
                epoch: int, now: float, writer: str = WRITER) -> list[Outgoing]:
    """The commands, each carrying the events of its decision, then RecordEvent commands for the
    events that have no command to ride on. Pending events only where a pending write goes out."""
    ev = _events(results, state, cluster, epoch, now, {o.msg_id for o in commands}, writer)
    out = [o._replace(message=msgspec.structs.replace(o.message, events=tuple(ev.notes[o.msg_id])))
           if o.msg_id in ev.notes else o for o in commands]
    return out + ev.out


def _events(results: Iterable[CycleResult], state: SchedulerState, cluster: str, epoch: int, now: float,
            carriers: Collection[str], writer: str = WRITER) -> _Events:
    ev = _Events(cluster, epoch, now, writer)
    ev.carriers = carriers
    for r in results:
        for a in r.admissions:
            wl = state.workloads.get(a.workload)
            wait = 0.0 if wl is None else max(0.0, now - queued_since(wl))
            ev.add(a.id, a.workload, a.uid, "Normal", "QuotaReserved",
                   f"Quota reserved in ClusterQueue {a.cluster_queue}, wait time since queued was {wait:.0f}s",
                   ("reserve", a.id))
            if a.admitted:
                ev.add(a.id, a.workload, a.uid, "Normal", "Admitted",
                       f"Admitted by ClusterQueue {a.cluster_queue}, wait time since reservation was 0s",
                       ("reserve", a.id))
        for c in r.checks_ready:
            wl = state.workloads.get(c.workload)
            since = wl.quota_reserved_time if wl is not None else None
            wait = 0.0 if since is None else max(0.0, now - since)
            ev.add(c.id, c.workload, c.uid, "Normal", "Admitted",
                   f"Admitted by ClusterQueue {c.cluster_queue}, wait time since reservation was {wait:.0f}s",
                   ("admit", c.id))
        for p in r.preemptions:
            ev.add(p.id, p.victim, p.victim_uid, "Normal", "Preempted", p.message, ("evict", p.id))
            ev.add(p.id, p.preemptor, p.preemptor_uid, "Normal", "PreemptedWorkload",
                   f"Preempted workload {p.victim} (UID: {p.victim_uid}) in ClusterQueue {p.victim_cluster_queue}")
        for e in r.evictions:
            ev.add(e.id, e.workload, e.uid, "Normal", "Evicted", e.message, ("evict", e.id))
        for x in r.deactivations:
            ev.add(x.id, x.workload, x.uid, "Warning", "AdmissionCheckRejected", f"Deactivated due to {x.message}",
                   ("deactivate", x.id))
        for q in r.pending:  # as Kueue: with the pending condition's write (not one superseded or held back)
            ev.add(q.id, q.workload, q.uid, "Warning", "Pending", q.message, ("pending", q.id), only_with_carrier=True)
    return ev
