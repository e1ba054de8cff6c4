"""The core's inputs and outputs: configuration, what it reads of a Workload, timers, decisions."""

from __future__ import annotations

from typing import Literal, NamedTuple

import msgspec

TimerPurpose = Literal["WaitForStart", "WaitForRecovery", "Backoff"]


class Key(NamedTuple):
    cluster: str
    namespace: str
    name: str

    def label(self) -> str:
        return f"{self.cluster}/{self.namespace}/{self.name}"


class PodsReadyConfig(msgspec.Struct, frozen=True, kw_only=True):
    """waitForPodsReady as the core needs it (durations in seconds, already validated)."""

    timeout_s: float
    recovery_timeout_s: float | None  # None: recovery is not timed ("0s")
    backoff_base_s: int = 60
    backoff_max_s: int = 3600
    backoff_limit_count: int | None = None  # None: requeue for ever
    jitter: float = 0.0001  # Kueue's requeuing backoff jitter (a fraction of the wait)


class WorkloadView(msgspec.Struct, frozen=True, kw_only=True):
    """What the core reads of one Workload."""

    key: Key
    uid: str
    resource_version: str = ""
    active: bool = True
    finished: bool = False
    deleting: bool = False
    quota_reserved: bool = False
    admitted: bool = False
    admitted_at: float | None = None  # Admitted=True's lastTransitionTime (epoch seconds)
    admitted_at_text: str = ""
    evicted: bool = False
    pods_ready_status: str | None = None  # "True" / "False" / None when absent
    pods_ready_reason: str = ""
    pods_ready_at: float | None = None  # PodsReady's lastTransitionTime
    requeue_count: int = 0  # status.requeueState.count
    requeue_at: float | None = None  # status.requeueState.requeueAt
    requeue_at_text: str = ""
    requeued_status: str | None = None  # the Requeued condition
    requeued_reason: str = ""


class Timer(msgspec.Struct, frozen=True, kw_only=True):
    """Wake the core for `key` at `at` (epoch seconds)."""

    key: Key
    at: float
    purpose: TimerPurpose


class RequeueStateOut(msgspec.Struct, frozen=True, kw_only=True):
    count: int
    requeue_at: str  # RFC 3339, whole seconds (metav1.Time)


class Evict(msgspec.Struct, frozen=True, kw_only=True, tag="Evict"):
    """Evict with reason PodsReadyTimeout and write the next requeue state."""

    id: str
    key: Key
    uid: str
    cause: TimerPurpose  # WaitForStart or WaitForRecovery (Kueue's underlying cause)
    message: str
    requeue_state: RequeueStateOut


class Deactivate(msgspec.Struct, frozen=True, kw_only=True, tag="Deactivate"):
    """spec.active=false: the requeuing limit is exceeded."""

    id: str
    key: Key
    uid: str
    reason: str
    message: str


class FinishBackoff(msgspec.Struct, frozen=True, kw_only=True, tag="FinishBackoff"):
    """requeueAt passed: clear it and set Requeued=True (BackoffFinished)."""

    id: str
    key: Key
    uid: str
    requeue_at: str


Decision = Evict | Deactivate | FinishBackoff


class Changes(msgspec.Struct, kw_only=True):
    """What the shell must do after one input: timers to (re)set, timers to cancel, decisions."""

    timers: list[Timer] = msgspec.field(default_factory=list)
    cancelled: list[Key] = msgspec.field(default_factory=list)
    decisions: list[Decision] = msgspec.field(default_factory=list)

    def extend(self, other: Changes) -> None:
        self.timers += other.timers
        self.cancelled += other.cancelled
        self.decisions += other.decisions

    def empty(self) -> bool:
        return not (self.timers or self.cancelled or self.decisions)
