"""Decisions driven by a reserving workload's own state: admission checks and draining stopped queues.

Kueue's workload controller: a Rejected check deactivates the workload, a Retry check evicts it
(it is queued again), all checks Ready turn a quota reservation into an admission, and a queue
stopped with HoldAndDrain evicts its admitted workloads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .decisions import ChecksReadyDecision, DeactivationDecision, EvictionDecision
from .model import AdmissionCheckState, Workload
from .workloads import ReservedInfo

if TYPE_CHECKING:
    from .state import SchedulerState


def checks_message(checks: list[AdmissionCheckState], state_name: str) -> str:
    ordered = sorted(checks, key=lambda c: c.name)
    parts = [f'"{c.name}" ({c.message})' if c.message else f'"{c.name}"' for c in ordered]
    noun = "AdmissionChecks" if len(ordered) > 1 else "AdmissionCheck"
    return f"{noun} in {state_name} state: {'; '.join(parts)}"


def issue_eviction(state: SchedulerState, w: Workload, cq_name: str, reason: str, message: str) -> None:
    if w.key in state.evictions_issued:
        return
    state.evictions_issued[w.key] = w.uid
    state.outbox.evictions.append(
        EvictionDecision(
            id=state.decision_id("evict", w.uid, w.resource_version),
            workload=w.key,
            uid=w.uid,
            reason=reason,
            message=message,
        )
    )
    state.bump_cq(cq_name)


def evaluate(state: SchedulerState, w: Workload) -> None:
    if not w.active or w.finished:
        return
    key = w.key
    rejected = [c for c in w.admission_checks if c.state == "Rejected"]
    if rejected and w.evicted_reason is None:
        if key not in state.deactivations_issued:
            state.deactivations_issued[key] = w.uid
            state.outbox.deactivations.append(
                DeactivationDecision(
                    id=state.decision_id("deactivate", w.uid, w.resource_version),
                    workload=key,
                    uid=w.uid,
                    reason="AdmissionCheck",
                    message=checks_message(rejected, "Rejected"),
                )
            )
        return
    info = state.reserved.get(key)
    if info is None or info.assumed:
        return
    retry = [c for c in w.admission_checks if c.state == "Retry"]
    if retry and w.evicted_reason is None:
        issue_eviction(state, w, info.cq, "AdmissionCheck", f"Evicted due to {checks_message(retry, 'Retry')}")
        return
    cq = state.cqs.get(info.cq)
    if cq is None:
        return
    if not w.admitted:
        required = cq.checks_for(info.flavors())
        present = {c.name for c in w.admission_checks}
        if all(r in present for r in required) and all(c.state == "Ready" for c in w.admission_checks):
            if key not in state.checks_ready_issued:
                state.checks_ready_issued[key] = w.uid
                state.outbox.checks_ready.append(
                    ChecksReadyDecision(
                        id=state.decision_id("admit", w.uid, w.resource_version),
                        workload=key,
                        uid=w.uid,
                        cluster_queue=info.cq,
                        message="The workload is admitted",
                    )
                )
        return
    drain_if_needed(state, info)


def drain_if_needed(state: SchedulerState, info: ReservedInfo) -> None:
    """Evict an admitted workload whose LocalQueue or ClusterQueue is stopped with HoldAndDrain."""
    w = info.wl
    if info.assumed or not info.admitted or w.evicted_reason is not None:
        return
    lq = state.lqs.get(info.lq_key)
    cq = state.cqs.get(info.cq)
    if lq is not None and lq.spec.stop_policy == "HoldAndDrain":
        issue_eviction(state, w, info.cq, "LocalQueueStopped", "The LocalQueue is stopped")
    elif cq is not None and cq.spec.stop_policy == "HoldAndDrain":
        issue_eviction(state, w, info.cq, "ClusterQueueStopped", "The ClusterQueue is stopped")
