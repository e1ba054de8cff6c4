"""Decisions driven by a reserving workload's own state: admission checks, draining stopped queues,
TAS node failures.

Kueue's workload controller: a Rejected check deactivates the workload, a Retry check evicts it
(it is queued again), all checks Ready turn a quota reservation into an admission, and a queue
stopped with HoldAndDrain evicts its admitted workloads.
"""

from __future__ import annotations

from kq.api.topology import topology_domains

from .model import AdmissionCheckState, Workload
from .parts import Parts
from .tas_repair import NODE_FAILURES, repair_or_evict
from .workloads import ReservedInfo

HOSTNAME_LABEL = "kubernetes.io/hostname"


def checks_message(checks: list[AdmissionCheckState], state_name: str) -> str:
    ordered = sorted(checks, key=lambda c: c.name)
    parts = [f'"{c.name}" ({c.message})' if c.message else f'"{c.name}"' for c in ordered]
    noun = "AdmissionChecks" if len(ordered) > 1 else "AdmissionCheck"
    return f"{noun} in {state_name} state: {'; '.join(parts)}"


def issue_eviction(p: Parts, w: Workload, cq_name: str, reason: str, message: str) -> None:
    if p.ledger.issue_eviction(w, reason, message):
        p.tree.bump_cq(cq_name)


DEACTIVATED = "Deactivated"
DEACTIVATED_MESSAGE = "The workload is deactivated"
# Kueue: Evicted reason Deactivated with the underlying cause (ReasonWithCause), and the message
# of the DeactivationTarget it set.
MAX_EXEC_REASON = "DeactivatedDueToMaximumExecutionTimeExceeded"
MAX_EXEC_MESSAGE = f"{DEACTIVATED_MESSAGE} due to exceeding the maximum execution time"
CHECK_REJECTED_REASON = "DeactivatedDueToAdmissionCheck"


def evaluate(p: Parts, w: Workload) -> None:
    if w.finished:
        return
    key = w.key
    if not w.active:
        _evict_deactivated(p, w)
        return
    rejected = [c for c in w.admission_checks if c.state == "Rejected"]
    if rejected and w.evicted_reason is None:
        message = f"{DEACTIVATED_MESSAGE} due to {checks_message(rejected, 'Rejected')}"
        p.ledger.issue_deactivation(w, CHECK_REJECTED_REASON, message)
        return
    info = p.book.reserved.get(key)
    if info is None or info.assumed:
        return
    retry = [c for c in w.admission_checks if c.state == "Retry"]
    if retry and w.evicted_reason is None:
        issue_eviction(p, w, info.cq, "AdmissionCheck", f"Evicted due to {checks_message(retry, 'Retry')}")
        return
    failed = _failed_nodes_in_use(w, info)
    if failed and w.evicted_reason is None:
        # Kueue's node failure handling: the lost node replaced in place, else evicted (fail fast).
        no_repair = repair_or_evict(p, w, info, failed)
        if no_repair is not None:
            issue_eviction(p, w, info.cq, NODE_FAILURES, no_repair)
        return
    cq = p.tree.cqs.get(info.cq)
    if cq is None:
        return
    if not w.admitted:
        required = cq.checks_for(info.flavors())
        present = {c.name for c in w.admission_checks}
        topology_waits = any(ps.topology_assignment is None and ps.delayed_topology_request == "Pending"
                             for ps in info.admission.pod_sets)
        if (all(r in present for r in required) and all(c.state == "Ready" for c in w.admission_checks)
                and not topology_waits):  # Kueue's SyncAdmittedCondition: no delayed topology still pending
            p.ledger.issue_checks_ready(w, info.cq)
        return
    drain_if_needed(p, info)


def _failed_nodes_in_use(w: Workload, info: ReservedInfo) -> dict[str, set[str]]:
    """The unhealthy nodes its current topology assignment places pods on (hostname level), each
    with the pod sets placed there."""
    if not w.unhealthy_nodes or info.admission is None:
        return {}
    used: dict[str, set[str]] = {}
    for ps in info.admission.pod_sets:
        ta = ps.topology_assignment
        if ta is not None and HOSTNAME_LABEL in ta.levels:
            at = list(ta.levels).index(HOSTNAME_LABEL)
            for d in topology_domains(ta):
                used.setdefault(d.values[at], set()).add(ps.name)
    return {n: used[n] for n in w.unhealthy_nodes if n in used}


def _evict_deactivated(p: Parts, w: Workload) -> None:
    """Kueue's workload controller: a deactivated workload holding quota is evicted (reason
    Deactivated); its job is stopped and the quota released only once QuotaReserved turns False."""
    info = p.book.reserved.get(w.key)
    if info is None or info.assumed or w.evicted_reason is not None or p.ledger.deactivation_issued(w.key):
        return  # not holding quota, already evicted, or our own deactivation evicts it
    issue_eviction(p, w, info.cq, DEACTIVATED, DEACTIVATED_MESSAGE)


def deactivate_expired(p: Parts, now: float) -> None:
    """Kueue reconcileMaxExecutionTime: an admitted workload past its maximum execution time is
    deactivated (then evicted, its quota released once its job stopped)."""
    for info in p.book.pop_expired(now):
        w = info.wl
        if w.active and not w.finished and w.evicted_reason is None:
            p.ledger.issue_deactivation(w, MAX_EXEC_REASON, MAX_EXEC_MESSAGE)


def drain_if_needed(p: Parts, info: ReservedInfo) -> None:
    """Evict an admitted workload whose LocalQueue or ClusterQueue is stopped with HoldAndDrain."""
    w = info.wl
    if info.assumed or not info.admitted or w.evicted_reason is not None:
        return
    lq = p.tree.lqs.get(info.lq_key)
    cq = p.tree.cqs.get(info.cq)
    if lq is not None and lq.spec.stop_policy == "HoldAndDrain":
        issue_eviction(p, w, info.cq, "LocalQueueStopped", "The LocalQueue is stopped")
    elif cq is not None and cq.spec.stop_policy == "HoldAndDrain":
        issue_eviction(p, w, info.cq, "ClusterQueueStopped", "The ClusterQueue is stopped")
