"""Kueue's waitForPodsReady rules on one Workload (pkg/controller/core/workload_controller.go
admittedNotReadyWorkload, reconcileNotReadyTimeout, triggerDeactivation; pkg/workload
UpdateRequeueState), as pure functions of the Workload, the configuration and `now`."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from .model import (
    Deactivate,
    Decision,
    Evict,
    FinishBackoff,
    PodsReadyConfig,
    RequeueStateOut,
    Timer,
    WorkloadView,
)

PODS_READY_TIMEOUT = "PodsReadyTimeout"  # the Evicted reason, and the Requeued reason after it
WAIT_FOR_START = "WaitForStart"
WAIT_FOR_RECOVERY = "WaitForRecovery"
LEGACY_PODS_READY_REASON = "PodsReady"  # what older Kueue wrote while waiting to start
DEACTIVATED_REQUEUING_LIMIT = "DeactivatedDueToRequeuingLimitExceeded"  # ReasonWithCause(Deactivated, ...)
REQUEUING_LIMIT_MESSAGE = "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
_UNCAPPED = float(2**62)


def format_time(at: float) -> str:
    """metav1.Time on the wire: UTC, whole seconds."""
    return datetime.fromtimestamp(int(at // 1), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def jitter_fraction(uid: str, count: int) -> float:
    """Kueue draws the jitter at random; a core has no random, so it is derived from the workload's
    uid and requeue count: a fixed value in [0, 1) for each (workload, attempt)."""
    digest = hashlib.sha256(f"{uid}/{count}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def backoff_seconds(cfg: PodsReadyConfig, count: int, uid: str) -> float:
    """wait.Backoff{base, factor 2, cap backoffMaxSeconds}.WaitTime(count): base * 2^(count-1), capped
    (the first step is never capped, as in Kueue), times 1 + jitter * fraction."""
    cap = cfg.backoff_max_s if cfg.backoff_max_s > 0 else _UNCAPPED
    base = float(cfg.backoff_base_s)
    wait = base if count <= 1 else min(base * 2.0 ** min(count - 1, 62), cap)
    return wait * (1.0 + cfg.jitter * jitter_fraction(uid, count))


def pods_ready_deadline(view: WorkloadView, cfg: PodsReadyConfig) -> Timer | None:
    """admittedNotReadyWorkload: an admitted, active, not evicted Workload without PodsReady=True is
    timed from its admission while it waits to start, from PodsReady's last transition while it
    waits to recover (when recoveryTimeout is on)."""
    if not view.active or view.finished or view.deleting or view.evicted or not view.admitted:
        return None
    if view.pods_ready_status == "True":
        return None
    reason = view.pods_ready_reason
    if view.pods_ready_status is None or reason in (WAIT_FOR_START, LEGACY_PODS_READY_REASON):
        if view.admitted_at is None:
            return None
        return Timer(key=view.key, at=view.admitted_at + cfg.timeout_s, purpose="WaitForStart")
    if reason == WAIT_FOR_RECOVERY and cfg.recovery_timeout_s is not None and view.pods_ready_at is not None:
        return Timer(key=view.key, at=view.pods_ready_at + cfg.recovery_timeout_s, purpose="WaitForRecovery")
    return None


def backoff_deadline(view: WorkloadView) -> Timer | None:
    """After a PodsReadyTimeout eviction has released the quota (Requeued=False PodsReadyTimeout),
    the workload waits until requeueAt (at once when there is none)."""
    if not view.active or view.finished or view.deleting or view.quota_reserved:
        return None
    if view.requeued_status != "False" or view.requeued_reason != PODS_READY_TIMEOUT:
        return None
    return Timer(key=view.key, at=view.requeue_at if view.requeue_at is not None else 0.0, purpose="Backoff")


def next_timer(view: WorkloadView, cfg: PodsReadyConfig) -> Timer | None:
    return pods_ready_deadline(view, cfg) or backoff_deadline(view)


def on_due(view: WorkloadView, timer: Timer, cfg: PodsReadyConfig, now: float) -> Decision:
    """What to do once `timer` (this view's next_timer) has passed."""
    if timer.purpose == "Backoff":
        return FinishBackoff(id=f"backoff:{view.uid}:{view.requeue_count}:{view.requeue_at_text}",
                             key=view.key, uid=view.uid, requeue_at=view.requeue_at_text)
    attempt = view.requeue_count + 1
    if cfg.backoff_limit_count is not None and attempt > cfg.backoff_limit_count:
        return Deactivate(id=f"deactivate:{view.uid}:{view.admitted_at_text}", key=view.key, uid=view.uid,
                          reason=DEACTIVATED_REQUEUING_LIMIT, message=REQUEUING_LIMIT_MESSAGE)
    requeue_at = format_time(now + backoff_seconds(cfg, attempt, view.uid))
    return Evict(
        id=f"evict:{view.uid}:{view.admitted_at_text}:{attempt}",
        key=view.key,
        uid=view.uid,
        cause=timer.purpose,
        message=f"Exceeded the PodsReady timeout {view.key.namespace}/{view.key.name}",
        requeue_state=RequeueStateOut(count=attempt, requeue_at=requeue_at),
    )
