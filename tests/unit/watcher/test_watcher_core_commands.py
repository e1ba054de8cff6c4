"""plan_command: what each command means for the object as it is (table-driven)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from msgspec.structs import replace
from unit.watcher.watcher_builders import (
    NOW,
    admission,
    admitted,
    evicted,
    finished,
    merge_apply,
    plain_workload,
    reserved,
)

from kq.api import constants as k
from kq.api.kueue import ClusterQueue, ClusterQueueStatus, LocalQueue, LocalQueueStatus, Workload
from kq.api.meta import ObjectMeta, find_condition
from kq.messages import (
    AdmitWorkload,
    DeactivateWorkload,
    EvictWorkload,
    Fence,
    SetClusterQueueStatus,
    SetLocalQueueStatus,
    SetWorkloadPending,
)
from services.watcher.core import workload_status as ws
from services.watcher.core.commands import plan_command
from services.watcher.core.writes import Delete, Refusal, Skip, Write

_C: dict[str, Any] = {"cluster": "c", "writer": "admission"}
_W = {**_C, "namespace": "ns", "name": "w1", "uid": "wl-uid"}


def admit(adm=None, **kw) -> AdmitWorkload:
    return AdmitWorkload(id="a", admission=adm or admission(), **{**_W, **kw})


def evict(**kw) -> EvictWorkload:
    return EvictWorkload(id="e", reason=k.EVICTED_BY_PREEMPTION, message="preempted by ns/high",
                         preemption_reason="InClusterQueue", **{**_W, **kw})


def pending(**kw) -> SetWorkloadPending:
    return SetWorkloadPending(id="p", reason="Pending", message="insufficient quota", **{**_W, **kw})


def deactivate(**kw) -> DeactivateWorkload:
    return DeactivateWorkload(id="d", reason="DeactivatedDueToRequeuingLimitExceeded", message="too many", **{**_W, **kw})


WL = plain_workload()
INACTIVE = replace(WL, spec=replace(WL.spec, active=False))
DELETING = replace(WL, metadata=replace(WL.metadata, deletion_timestamp="2026-01-01T00:00:00Z"))


def outcome(plan: Any) -> tuple[str, str]:
    match plan:
        case Write():
            return ("write", plan.subresource or "main")
        case Skip():
            return ("skip", plan.reason)
        case Refusal():
            return ("refuse", plan.reason)
    raise AssertionError(plan)


@pytest.mark.parametrize(
    "cmd,current,max_epoch,want",
    [
        pytest.param(admit(), WL, 0, ("write", "status"), id="admit-pending"),
        pytest.param(admit(epoch=3), WL, 4, ("refuse", "StaleEpoch"), id="admit-stale-epoch"),
        pytest.param(admit(epoch=4), WL, 4, ("write", "status"), id="admit-current-epoch"),
        pytest.param(admit(), None, 0, ("refuse", "NotFound"), id="admit-gone"),
        pytest.param(admit(uid="other"), WL, 0, ("refuse", "UidMismatch"), id="admit-other-incarnation"),
        pytest.param(admit(), finished(WL), 0, ("refuse", "Finished"), id="admit-finished"),
        pytest.param(admit(), INACTIVE, 0, ("refuse", "Inactive"), id="admit-inactive"),
        pytest.param(admit(), DELETING, 0, ("refuse", "Deleting"), id="admit-deleting"),
        pytest.param(admit(), admitted(WL), 0, ("skip", "AlreadyApplied"), id="admit-duplicate"),
        pytest.param(admit(admission("cq2")), admitted(WL), 0, ("refuse", "AlreadyAdmitted"), id="admit-other-admission"),
        pytest.param(admit(), reserved(WL), 0, ("write", "status"), id="admit-checks-now-ready"),
        pytest.param(admit(), evicted(admitted(WL)), 0, ("refuse", "EvictionInProgress"), id="admit-while-evicting"),
        pytest.param(admit(), ws.finish_eviction(evicted(admitted(WL)), NOW), 0, ("write", "status"),
                     id="readmit-after-eviction"),
        pytest.param(admit(admitted=False), reserved(WL), 0, ("skip", "AlreadyApplied"), id="reserve-duplicate"),
        pytest.param(evict(), admitted(WL), 0, ("write", "status"), id="evict-admitted"),
        pytest.param(evict(), evicted(admitted(WL)), 0, ("skip", "AlreadyEvicted"), id="evict-duplicate"),
        pytest.param(evict(), WL, 0, ("refuse", "NotAdmitted"), id="evict-pending"),
        pytest.param(evict(), finished(admitted(WL)), 0, ("refuse", "Finished"), id="evict-finished"),
        pytest.param(evict(uid="x"), admitted(WL), 0, ("refuse", "UidMismatch"), id="evict-uid"),
        pytest.param(pending(), WL, 0, ("write", "status"), id="pending-new-reason"),
        pytest.param(pending(), ws.set_pending(WL, "Pending", "insufficient quota", NOW), 0, ("skip", "Unchanged"),
                     id="pending-identical"),
        pytest.param(pending(), admitted(WL), 0, ("refuse", "QuotaReserved"), id="pending-but-admitted"),
        pytest.param(deactivate(), WL, 0, ("write", "main"), id="deactivate-spec-first"),
        pytest.param(deactivate(), INACTIVE, 0, ("write", "status"), id="deactivate-then-evicted"),
        pytest.param(deactivate(), evicted(INACTIVE), 0, ("skip", "AlreadyApplied"), id="deactivate-done"),
        pytest.param(Fence(id="f", epoch=5, **_C), None, 4, ("skip", "Fenced"), id="fence-newer"),
        pytest.param(Fence(id="f", epoch=3, **_C), None, 4, ("refuse", "StaleEpoch"), id="fence-older"),
    ],
)
def test_plan_outcome(cmd: Any, current: Workload | None, max_epoch: int, want: tuple[str, str]) -> None:
    assert outcome(plan_command(cmd, current, max_epoch, NOW)) == want


def _apply(current: Workload, plan: Write | Delete | Skip | Refusal) -> Workload:
    assert isinstance(plan, Write), plan
    return merge_apply(current, plan.patch)


def test_admit_sets_admission_and_conditions() -> None:
    plan = plan_command(admit(), WL, 0, NOW)
    assert isinstance(plan, Write)
    wl = _apply(WL, plan)
    assert wl.status.admission == admission()
    qr = find_condition(wl.status.conditions, k.WORKLOAD_QUOTA_RESERVED)
    assert qr is not None and (qr.status, qr.reason, qr.message) == ("True", "QuotaReserved", "Quota reserved in ClusterQueue cq")
    assert ws.is_admitted(wl)
    # Planning again on the result converges: the command is applied.
    assert outcome(plan_command(admit(), wl, 0, NOW)) == ("skip", "AlreadyApplied")


def test_admit_with_checks_reserves_quota_and_adds_pending_check_states() -> None:
    plan = plan_command(admit(admitted=False, admission_checks=("prov", "mk")), WL, 0, NOW)
    assert isinstance(plan, Write)
    wl = _apply(WL, plan)
    assert ws.has_quota_reservation(wl) and not ws.is_admitted(wl)
    assert [(c.name, c.state) for c in wl.status.admission_checks] == [("mk", "Pending"), ("prov", "Pending")]
    # The check controllers' states are theirs: admitting once they are Ready keeps them.
    ready = replace(wl, status=replace(wl.status, admission_checks=tuple(
        replace(c, state="Ready") for c in wl.status.admission_checks)))
    done = _apply(ready, plan_command(admit(admission_checks=("prov", "mk")), ready, 0, NOW))
    assert ws.is_admitted(done) and {c.state for c in done.status.admission_checks} == {"Ready"}


def test_evict_sets_evicted_and_preempted_and_counts() -> None:
    wl = admitted(WL)
    plan = plan_command(evict(), wl, 0, NOW)
    assert isinstance(plan, Write)
    out = _apply(wl, plan)
    ev = find_condition(out.status.conditions, k.WORKLOAD_EVICTED)
    pre = find_condition(out.status.conditions, k.WORKLOAD_PREEMPTED)
    assert ev is not None and (ev.status, ev.reason) == ("True", "Preempted")
    assert pre is not None and (pre.status, pre.reason, pre.message) == ("True", "InClusterQueue", "preempted by ns/high")
    assert [(e.reason, e.count) for e in out.status.scheduling_stats.evictions] == [("Preempted", 1)]  # type: ignore[union-attr]  # absent fails the test too
    assert out.status.admission is not None  # released by the job integration once the job stopped
    assert outcome(plan_command(evict(), out, 0, NOW)) == ("skip", "AlreadyEvicted")


def test_deactivate_converges_in_two_writes() -> None:
    first = plan_command(deactivate(), WL, 0, NOW)
    assert isinstance(first, Write)
    wl = _apply(WL, first)
    assert wl.spec.active is False
    second = plan_command(deactivate(), wl, 0, NOW)
    assert isinstance(second, Write) and second.subresource == "status"
    wl = _apply(wl, second)
    ev = find_condition(wl.status.conditions, k.WORKLOAD_EVICTED)
    assert ev is not None and ev.reason == "DeactivatedDueToRequeuingLimitExceeded"
    assert [(e.reason, e.underlying_cause) for e in wl.status.scheduling_stats.evictions] == [  # type: ignore[union-attr]  # absent fails the test too
        ("Deactivated", "RequeuingLimitExceeded")]
    assert outcome(plan_command(deactivate(), wl, 0, NOW)) == ("skip", "AlreadyApplied")


def _cq(status: ClusterQueueStatus) -> ClusterQueue:
    return ClusterQueue(metadata=ObjectMeta(name="cq", uid="u", resource_version="3"), status=status)


def test_cluster_queue_status_written_only_when_different() -> None:
    status = ClusterQueueStatus(pending_workloads=2, admitted_workloads=1)
    cmd = SetClusterQueueStatus(id="s", name="cq", status=status, **_C)
    plan = plan_command(cmd, _cq(ClusterQueueStatus()), 0, NOW)
    assert isinstance(plan, Write) and plan.subresource == "status"
    body = msgspec.json.decode(plan.patch)
    assert body["status"] == {"pendingWorkloads": 2, "admittedWorkloads": 1}
    assert outcome(plan_command(cmd, _cq(status), 0, NOW)) == ("skip", "Unchanged")
    assert outcome(plan_command(cmd, None, 0, NOW)) == ("refuse", "NotFound")


def test_local_queue_status_resets_to_zero() -> None:
    lq = LocalQueue(metadata=ObjectMeta(name="lq", namespace="ns", uid="u", resource_version="3"),
                    status=LocalQueueStatus(pending_workloads=4))
    cmd = SetLocalQueueStatus(id="s", namespace="ns", name="lq", status=LocalQueueStatus(), **_C)
    plan = plan_command(cmd, lq, 0, NOW)
    assert isinstance(plan, Write)
    assert msgspec.json.decode(plan.patch)["status"] == {"pendingWorkloads": 0}


def test_replace_topology_rewrites_only_the_assignment_and_clears_unhealthy_nodes() -> None:
    from kq.api.topology import TopologyDomain, compact_topology_assignment
    from kq.api.workload import UnhealthyNode

    old_ta = compact_topology_assignment(("kubernetes.io/hostname",), [TopologyDomain(("x1",), 1)])
    new_ta = compact_topology_assignment(("kubernetes.io/hostname",), [TopologyDomain(("x2",), 1)])
    current = admitted(WL, admission(topology_assignment=old_ta))
    current = replace(current, status=replace(current.status, unhealthy_nodes=(UnhealthyNode(name="x1"),)))
    plan = plan_command(admit(admission(topology_assignment=new_ta), replace_topology=True), current, 0, NOW)
    wl = _apply(current, plan)
    assert wl.status.admission == admission(topology_assignment=new_ta) and wl.status.unhealthy_nodes == ()
    assert wl.status.conditions == current.status.conditions
    assert outcome(plan_command(admit(admission(topology_assignment=new_ta), replace_topology=True), wl, 0, NOW)) \
        == ("skip", "AlreadyApplied")
    # Another reservation is never rewritten this way.
    assert outcome(plan_command(admit(admission("cq2", topology_assignment=new_ta), replace_topology=True),
                                current, 0, NOW)) == ("refuse", "AlreadyAdmitted")
