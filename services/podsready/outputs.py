"""Decisions of the core as bus messages: typed commands to the watcher (KQ_CMD) and their
audit events (KQ_EVENTS), with deterministic message ids; timers as JetStream schedules."""

from __future__ import annotations

from datetime import datetime, timezone

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
    command_kind,
)
from kq.runtime import OutMsg
from kq.runtime.bus import SCHEDULE, SCHEDULE_TARGET, schedule_time
from services.podsready.core.model import Deactivate, Decision, Evict, FinishBackoff, Key, Timer

WRITER = "podsready"
EVICTED_BY_PODS_READY_TIMEOUT = "PodsReadyTimeout"


def _out(cmd: Command) -> OutMsg:
    return OutMsg(subjects.command_subject(cmd.cluster, command_kind(cmd)), cmd, f"{WRITER}:{cmd.cluster}:{cmd.id}")


def fence(cluster: str, epoch: int) -> OutMsg:
    return _out(Fence(id=f"fence:{epoch}", cluster=cluster, writer=WRITER, epoch=epoch))


def command(decision: Decision, epoch: int) -> OutMsg:
    key = decision.key
    common = dict(id=decision.id, cluster=key.cluster, writer=WRITER, epoch=epoch, namespace=key.namespace,
                  name=key.name, uid=decision.uid)
    match decision:
        case Evict():
            rs = decision.requeue_state
            return _out(EvictWorkload(**common, reason=EVICTED_BY_PODS_READY_TIMEOUT, message=decision.message,
                                      requeue_state=RequeueState(count=rs.count, requeue_at=rs.requeue_at)))
        case Deactivate():
            return _out(DeactivateWorkload(**common, reason=decision.reason, message=decision.message))
        case FinishBackoff():
            return _out(FinishRequeueBackoff(**common, requeue_at=decision.requeue_at))
    raise TypeError(f"unknown decision {type(decision).__name__}")


def event(decision: Decision, at: float) -> OutMsg | None:
    """The audit record `kq describe` shows (evictions and deactivations)."""
    key = decision.key
    when = datetime.fromtimestamp(at, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
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


def schedule(timer: Timer) -> OutMsg:
    """A JetStream message schedule firing TimerMessage at timer.at (replaces the key's last one)."""
    key = timer.key
    at = datetime.fromtimestamp(timer.at, timezone.utc)
    body = TimerMessage(service=WRITER, cluster=key.cluster, namespace=key.namespace, name=key.name,
                        at=schedule_time(at), purpose=timer.purpose)
    target = subjects.timer_fire_subject(WRITER, key.cluster, key.namespace, key.name)
    headers = {SCHEDULE: f"@at {schedule_time(at)}", SCHEDULE_TARGET: target}
    return OutMsg(schedule_subject(key), body, None, headers)


def schedule_subject(key: Key) -> str:
    return subjects.timer_schedule_subject(WRITER, key.cluster, key.namespace, key.name)


def timer_key(msg: TimerMessage) -> Key:
    return Key(msg.cluster, msg.namespace, msg.name)
