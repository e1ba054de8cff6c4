"""The admission shell's pure parts (services/admission/plan), without a bus: mirror records in (inputs.py), commands and
events out (outputs.py), and what a partition does with outcomes (partition.py)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from kq import subjects
from kq.api import kueue as api
from kq.api.meta import Condition
from kq.messages import (
    AdmitWorkload,
    CommandOutcome,
    CommandType,
    DeactivateWorkload,
    EvictWorkload,
    OutcomeReason,
    SetClusterQueueStatus,
    SetLocalQueueStatus,
    SetWorkloadPending,
    WorkloadAdmittedEvent,
    WorkloadEvictedEvent,
    WorkloadPendingEvent,
    WorkloadPreemptedEvent,
    outcome_of,
)
from kq.mirror import ObjectRecord
from services.admission.core.decisions import (
    AdmissionDecision,
    ChecksReadyDecision,
    ClusterQueueStatus,
    CycleResult,
    DeactivationDecision,
    EvictionDecision,
    FlavorUsage,
    LocalQueueStatus,
    PendingDecision,
    PreemptionDecision,
    ResourceUsage,
)
from services.admission.core.model import Deleted, PodSetAssignment, SchedulerConfig
from services.admission.plan.inputs import InputError, convert
from services.admission.plan.outputs import (
    Action,
    Outgoing,
    Outputs,
    QueueFacts,
    Sent,
    command_id,
    plan_outputs,
    weighted_share,
)
from services.admission.plan.partition import LostLeadership, Partition
from services.admission.plan.pending_pacer import PendingPacer

C = "c1"
KUEUE = "kueue.x-k8s.io/v1beta2"
NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z


# --- records ----------------------------------------------------------------------------------------


def record(kind: str, ns: str, name: str, body: dict[str, Any], rv: str, deleted: bool = False) -> ObjectRecord:
    meta = {"name": name, "uid": f"uid-{name}", "resourceVersion": rv, "generation": 1,
            "creationTimestamp": "2023-11-14T22:00:00Z", **({"namespace": ns} if ns else {})}
    raw = json.dumps({**body, "metadata": meta}).encode()
    return ObjectRecord(cluster=C, kind=kind, namespace=ns, name=name, deleted=deleted, resource_version=rv,
                        uid=f"uid-{name}", raw=raw)


def workload(name: str, rv: str, cpu: str = "1", status: dict[str, Any] | None = None) -> ObjectRecord:
    return record("workload", "demo", name, {"apiVersion": KUEUE, "kind": "Workload", "spec": {
        "queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}, "status": status or {}}, rv)


def world() -> list[ObjectRecord]:
    return [
        record("namespace", "", "demo", {"apiVersion": "v1", "kind": "Namespace"}, "1"),
        record("resourceflavor", "", "default", {"apiVersion": KUEUE, "kind": "ResourceFlavor"}, "2"),
        record("clusterqueue", "", "cq", {"apiVersion": KUEUE, "kind": "ClusterQueue", "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "2"}]}]}]}}, "3"),
        record("localqueue", "demo", "lq", {"apiVersion": KUEUE, "kind": "LocalQueue",
                                            "spec": {"clusterQueue": "cq"}}, "4"),
    ]


def partition(epoch: int = 7) -> Partition:
    p = Partition(C, epoch, SchedulerConfig())
    for rec in world():
        p.apply_record(rec)
    p.mark_rebuilt()
    return p


# --- inputs -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("rec, want", [
    pytest.param(record("workload", "demo", "w", {}, "9", deleted=True),
                 Deleted(kind="Workload", namespace="demo", name="w"), id="tombstone"),
    pytest.param(record("clusterqueue", "", "cq", {}, "9", deleted=True), Deleted(kind="ClusterQueue", name="cq"),
                 id="cluster-scoped-tombstone"),
], )
def test_tombstones_become_deleted(rec: ObjectRecord, want: Deleted) -> None:
    assert convert(rec).event == want


@pytest.mark.parametrize("rec, fragment", [
    pytest.param(workload("w", "9", cpu="lots"), "w@9", id="bad-quantity-names-the-object"),
    pytest.param(record("workload", "demo", "w", {"spec": {"podSets": "x"}}, "9"), "podSets", id="bad-shape"),
    pytest.param(record("pod", "demo", "p", {}, "9"), "not an input", id="kind-not-needed"),
])
def test_bad_records_raise_naming_what_is_wrong(rec: ObjectRecord, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        convert(rec)


def test_a_bad_record_changes_nothing() -> None:
    p = partition()
    p.apply_record(workload("w", "10"))
    before = p.state.workloads["demo/w"]
    with pytest.raises(InputError):
        p.apply_record(workload("w", "11", cpu="lots"))
    assert p.state.workloads["demo/w"] is before


# --- ids --------------------------------------------------------------------------------------------


def test_an_outcome_says_what_its_command_was_about() -> None:
    cmd = SetWorkloadPending(id=command_id("pending", 3, C, "ns/w", "pending:u:5:1"), cluster=C, writer="admission",
                             epoch=3, namespace="ns", name="w", uid="u", reason="Pending", message="m")
    out = outcome_of(cmd, cluster=C, applied=False, reason="UidMismatch", resource_version="9")
    decoded = msgspec.json.decode(msgspec.json.encode(out), type=CommandOutcome)
    assert (decoded.command, decoded.namespace, decoded.name, decoded.reason) == ("SetWorkloadPending", "ns", "w",
                                                                                   "UidMismatch")


def test_an_outcome_with_an_unknown_reason_is_refused_at_decoding() -> None:
    raw = msgspec.json.encode({"command_id": "x", "cluster": C, "writer": "admission", "epoch": 1, "applied": False,
                               "reason": "SomethingNew"})
    with pytest.raises(msgspec.ValidationError, match="reason"):
        msgspec.json.decode(raw, type=CommandOutcome)


# --- outputs ----------------------------------------------------------------------------------------

PSA = PodSetAssignment(name="main", flavors={"cpu": "default"}, resource_usage={"cpu": 1500}, count=3)
API_ADMISSION = api.Admission(cluster_queue="cq", pod_set_assignments=(
    api.PodSetAssignment(name="main", flavors={"cpu": "default"}, resource_usage={"cpu": "1500m"}, count=3),))


def _one(result: CycleResult, **kw: Any) -> tuple[list[tuple[str, str, Any]], list[tuple[str, str, Any]], list[str]]:
    out, errors = plan_outputs([result], cluster=C, epoch=4, now=NOW, round_no=9,
                               admission_of=kw.get("admission_of", lambda key: None),
                               queue_facts=kw.get("queue_facts", {}))
    return ([(o.subject, o.msg_id, o.message) for o in out.commands],
            [(o.subject, o.msg_id, o.message) for o in out.events], errors)


WL_SUBJECT = subjects.command_subject(C, "workload", "admission")
EVT = subjects.event_subject(C, "workload", "ns", "w")
AT = "2023-11-14T22:13:20.000Z"
COMMON: dict[str, Any] = {"cluster": C, "writer": "admission", "epoch": 4, "namespace": "ns", "name": "w", "uid": "u"}


@pytest.mark.parametrize("result, commands, events", [
    pytest.param(
        CycleResult(cycle=1, admissions=(AdmissionDecision(
            id="reserve:u:5:1", workload="ns/w", uid="u", resource_version="5", cluster_queue="cq", pod_sets=(PSA,),
            borrowing=True, admission_checks=(), admitted=True, message="Quota reserved in ClusterQueue cq"),)),
        [(WL_SUBJECT, "reserve|e4|c1|ns/w|reserve:u:5:1", AdmitWorkload(
            id="reserve|e4|c1|ns/w|reserve:u:5:1", **COMMON, admission=API_ADMISSION, admitted=True,
            message="Quota reserved in ClusterQueue cq"))],
        [(EVT, "evt|e4|c1|ns/w|reserve:u:5:1", WorkloadAdmittedEvent(
            id="reserve:u:5:1", cluster=C, namespace="ns", name="w", at=AT, message="Quota reserved in ClusterQueue cq",
            cluster_queue="cq", flavors={"main": {"cpu": "default"}}, borrowing=True))],
        id="admission"),
    pytest.param(
        CycleResult(cycle=1, preemptions=(PreemptionDecision(
            id="preempt:u:5:2", victim="ns/w", victim_uid="u", victim_cluster_queue="cq", preemptor="ns/big",
            preemptor_uid="b", reason="InClusterQueue", message="Preempted to accommodate"),)),
        [(WL_SUBJECT, "evict|e4|c1|ns/w|preempt:u:5:2", EvictWorkload(
            id="evict|e4|c1|ns/w|preempt:u:5:2", **COMMON, reason="Preempted", message="Preempted to accommodate",
            preemption_reason="InClusterQueue", preemptor="ns/big"))],
        [(EVT, "evt|e4|c1|ns/w|preempt:u:5:2", WorkloadPreemptedEvent(
            id="preempt:u:5:2", cluster=C, namespace="ns", name="w", at=AT, message="Preempted to accommodate",
            preemptor="ns/big", reason="InClusterQueue"))],
        id="preemption"),
    pytest.param(
        CycleResult(cycle=1, evictions=(EvictionDecision(id="evict:u:5:3", workload="ns/w", uid="u",
                                                         reason="ClusterQueueStopped", message="stopped"),)),
        [(WL_SUBJECT, "evict|e4|c1|ns/w|evict:u:5:3", EvictWorkload(
            id="evict|e4|c1|ns/w|evict:u:5:3", **COMMON, reason="ClusterQueueStopped", message="stopped"))],
        [(EVT, "evt|e4|c1|ns/w|evict:u:5:3", WorkloadEvictedEvent(
            id="evict:u:5:3", cluster=C, namespace="ns", name="w", at=AT, message="stopped",
            reason="ClusterQueueStopped"))],
        id="eviction"),
    pytest.param(
        CycleResult(cycle=1, deactivations=(DeactivationDecision(id="deactivate:u:5:1", workload="ns/w", uid="u",
                                                                 reason="AdmissionCheck", message="rejected"),)),
        [(WL_SUBJECT, "deactivate|e4|c1|ns/w|deactivate:u:5:1", DeactivateWorkload(
            id="deactivate|e4|c1|ns/w|deactivate:u:5:1", **COMMON, reason="AdmissionCheck", message="rejected"))],
        [(EVT, "evt|e4|c1|ns/w|deactivate:u:5:1", WorkloadEvictedEvent(
            id="deactivate:u:5:1", cluster=C, namespace="ns", name="w", at=AT, message="rejected",
            reason="AdmissionCheck"))],
        id="deactivation"),
    pytest.param(
        CycleResult(cycle=1, pending=(PendingDecision(id="pending:u:5:1", workload="ns/w", uid="u",
                                                      reason="WaitingForQuota", message="insufficient quota"),)),
        [(WL_SUBJECT, "pending|e4|c1|ns/w|pending:u:5:1", SetWorkloadPending(
            id="pending|e4|c1|ns/w|pending:u:5:1", **COMMON, reason="Pending", message="insufficient quota"))],
        [(EVT, "evt|e4|c1|ns/w|pending:u:5:1", WorkloadPendingEvent(
            id="pending:u:5:1", cluster=C, namespace="ns", name="w", at=AT, message="insufficient quota",
            reason="WaitingForQuota"))],
        id="pending"),
    pytest.param(
        CycleResult(cycle=1, checks_ready=(ChecksReadyDecision(id="admit:u:6:1", workload="ns/w", uid="u",
                                                               cluster_queue="cq", message="The workload is admitted"),)),
        [(WL_SUBJECT, "admit|e4|c1|ns/w|admit:u:6:1", AdmitWorkload(
            id="admit|e4|c1|ns/w|admit:u:6:1", **COMMON, admission=API_ADMISSION, admitted=True,
            message="The workload is admitted"))],
        [],
        id="checks-ready-sends-the-stored-admission"),
])
def test_each_decision_becomes_a_command_and_an_event(result: CycleResult, commands: list[Any], events: list[Any]) -> None:
    got_commands, got_events, errors = _one(result, admission_of={"ns/w": API_ADMISSION}.get)
    assert (got_commands, got_events, errors) == (commands, events, [])


def test_checks_ready_without_a_known_admission_is_reported() -> None:
    result = CycleResult(cycle=1, checks_ready=(ChecksReadyDecision(id="admit:u:6:1", workload="ns/w", uid="u",
                                                                    cluster_queue="cq", message="m"),))
    assert _one(result) == ([], [], ["checks ready for ns/w but no admission is known for it"])


def _cq_status(reserved: int, active: bool = True) -> ClusterQueueStatus:
    usage = (FlavorUsage(name="default", resources=(ResourceUsage(name="cpu", total=reserved, borrowed=0),)),)
    return ClusterQueueStatus(name="cq", pending_workloads=1, reserving_workloads=2, admitted_workloads=2,
                              flavors_reservation=usage, flavors_usage=usage, active=active, active_reason="Ready",
                              active_message="Can admit new workloads")


def test_only_the_last_status_of_a_round_is_sent_and_transition_time_is_kept() -> None:
    earlier = Condition(type="Active", status="True", reason="Ready", message="old", last_transition_time="2020-01-01T00:00:00Z")
    lq = LocalQueueStatus(namespace="demo", name="lq", pending_workloads=0, reserving_workloads=1, admitted_workloads=1,
                          flavors_reservation=(), flavors_usage=(), active=False, active_reason="Stopped",
                          active_message="LocalQueue is stopped")
    out, errors = plan_outputs(
        [CycleResult(cycle=1, cluster_queues=(_cq_status(1000),)),
         CycleResult(cycle=2, cluster_queues=(_cq_status(2500),), local_queues=(lq,))],
        cluster=C, epoch=4, now=NOW, round_no=9, admission_of=lambda key: None,
        queue_facts={"cq/cq": QueueFacts(3, earlier), "lq/demo/lq": QueueFacts(2, earlier)})
    usage = (api.FlavorUsage(name="default", resources=(api.ResourceUsage(name="cpu", total="2500m", borrowed="0"),)),)
    assert [o.message for o in out.commands] == [
        SetClusterQueueStatus(id="cqstatus|e4|c1|cq|status:9", cluster=C, writer="admission", epoch=4, name="cq",
                              status=api.ClusterQueueStatus(
                                  conditions=(Condition(type="Active", status="True", reason="Ready",
                                                        message="Can admit new workloads",
                                                        last_transition_time="2020-01-01T00:00:00Z",
                                                        observed_generation=3),),
                                  flavors_reservation=usage, flavors_usage=usage, pending_workloads=1,
                                  reserving_workloads=2, admitted_workloads=2)),
        SetLocalQueueStatus(id="lqstatus|e4|c1|demo/lq|status:9", cluster=C, writer="admission", epoch=4,
                            namespace="demo", name="lq", status=api.LocalQueueStatus(
                                conditions=(Condition(type="Active", status="False", reason="Stopped",
                                                      message="LocalQueue is stopped",
                                                      last_transition_time="2023-11-14T22:13:20Z",
                                                      observed_generation=2),),
                                reserving_workloads=1, admitted_workloads=1)),
    ]
    assert (out.events, errors) == ([], [])


@pytest.mark.parametrize("share, want", [(0.0, 0), (0.2, 1), (3.0, 3), (float("inf"), 2**63 - 1)],
                         ids=["zero", "ceil", "whole", "inf"])
def test_weighted_share_as_kueue_writes_it(share: float, want: int) -> None:
    assert weighted_share(share) == want


# --- outcomes -----------------------------------------------------------------------------------------


def outcome(cid: str, epoch: int, applied: bool, reason: OutcomeReason = "", rv: str = "",
            command: CommandType | None = None, target: str = "", cluster: str = C) -> CommandOutcome:
    ns, _, name = target.rpartition("/")
    return CommandOutcome(command_id=cid, cluster=cluster, writer="admission", epoch=epoch, applied=applied,
                          reason=reason, resource_version=rv, command=command, namespace=ns, name=name)


def admit_all(p: Partition) -> list[str]:
    """Run cycles until there is nothing to do; the ids of the quota reservations sent."""
    ids: list[str] = []
    while p.wants_cycle(NOW):
        out, _ = p.plan([p.cycle(NOW)], NOW)
        ids += [o.msg_id for o in out.commands if out.sent[o.msg_id].action == "reserve"]
    return ids


def test_a_refused_admission_gives_the_quota_back() -> None:
    p = partition()
    p.apply_record(workload("a", "10", cpu="2"))
    p.apply_record(workload("b", "11", cpu="1"))
    (first,) = admit_all(p)  # 2 cpu of quota: a takes it all, b waits
    assert p.inflight[first] == Sent("reserve", "demo/a")
    assert p.on_outcome(outcome(first, 7, applied=False, reason="EvictionInProgress")) is True
    (second,) = admit_all(p)  # the quota is free again, and a is tried again
    assert second != first and p.inflight[second] == Sent("reserve", "demo/a") and first not in p.inflight


def test_an_applied_admission_is_not_rolled_back_by_its_own_stale_echo() -> None:
    p = partition()
    p.apply_record(workload("a", "10", cpu="2"))
    (cid,) = admit_all(p)
    assert p.on_outcome(outcome(cid, 7, applied=True, rv="20")) is False
    p.apply_record(workload("a", "15", cpu="2"))  # an update from before the admission landed
    p.apply_record(workload("b", "16", cpu="2"))
    assert admit_all(p) == []  # a still holds the quota


def test_a_stale_epoch_refusal_of_our_own_command_means_we_lost() -> None:
    p = partition()
    p.apply_record(workload("a", "10"))
    (cid,) = admit_all(p)
    with pytest.raises(LostLeadership, match="stale"):
        p.on_outcome(outcome(cid, 7, applied=False, reason="StaleEpoch"))


def test_any_outcome_of_a_newer_leader_means_we_lost() -> None:
    p = partition(epoch=7)
    with pytest.raises(LostLeadership, match="epoch 8"):
        p.on_outcome(outcome(command_id("fence", 8, C, "-", "fence"), 8, applied=True, reason="Fenced"))


def test_an_older_leaders_write_holds_scheduling_until_the_mirror_shows_it() -> None:
    p = partition(epoch=7)
    p.apply_record(workload("a", "10", cpu="2"))
    old = command_id("reserve", 5, C, "demo/a", "reserve:uid-a:10:1")
    p.on_outcome(outcome(old, 5, applied=True, rv="12", command="AdmitWorkload", target="demo/a"))
    assert p.echo_gates == {"demo/a": 12} and not p.wants_cycle(NOW)
    admitted = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                "lastTransitionTime": "2023-11-14T22:10:00Z"}],
                "admission": msgspec.to_builtins(API_ADMISSION)}
    p.apply_record(workload("a", "12", cpu="2", status=admitted))
    assert p.echo_gates == {}
    p.apply_record(workload("b", "13", cpu="1"))
    assert admit_all(p) == []  # a holds 1.5 of 2 cpu (as the old leader admitted it): b does not fit


@pytest.mark.parametrize("out", [
    pytest.param(outcome("r1", 5, True, rv="12", command="AdmitWorkload", target="demo/gone"), id="workload-unknown"),
    pytest.param(outcome("r2", 5, True, rv="9", command="AdmitWorkload", target="demo/a"), id="already-seen"),
    pytest.param(outcome("s1", 5, True, rv="12", command="SetClusterQueueStatus", target="cq"), id="not-a-workload"),
    pytest.param(outcome("r3", 5, True, rv="12", command="AdmitWorkload", target="demo/a", cluster="c2"),
                 id="another-cluster"),
    pytest.param(outcome("someone-else", 5, True, rv="12"), id="says-nothing-of-its-command"),
])
def test_older_writes_that_need_no_wait(out: CommandOutcome) -> None:
    p = partition(epoch=7)
    p.apply_record(workload("a", "10"))
    p.on_outcome(out)
    assert p.echo_gates == {}


def test_older_writes_seen_before_the_replay_are_judged_once_it_caught_up() -> None:
    p = Partition(C, 7, SchedulerConfig())
    for target in ("demo/a", "demo/gone"):
        p.on_outcome(outcome(command_id("reserve", 5, C, target, "d"), 5, applied=True, rv="12",
                             command="EvictWorkload", target=target))
    for rec in [*world(), workload("a", "10")]:
        p.apply_record(rec)
    p.mark_rebuilt()
    assert p.echo_gates == {"demo/a": 12}


# --- fewer writes: superseded and paced pending conditions, batched statuses --------------------------


def _pending(workload: str, n: int, message: str = "insufficient quota") -> PendingDecision:
    return PendingDecision(id=f"pending:{workload}:{n}", workload=workload, uid="u", reason="WaitingForQuota",
                           message=message)


def _admit(workload: str, n: int) -> AdmissionDecision:
    return AdmissionDecision(id=f"reserve:{workload}:{n}", workload=workload, uid="u", resource_version="5",
                             cluster_queue="cq", pod_sets=(PSA,), borrowing=False, admission_checks=(), admitted=True,
                             message="Quota reserved in ClusterQueue cq")


def _plan(results: list[CycleResult]) -> Any:
    out, errors = plan_outputs(results, cluster=C, epoch=4, now=NOW, round_no=1, admission_of=lambda _: None,
                               queue_facts={})
    assert errors == []
    return out


def test_a_pending_condition_superseded_in_the_same_batch_is_not_sent_but_its_event_is() -> None:
    out = _plan([CycleResult(cycle=1, pending=(_pending("ns/a", 1, "first"),)),
                 CycleResult(cycle=2, pending=(_pending("ns/a", 2, "second"),))])
    assert [o.message.message for o in out.commands] == ["second"]
    assert [o.message.message for o in out.events] == ["first", "second"]


def test_reservations_go_before_pending_conditions_of_other_workloads_and_a_workloads_order_is_kept() -> None:
    out = _plan([CycleResult(cycle=1, pending=(_pending("ns/a", 1), _pending("ns/b", 1))),
                 CycleResult(cycle=2, admissions=(_admit("ns/b", 2), _admit("ns/c", 2)))])
    assert [f"{out.sent[o.msg_id].action}:{out.sent[o.msg_id].target}" for o in out.commands] == [
        "pending:ns/b", "reserve:ns/b", "reserve:ns/c", "pending:ns/a"]


def _batch(*decisions: tuple[Action, str, int]) -> Outputs:
    """Commands as plan_outputs makes them: (action, workload, n)."""
    commands, sent = [], {}
    for action, key, n in decisions:
        cid = command_id(action, 4, C, key, f"{action}:{n}")
        ns, name = key.split("/")
        msg = SetWorkloadPending(id=cid, cluster=C, writer="admission", epoch=4, namespace=ns, name=name, uid="u",
                                 reason="Pending", message=str(n))
        commands.append(Outgoing(WL_SUBJECT, msg, cid))
        sent[cid] = Sent(action, key)
    return Outputs(commands, [], sent)


def _ids(out: Outputs) -> list[str]:
    assert set(out.sent) == {o.msg_id for o in out.commands}
    return [f"{out.sent[o.msg_id].action}:{out.sent[o.msg_id].target}:{_pending_text(o)}" for o in out.commands]


def _pending_text(o: Outgoing) -> str:
    assert isinstance(o.message, SetWorkloadPending), o  # _batch sends only pending conditions
    return o.message.message


def test_pending_conditions_are_paced_per_workload() -> None:
    pacer = PendingPacer(0.25)
    assert _ids(pacer.pace(_batch(("pending", "ns/a", 1)), NOW)) == ["pending:ns/a:1"]  # the first: at once
    assert _ids(pacer.pace(_batch(("pending", "ns/a", 2), ("pending", "ns/b", 1)), NOW + 0.1)) == ["pending:ns/b:1"]
    assert _ids(pacer.pace(_batch(("pending", "ns/a", 3)), NOW + 0.2)) == []  # replaces the held one
    assert pacer.next_due() == NOW + 0.25 and not pacer.has_due(NOW + 0.2) and pacer.has_due(NOW + 0.25)
    assert _ids(pacer.pace(_batch(), NOW + 0.25)) == ["pending:ns/a:3"]
    assert pacer.next_due() is None


def test_a_held_pending_condition_goes_out_before_another_command_for_the_workload() -> None:
    pacer = PendingPacer(0.25)
    pacer.pace(_batch(("pending", "ns/a", 1)), NOW)
    assert _ids(pacer.pace(_batch(("pending", "ns/a", 2)), NOW + 0.1)) == []
    assert _ids(pacer.pace(_batch(("reserve", "ns/b", 1), ("reserve", "ns/a", 3)), NOW + 0.1)) == [
        "reserve:ns/b:1", "pending:ns/a:2", "reserve:ns/a:3"]
    assert pacer.next_due() is None


def test_pending_conditions_past_the_in_flight_bound_wait_for_outcomes() -> None:
    pacer = PendingPacer(0.25, max_in_flight=2)
    assert _ids(pacer.pace(_batch(("pending", "ns/a", 1), ("pending", "ns/b", 1), ("pending", "ns/c", 1)), NOW)) == [
        "pending:ns/a:1", "pending:ns/b:1"]
    assert _ids(pacer.pace(_batch(("pending", "ns/c", 2)), NOW + 0.01)) == []  # still full; the newer one is kept
    due = pacer.next_due()
    assert due is not None and _ids(pacer.pace(_batch(), due)) == []  # due, but nothing came back yet
    pacer.settled()
    due = pacer.next_due()
    assert due is not None and _ids(pacer.pace(_batch(), due)) == ["pending:ns/c:2"]
    assert _ids(pacer.pace(_batch(("reserve", "ns/d", 1)), due)) == ["reserve:ns/d:1"]  # others never wait


def test_without_an_interval_nothing_is_held() -> None:
    pacer = PendingPacer(0.0)
    batch = _batch(("pending", "ns/a", 1), ("pending", "ns/a", 2))
    assert pacer.pace(batch, NOW) == batch


def test_queue_statuses_are_reported_at_most_once_per_interval_and_when_due() -> None:
    p = Partition(C, 7, SchedulerConfig(), status_interval_s=0.5)
    for rec in world():
        p.apply_record(rec)
    p.mark_rebuilt()
    first = p.cycle(NOW)
    assert [s.name for s in first.cluster_queues] == ["cq"]
    p.apply_record(workload("a", "10", cpu="1"))  # admitted next cycle: the statuses change
    held = p.cycle(NOW + 0.1)
    assert [a.workload for a in held.admissions] == ["demo/a"] and held.cluster_queues == ()
    assert not p.wants_cycle(NOW + 0.2) and p.next_wakeup() == NOW + 0.5  # nothing to decide, statuses wait
    assert p.wants_cycle(NOW + 0.5)
    due = p.cycle(NOW + 0.5)
    assert [(s.name, s.reserving_workloads) for s in due.cluster_queues] == [("cq", 1)]
    assert [(s.name, s.reserving_workloads) for s in due.local_queues] == [("lq", 1)]
    assert not p.wants_cycle(NOW + 0.6) and p.next_wakeup() is None
