"""TAS in a cycle: a workload that fits its quota still needs a place in the topology.

The topology solver (services/tas) is asked and the admission assumed while it answers; its
answer completes the admission, names victims to preempt, or says no room.
"""

from __future__ import annotations

from typing import Protocol

from kq.api.constants import MULTIKUEUE_CONTROLLER_NAME

from . import placements as tas
from . import workload_sync as ws
from .decisions import AdmissionDecision, PlacementRequest, PreemptionDecision
from .entry import Entry, EntryState
from .parts import Parts
from .preemption import Target
from .preemption_issue import issue_preemptions
from .quota import FR
from .runtime import ClusterQueueRuntime
from .snapshot import Snapshot
from .workloads import ReservedInfo


class Cycle(Protocol):
    """What a placement needs of the cycle it runs in (the cycle imports this module, so the
    dependency is named here rather than imported back)."""

    p: Parts
    now: float
    snap: Snapshot
    preemptions: list[PreemptionDecision]

    def decision(self, e: Entry) -> AdmissionDecision: ...
    def preempt(self, info: ReservedInfo) -> None: ...
    def reserve(self, cq: ClusterQueueRuntime, usage: dict[FR, int]) -> None: ...


def multikueue(p: Parts, cq: ClusterQueueRuntime) -> bool:
    """Does the queue carry a MultiKueue admission check (Kueue's HasMultiKueueAdmissionCheck)?"""
    checks = p.tree.admission_checks
    return any((ac := checks.get(name)) is not None and ac.controller_name == MULTIKUEUE_CONTROLLER_NAME
               for name in cq.checks)


def placed(cycle: Cycle, e: Entry, usage: dict[FR, int]) -> bool:
    """TAS: True when the entry needs no placement or has one; else it asks, preempts or waits."""
    p, info, a = cycle.p, e.info, e.assignment
    assert a is not None
    specs = {ps.name: ps for ps in info.wl.pod_sets}
    asks = tas.pod_set_asks(
        [(specs[r.name], r.count, {c.name for c in r.flavors.values()}) for r in a.pod_sets if r.name in specs],
        e.cq, p.tree.flavors)
    if isinstance(asks, str):
        e.message, e.reason, e.requeue_reason = asks, "Pending", "NoFit"
        return False
    if not asks:
        return True
    if multikueue(p, e.cq):
        # As Kueue's TAS flavor assigner: with MultiKueue the topology is always the worker's to
        # assign; the manager reserves quota alone and marks the pod sets' request delayed.
        e.delayed = frozenset(a.name for a in asks)
        return True
    fp = tas.fingerprint(asks)
    if p.placements.stale(info.key, cycle.now):
        p.placements.consume(info.key)
    req = p.placements.current(info.key, fp)
    answer = p.placements.answer_to(req) if req is not None else None
    if req is None:
        reserved = sorted(p.book.reserved.values(), key=lambda r: r.key)
        p.placements.ask(PlacementRequest(
            id="", workload=info.key, uid=info.uid, cluster_queue=e.cq.name, fingerprint=fp,
            pod_sets=tuple(asks), candidates=tas.candidates(info, e.cq, reserved, p.tree.cqs)))
    if answer is None:
        # Assume the admission now (its quota is taken while the solver answers, so the heads
        # behind it are asked about in parallel on what is left); the answer completes it.
        d = cycle.decision(e)
        ws.assume(p, d)
        cycle.snap.fresh.add(info.key)
        e.state = EntryState.ASSUMED
        p.placements.provisional[info.key] = d
        return False
    p.placements.consume(info.key)
    if not answer.placed:
        names = ", ".join(x.name for x in asks)
        e.message = f"couldn't assign flavors to pod set {names}: {answer.message}"
        e.reason, e.requeue_reason = "Pending", "NoFit"
        return False
    if answer.victims:
        targets = [Target(v, "InClusterQueue" if v.cq == e.cq.name else "InCohortReclamation")
                   for k in answer.victims if (v := p.book.reserved.get(k)) is not None]
        if not targets:
            # Every victim left since the solver answered: the answer is stale, and nothing
            # else will bring this head back (its victims' exits already came), so ask again
            # on what is reserved now. The new question is unanswered: this recurses once.
            return placed(cycle, e, usage)
        e.targets = targets
        for t in targets:
            cycle.preempt(t.info)
        cycle.reserve(e.cq, usage)
        e.reason = "WaitingForPreemptedWorkloads"
        cycle.preemptions += issue_preemptions(p, e)
        return False
    e.topology = dict(answer.topology)
    return True
