"""Decisions of the core as bus messages: typed commands to the watcher (KQ_CMD) and their
audit events (KQ_EVENTS), with deterministic message ids; timers as JetStream schedules."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TypedDict

from kq import subjects
from kq.api.workload import RequeueState
from kq.messages import (
    Command,
    DeactivateWorkload,
    EvictWorkload,
    Fence,
    FinishRequeueBackoff,
    TimerMessage,
    WorkloadEvictedEvent,
    command_msg_id,
    command_subject_of,
)
from kq.runtime import OutMsg
from kq.runtime.bus import SCHEDULE, SCHEDULE_TARGET, schedule_time
from services.podsready.core.model import Deactivate, Decision, Evict, FinishBackoff

WRITER = "podsready"
EVICTED_BY_PODS_READY_TIMEOUT = "PodsReadyTimeout"


def _out(cmd: Command) -> OutMsg:
    return OutMsg(command_subject_of(cmd), cmd, command_msg_id(cmd))


def fence(cluster: str, epoch: int) -> OutMsg:
    return _out(Fence(id=f"fence:{epoch}", cluster=cluster, writer=WRITER, epoch=epoch))


class _WorkloadFields(TypedDict):
    """The fields every workload command shares (kq.messages._WorkloadCommand)."""

    id: str
    cluster: str
    writer: str
    epoch: int
    namespace: str
    name: str
    uid: str


def command(decision: Decision, epoch: int) -> OutMsg:
    key = decision.key
    common = _WorkloadFields(id=decision.id, cluster=key.cluster, writer=WRITER, epoch=epoch, namespace=key.namespace,
                  name=key.name, uid=decision.uid)
    match decision:
        case Evict():
            rs = decision.requeue_state
            return _out(EvictWorkload(**common, reason=EVICTED_BY_PODS_READY_TIMEOUT, message=decision.message,
                                      requeue_state=RequeueState(count=rs.count, requeue_at=rs.requeue_at),
                                      underlying_cause=decision.cause))
        case Deactivate():
            return _out(DeactivateWorkload(**common, reason=decision.reason, message=decision.message))
        case FinishBackoff():
            return _out(FinishRequeueBackoff(**common, requeue_at=decision.requeue_at))
    raise TypeError(f"unknown decision {type(decision).__name__}")


def event(decision: Decision, at: float) -> OutMsg | None:
    """The audit record `kq describe` shows (evictions and deactivations)."""
    key = decision.key
    when = datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    match decision:
        case Evict():
            reason, message = EVICTED_BY_PODS_READY_TIMEOUT, f"{decision.message} ({decision.cause})"
        case Deactivate():
            reason, message = decision.reason, decision.message
        case _:
            return None
    ev = WorkloadEvictedEvent(id=decision.id, cluster=key.cluster, namespace=key.namespace, name=key.name, at=when,
                              message=message, reason=reason)
    subject = subjects.event_subject(key.cluster, "workload", key.namespace, key.name)
    return OutMsg(subject, ev, f"{WRITER}:evt:{key.cluster}:{decision.id}")


def bucket_of(at: float, bucket_s: float) -> float:
    """The bus timer that covers a deadline: the first bucket boundary at or after it."""
    return math.ceil(at / bucket_s - 1e-9) * bucket_s


def schedule(bucket: float) -> OutMsg:
    """A JetStream message schedule firing at `bucket`: "decide every deadline up to now". One per
    bucket however many deadlines fall in it; a bucket fired for nothing decides nothing."""
    at = datetime.fromtimestamp(bucket, UTC)
    name = str(round(bucket * 1000))
    body = TimerMessage(service=WRITER, at=schedule_time(at), purpose="Deadlines")
    headers = {SCHEDULE: f"@at {schedule_time(at)}", SCHEDULE_TARGET: subjects.timer_fire_subject(WRITER, name)}
    return OutMsg(subjects.timer_schedule_subject(WRITER, name), body, f"{WRITER}:timer:{name}", headers)
