"""Kubernetes Events ride on the command of the decision they report (plan/events.py): one message
for a decision and its events; only an event with no command of its workload goes on its own."""

from __future__ import annotations

from kq.messages import AdmitWorkload, EvictWorkload, RecordEvent, SetWorkloadPending
from services.admission.core.decisions import (
    AdmissionDecision,
    ChecksReadyDecision,
    CycleResult,
    PendingDecision,
    PreemptionDecision,
)
from services.admission.core.model import PodSetAssignment, SchedulerConfig
from services.admission.core.state import SchedulerState
from services.admission.plan.events import with_events
from services.admission.plan.outputs import plan_outputs

C, NOW = "c1", 1_700_000_000.0
PSA = PodSetAssignment(name="main", flavors={"cpu": "default"}, resource_usage={"cpu": 1000}, count=1)


def planned(results: list[CycleResult]) -> list:
    out, errors = plan_outputs(results, cluster=C, epoch=2, now=NOW, round_no=1, admission_of=lambda key: None,
                               queue_facts={})
    assert errors == []
    return with_events(out.commands, results, SchedulerState(SchedulerConfig()), C, 2, NOW)


def test_events_ride_on_their_commands_and_the_preemptors_goes_alone() -> None:
    results = [CycleResult(
        cycle=1,
        admissions=(AdmissionDecision(id="r1", workload="ns/a", uid="ua", resource_version="5", cluster_queue="cq",
                                      pod_sets=(PSA,), borrowing=False, admission_checks=(), admitted=True,
                                      message="ok"),),
        preemptions=(PreemptionDecision(id="p1", victim="ns/v", victim_uid="uv", victim_cluster_queue="cq",
                                        preemptor="ns/b", preemptor_uid="ub", reason="InClusterQueue",
                                        message="Preempted to accommodate"),),
    )]
    msgs = [o.message for o in planned(results)]
    admit = next(m for m in msgs if isinstance(m, AdmitWorkload))
    assert [(e.event_type, e.reason) for e in admit.events] == [("Normal", "QuotaReserved"), ("Normal", "Admitted")]
    evict = next(m for m in msgs if isinstance(m, EvictWorkload))
    assert [(e.reason, e.message) for e in evict.events] == [("Preempted", "Preempted to accommodate")]
    alone = [m for m in msgs if isinstance(m, RecordEvent)]
    assert [(m.involved.name, m.reason) for m in alone] == [("b", "PreemptedWorkload")]


def test_a_pending_event_goes_only_with_the_pending_write_that_goes_out() -> None:
    results = [CycleResult(cycle=i, pending=(PendingDecision(id=f"q{i}", workload="ns/w", uid="u",
                                                             reason="WaitingForQuota", message=f"try {i}"),))
               for i in (1, 2)]
    msgs = [o.message for o in planned(results)]
    assert not any(isinstance(m, RecordEvent) for m in msgs)
    (pending,) = [m for m in msgs if isinstance(m, SetWorkloadPending)]  # the first was superseded
    assert [(e.event_type, e.reason, e.message) for e in pending.events] == [("Warning", "Pending", "try 2")]


def test_an_admission_already_written_sends_its_admitted_event_alone() -> None:
    """Admitted written by the watcher with a MultiKueue check's Ready: no AdmitWorkload, the Event alone."""
    results = [CycleResult(cycle=1, checks_ready=(ChecksReadyDecision(
        id="c1", workload="ns/w", uid="u", cluster_queue="cq", message="The workload is admitted", written=True),))]
    msgs = [o.message for o in planned(results)]
    assert [(type(m).__name__, getattr(m, "reason", "")) for m in msgs] == [("RecordEvent", "Admitted")]
