"""Issuing a preemption: the eviction decision for each target, with Kueue's message."""

from __future__ import annotations

from .decisions import PreemptionDecision
from .entry import Entry
from .parts import Parts
from .preemption import HUMAN_REASONS, Target


def issue_preemptions(p: Parts, e: Entry) -> list[PreemptionDecision]:
    """Kueue IssuePreemptions: an eviction for each of e's targets not already on its way out;
    e waits for them."""
    out: list[PreemptionDecision] = []
    for t in e.targets:
        v = t.info
        if v.evicted or p.ledger.eviction_issued(v.key):
            continue  # already on its way out
        decision_id = p.ledger.issue_preemption(v.key, v.uid, v.wl.resource_version)
        p.tree.bump_cq(v.cq)
        out.append(
            PreemptionDecision(
                id=decision_id,
                victim=v.key,
                victim_uid=v.uid,
                victim_cluster_queue=v.cq,
                preemptor=e.info.key,
                preemptor_uid=e.info.uid,
                reason=t.reason,
                message=_preemption_message(p, e, t),
            )
        )
    e.message += f". Pending the preemption of {len(e.targets)} workload(s)"
    e.requeue_reason = "PendingPreemption"
    e.info.last_assignment = None
    return out


def _cq_path(p: Parts, cq_name: str) -> str:
    cq = p.tree.cqs.get(cq_name)
    if cq is None:
        return "UNKNOWN"
    parts = [cq_name] + [n.name for n in cq.node.ancestors()]
    return "/" + "/".join(reversed(parts))


def _preemption_message(p: Parts, e: Entry, t: Target) -> str:
    return (
        f"Preempted to accommodate a workload (UID: {e.info.uid or 'UNKNOWN'}, "
        f"JobUID: {e.info.wl.job_uid or 'UNKNOWN'}) due to {HUMAN_REASONS.get(t.reason, 'UNKNOWN')}; "
        f"preemptor path: {_cq_path(p, e.cq.name)}; preemptee path: {_cq_path(p, t.info.cq)}"
    )
