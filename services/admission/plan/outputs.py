"""CycleResult -> bus commands (kq.messages) and decision events, with deterministic ids. Pure.

Command ids are unique and deterministic (they are also the Nats-Msg-Id, deduplicated by
JetStream):   <action>|e<epoch>|<cluster>|<target>|<decision id>
The epoch is part of the id: a new leader may take the same decision again (its core
counts decisions from scratch) and must not be dropped by JetStream's duplicate window.
An event's id is "evt|" + the same parts. Nothing reads meaning back out of an id: an
outcome says which command it is about in typed fields (kq.messages.CommandOutcome).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Literal, NamedTuple

import msgspec

from kq import subjects
from kq.api import kueue as api
from kq.api.meta import Condition, format_time
from kq.messages import (
    AdmitWorkload,
    Command,
    DeactivateWorkload,
    Decision,
    EvictWorkload,
    Fence,
    SetClusterQueueStatus,
    SetLocalQueueStatus,
    SetWorkloadPending,
    WorkloadAdmittedEvent,
    WorkloadEvictedEvent,
    WorkloadPendingEvent,
    WorkloadPreemptedEvent,
    command_subject_of,
)
from kq.quantity import format_quantity as _format_quantity
from services.admission.core.decisions import (
    ClusterQueueStatus,
    CycleResult,
    FlavorUsage,
    LocalQueueStatus,
)
from services.admission.core.model import PodSetAssignment

WRITER = "admission"
# Kueue (default feature gates) writes this condition reason on a pending workload; the granular
# reason goes to the decision event.
PENDING_CONDITION_REASON = "Pending"
ACTIVE = "Active"
MAX_WEIGHTED_SHARE = 2**63 - 1  # Kueue's value for a zero-weight queue that borrows

# What an outcome of a command means to the core (see Partition.on_outcome).
Action = Literal["reserve", "admit", "evict", "deactivate", "pending", "cqstatus", "lqstatus", "fence"]
WORKLOAD_ACTIONS: frozenset[Action] = frozenset({"reserve", "admit", "evict", "deactivate", "pending"})


class Outgoing(NamedTuple):
    subject: str
    message: msgspec.Struct
    msg_id: str
    headers: Mapping[str, str] | None = None  # e.g. the trace this decision belongs to (services/admission/tracing.py)


class Sent(NamedTuple):
    """A command in flight: what to tell the core when its outcome comes back."""

    action: Action
    target: str  # workload key ns/name, or the queue's name / ns/name


class QueueFacts(NamedTuple):
    """What the mirror last showed of a queue: its generation and Active condition."""

    generation: int
    active: Condition | None


class Outputs(NamedTuple):
    commands: list[Outgoing]
    events: list[Outgoing]
    sent: dict[str, Sent]  # command id -> what it was for


# --- ids ---------------------------------------------------------------------------------------------


def command_id(action: Action, epoch: int, cluster: str, target: str, decision: str) -> str:
    return f"{action}|e{epoch}|{cluster}|{target}|{decision}"


def fence_command(cluster: str, epoch: int, writer: str = WRITER, decision: str = "fence") -> Outgoing:
    cmd = Fence(id=command_id("fence", epoch, cluster, "-", decision), cluster=cluster, writer=writer, epoch=epoch)
    return Outgoing(command_subject_of(cmd), cmd, cmd.id)


# --- conversions -------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def format_quantity(milli: int, resource: str) -> str:
    """Kueue's formatting of a quantity; cached: the same few values recur in every status."""
    return _format_quantity(milli, resource)


def rfc3339(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def api_admission(cluster_queue: str, pod_sets: tuple[PodSetAssignment, ...]) -> api.Admission:
    """The core's admission as status.admission, quantities formatted the way Kueue writes them."""
    return api.Admission(
        cluster_queue=cluster_queue,
        pod_set_assignments=tuple(
            api.PodSetAssignment(
                name=p.name,
                flavors=dict(p.flavors),
                resource_usage={r: format_quantity(v, r) for r, v in sorted(p.resource_usage.items())},
                count=p.count,
                topology_assignment=p.topology_assignment,
                delayed_topology_request=p.delayed_topology_request,
            )
            for p in pod_sets
        ),
    )


def _active(facts: QueueFacts | None, active: bool, reason: str, message: str, now: float) -> Condition:
    status: Literal["True", "False"] = "True" if active else "False"
    prev = facts.active if facts is not None else None
    # lastTransitionTime moves only when the status flips (meta.SetStatusCondition).
    ltt = prev.last_transition_time if prev is not None and prev.status == status else None
    return Condition(
        type=ACTIVE,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=ltt or format_time(datetime.fromtimestamp(now, UTC)),
        observed_generation=facts.generation if facts is not None else None,
    )


def _cq_usage(usage: tuple[FlavorUsage, ...]) -> tuple[api.FlavorUsage, ...]:
    return tuple(
        api.FlavorUsage(
            name=f.name,
            resources=tuple(
                api.ResourceUsage(name=r.name, total=format_quantity(r.total, r.name),
                                  borrowed=format_quantity(r.borrowed, r.name))
                for r in f.resources
            ),
        )
        for f in usage
    )


def _lq_usage(usage: tuple[FlavorUsage, ...]) -> tuple[api.LocalQueueFlavorUsage, ...]:
    return tuple(
        api.LocalQueueFlavorUsage(
            name=f.name,
            resources=tuple(
                api.LocalQueueResourceUsage(name=r.name, total=format_quantity(r.total, r.name)) for r in f.resources
            ),
        )
        for f in usage
    )


def weighted_share(share: float) -> int:
    """Kueue's WeightedShare(): ceil, +inf as MaxInt64."""
    if share == float("inf"):
        return MAX_WEIGHTED_SHARE
    return int(-(-share // 1))


def cluster_queue_status(s: ClusterQueueStatus, facts: QueueFacts | None, now: float) -> api.ClusterQueueStatus:
    return api.ClusterQueueStatus(
        conditions=(_active(facts, s.active, s.active_reason, s.active_message, now),),
        flavors_reservation=_cq_usage(s.flavors_reservation),
        flavors_usage=_cq_usage(s.flavors_usage),
        pending_workloads=s.pending_workloads,
        reserving_workloads=s.reserving_workloads,
        admitted_workloads=s.admitted_workloads,
        fair_sharing=(
            None if s.weighted_share is None
            else api.FairSharingStatus(weighted_share=weighted_share(s.weighted_share))
        ),
    )


def local_queue_status(s: LocalQueueStatus, facts: QueueFacts | None, now: float) -> api.LocalQueueStatus:
    return api.LocalQueueStatus(
        conditions=(_active(facts, s.active, s.active_reason, s.active_message, now),),
        pending_workloads=s.pending_workloads,
        reserving_workloads=s.reserving_workloads,
        admitted_workloads=s.admitted_workloads,
        flavors_reservation=_lq_usage(s.flavors_reservation),
        flavors_usage=_lq_usage(s.flavors_usage),
    )


def _split(key: str) -> tuple[str, str]:
    ns, _, name = key.partition("/")
    return ns, name


# --- the whole result --------------------------------------------------------------------------------


class _Builder:
    def __init__(self, cluster: str, epoch: int, now: float, writer: str = WRITER) -> None:
        self.cluster = cluster
        self.writer = writer
        self.epoch = epoch
        self.at = rfc3339(now)
        self.out = Outputs([], [], {})

    def id(self, action: Action, target: str, decision: str) -> str:
        return command_id(action, self.epoch, self.cluster, target, decision)

    def command(self, cmd: Command, action: Action, target: str) -> None:
        self.out.commands.append(Outgoing(command_subject_of(cmd), cmd, cmd.id))
        self.out.sent[cmd.id] = Sent(action, target)

    def event(self, ev: Decision, key: str) -> None:
        self.out.events.append(Outgoing(subjects.event_subject(self.cluster, "workload", ev.namespace, ev.name), ev,
                                        f"evt|e{self.epoch}|{self.cluster}|{key}|{ev.id}"))


def plan_outputs(
    results: Sequence[CycleResult],
    *,
    cluster: str,
    epoch: int,
    now: float,
    round_no: int,
    admission_of: Callable[[str], api.Admission | None],
    queue_facts: Mapping[str, QueueFacts],
    writer: str = WRITER,
) -> tuple[Outputs, list[str]]:
    """Every command and decision event for the results of consecutive cycles (in their order), and
    the decisions that could not be expressed (a bug: the shell logs them loudly). A queue's status
    is written whole, so only its last one is sent. `admission_of(key)` is a reserved workload's
    admission as stored (for checks-ready); `queue_facts` is keyed "cq/<name>" and "lq/<ns>/<name>".
    `round_no` makes status command ids unique (a status may return to an earlier value)."""
    b = _Builder(cluster, epoch, now, writer)
    errors: list[str] = []
    cq_last: dict[str, ClusterQueueStatus] = {}
    lq_last: dict[str, LocalQueueStatus] = {}
    # A pending condition is written whole too: one superseded by a later one for the same
    # workload in this batch is not sent (its decision event still is).
    last_pending = {q.workload: i for i, result in enumerate(results) for q in result.pending}
    for i, result in enumerate(results):
        def superseded(key: str, i: int = i) -> bool:
            return last_pending[key] != i

        _decisions(b, result, admission_of, errors, superseded)
        cq_last.update((s.name, s) for s in result.cluster_queues)
        lq_last.update((f"{s.namespace}/{s.name}", s) for s in result.local_queues)
    _pending_last(b.out)
    common: dict[str, Any] = {"cluster": cluster, "writer": writer, "epoch": epoch}
    status_id = f"status:{round_no}"
    for name, s in cq_last.items():
        cq_status = cluster_queue_status(s, queue_facts.get(f"cq/{name}"), now)
        b.command(SetClusterQueueStatus(id=b.id("cqstatus", name, status_id), **common, name=name,
                                        status=cq_status), "cqstatus", name)
    for key, ls in lq_last.items():
        lq_status = local_queue_status(ls, queue_facts.get(f"lq/{key}"), now)
        b.command(SetLocalQueueStatus(id=b.id("lqstatus", key, status_id), **common, namespace=ls.namespace,
                                      name=ls.name, status=lq_status), "lqstatus", key)
    return b.out, errors


def _pending_last(out: Outputs) -> None:
    """Quota reservations and evictions first (they free or take capacity and the runner waits on
    them), then the pending conditions of workloads that have no other command in the batch (the
    others keep their place, so every workload's commands stay in decision order)."""
    sent = out.sent
    others = {sent[o.msg_id].target for o in out.commands if sent[o.msg_id].action != "pending"}
    late = [o for o in out.commands if sent[o.msg_id].action == "pending" and sent[o.msg_id].target not in others]
    if late:
        moved = {o.msg_id for o in late}
        out.commands[:] = [o for o in out.commands if o.msg_id not in moved] + late


def _decisions(b: _Builder, result: CycleResult, admission_of: Callable[[str], api.Admission | None],
               errors: list[str], superseded: Callable[[str], bool]) -> None:
    c, at = b.cluster, b.at
    common: dict[str, Any] = {"cluster": c, "writer": b.writer, "epoch": b.epoch}
    for d in result.admissions:
        ns, name = _split(d.workload)
        b.command(AdmitWorkload(id=b.id("reserve", d.workload, d.id), **common, namespace=ns, name=name, uid=d.uid,
                                admission=api_admission(d.cluster_queue, d.pod_sets), admitted=d.admitted,
                                message=d.message, admission_checks=d.admission_checks), "reserve", d.workload)
        b.event(WorkloadAdmittedEvent(id=d.id, cluster=c, namespace=ns, name=name, at=at, message=d.message,
                                      cluster_queue=d.cluster_queue, borrowing=d.borrowing,
                                      flavors={p.name: dict(p.flavors) for p in d.pod_sets}), d.workload)
    for fix in result.repairs:  # TAS node failure replaced in place: same quota, new topology
        ns, name = _split(fix.workload)
        b.command(AdmitWorkload(id=b.id("admit", fix.workload, fix.id), **common, namespace=ns, name=name,
                                uid=fix.uid, admission=api_admission(fix.cluster_queue, fix.pod_sets),
                                admitted=fix.admitted, replace_topology=True,
                                message=f"Replaced the failed node {fix.node} in the topology assignment"),
                  "admit", fix.workload)
    for p in result.preemptions:
        ns, name = _split(p.victim)
        b.command(EvictWorkload(id=b.id("evict", p.victim, p.id), **common, namespace=ns, name=name,
                                uid=p.victim_uid, reason="Preempted", message=p.message, preemption_reason=p.reason,
                                preemptor=p.preemptor), "evict", p.victim)
        b.event(WorkloadPreemptedEvent(id=p.id, cluster=c, namespace=ns, name=name, at=at, message=p.message,
                                       preemptor=p.preemptor, reason=p.reason), p.victim)
    for e in result.evictions:
        ns, name = _split(e.workload)
        b.command(EvictWorkload(id=b.id("evict", e.workload, e.id), **common, namespace=ns, name=name, uid=e.uid,
                                reason=e.reason, message=e.message), "evict", e.workload)
        b.event(WorkloadEvictedEvent(id=e.id, cluster=c, namespace=ns, name=name, at=at, message=e.message,
                                     reason=e.reason), e.workload)
    for x in result.deactivations:
        ns, name = _split(x.workload)
        b.command(DeactivateWorkload(id=b.id("deactivate", x.workload, x.id), **common, namespace=ns, name=name,
                                     uid=x.uid, reason=x.reason, message=x.message), "deactivate", x.workload)
        b.event(WorkloadEvictedEvent(id=x.id, cluster=c, namespace=ns, name=name, at=at, message=x.message,
                                     reason=x.reason), x.workload)
    for r in result.checks_ready:
        if r.written:
            continue  # Admitted is there already; its Event goes alone (plan/events.py)
        admission = admission_of(r.workload)
        if admission is None:
            errors.append(f"checks ready for {r.workload} but no admission is known for it")
            continue
        ns, name = _split(r.workload)
        # AdmitWorkload with the admission as stored: the watcher then only sets Admitted=True.
        b.command(AdmitWorkload(id=b.id("admit", r.workload, r.id), **common, namespace=ns, name=name, uid=r.uid,
                                admission=admission, admitted=True, message=r.message), "admit", r.workload)
    for q in result.pending:
        ns, name = _split(q.workload)
        if not superseded(q.workload):
            b.command(SetWorkloadPending(id=b.id("pending", q.workload, q.id), **common, namespace=ns, name=name,
                                         uid=q.uid, reason=PENDING_CONDITION_REASON, message=q.message),
                      "pending", q.workload)
        b.event(WorkloadPendingEvent(id=q.id, cluster=c, namespace=ns, name=name, at=at, message=q.message,
                                     reason=q.reason), q.workload)
