"""The Job integration core: the Workload a Job gets and the next step for each state (table-driven)."""

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
    flavor,
    job,
    merge_apply,
    plain_workload,
    priority_class,
    reserved,
    workload_for,
)

from kq.api import constants as k
from kq.api.core import CoreCondition, Toleration
from kq.api.kueue import AdmissionCheckState, PodSetUpdate, TopologyAssignment
from kq.api.meta import find_condition
from services.watcher.core import job_pods as jp
from services.watcher.core import workload_status as ws
from services.watcher.core.jobs import reconcile_job, reconcile_unowned_workload
from services.watcher.core.writes import Create, Delete, Skip, Write

FLAVORS = {"f1": flavor("f1", {"pool": "a"}, (Toleration(key="dedicated", operator="Equal", value="a", effect="NoSchedule"),))}
J = job()
WL = workload_for(J)
STOPPING = {jp.STOPPING_ANNOTATION: "true"}
DONE = (CoreCondition(type="Complete", status="True", message="done"),)
FAILED = (CoreCondition(type="Failed", status="True", message="BackoffLimitExceeded"),)


def step(s: Any) -> tuple[str, ...]:
    match s:
        case Write():
            return ("write", s.kind, s.subresource or "main")
        case Create():
            return ("create", s.kind)
        case Delete():
            return ("delete", s.kind)
        case Skip():
            return ("skip", s.reason.split(":")[0])
    raise AssertionError(s)


def deleting(wl):
    return replace(wl, metadata=replace(wl.metadata, deletion_timestamp="2026-01-01T00:00:00Z"))


@pytest.mark.parametrize(
    "j,wl,want",
    [
        pytest.param(J, None, ("create", "workload"), id="queued-job-gets-workload"),
        pytest.param(job(queue=None), None, ("skip", "NotQueued"), id="unlabelled-job-ignored"),
        pytest.param(job(labels={k.PRIORITY_CLASS_LABEL: "missing"}), None, ("skip", "CannotCreateWorkload"),
                     id="missing-priority-class-waits"),
        pytest.param(job(suspend=False), None, ("write", "job", "main"), id="running-without-workload-suspended"),
        pytest.param(job(annotations=STOPPING, start_time="t"), None, ("write", "job", "status"), id="stop-resets-start-time"),
        pytest.param(job(annotations=STOPPING), None, ("write", "job", "main"), id="stop-drops-annotation"),
        pytest.param(job(active=1), None, ("skip", "WaitingForPodsToStop"), id="pods-still-active"),
        pytest.param(J, WL, ("skip", "WaitingForAdmission"), id="waiting"),
        pytest.param(J, reserved(WL), ("skip", "WaitingForAdmission"), id="reserved-not-admitted"),
        pytest.param(J, admitted(WL), ("write", "job", "main"), id="admitted-unsuspends"),
        pytest.param(J, admitted(WL, admission(flavor="nope")), ("skip", "FlavorNotFound"), id="flavor-not-seen-yet"),
        pytest.param(job(suspend=False), admitted(WL), ("skip", "Running"), id="running"),
        pytest.param(job(suspend=False), WL, ("write", "job", "main"), id="running-unadmitted-suspended"),
        pytest.param(job(suspend=False), evicted(admitted(WL)), ("write", "job", "main"), id="evicted-suspends"),
        pytest.param(job(active=2), evicted(admitted(WL)), ("skip", "Evicted"), id="evicted-waits-for-pods"),
        pytest.param(J, evicted(admitted(WL)), ("write", "workload", "status"), id="evicted-stopped-releases-quota"),
        pytest.param(J, ws.finish_eviction(evicted(admitted(WL)), NOW), ("skip", "Evicted"), id="eviction-complete"),
        pytest.param(job(suspend=False, conditions=DONE), admitted(WL), ("write", "workload", "status"), id="job-complete"),
        pytest.param(job(conditions=FAILED), admitted(WL), ("write", "workload", "status"), id="job-failed"),
        pytest.param(job(conditions=DONE), finished(admitted(WL)), ("write", "workload", "main"), id="finished-drops-finalizer"),
        pytest.param(job(suspend=False), deleting(admitted(WL)), ("write", "job", "main"), id="deleted-workload-stops-job"),
        pytest.param(J, deleting(WL), ("write", "workload", "main"), id="deleted-workload-released"),
        pytest.param(job(parallelism=5), WL, ("delete", "workload"), id="job-changed-shape"),
        pytest.param(job(queue="other"), WL, ("write", "workload", "main"), id="queue-name-followed"),
    ],
)
def test_next_step(j: Any, wl: Any, want: tuple[str, ...]) -> None:
    assert step(reconcile_job(j, wl, FLAVORS, {}, NOW)) == want


def test_workload_name_matches_kueue() -> None:
    # pkg/controller/jobframework/workload_names_test.go
    assert jp.workload_name("name", "uid") == "job-name-ef3a1"


def test_built_workload_follows_the_job() -> None:
    j = job(parallelism=4, completions=3, labels={k.PRIORITY_CLASS_LABEL: "high"},
            annotations={k.JOB_MIN_PARALLELISM_ANNOTATION: "2"})
    wl = jp.build_workload(j, {"high": priority_class("high", 100)})
    assert wl.metadata.name == jp.workload_name("j1", "job-uid")
    assert wl.metadata.namespace == "ns"
    assert wl.metadata.labels == {k.JOB_UID_LABEL: "job-uid"}
    assert wl.metadata.finalizers == (k.RESOURCE_IN_USE_FINALIZER,)
    ref = wl.metadata.controller_ref()
    assert ref is not None and (ref.kind, ref.name, ref.uid, ref.api_version) == ("Job", "j1", "job-uid", "batch/v1")
    assert wl.spec.queue_name == "lq"
    assert (wl.spec.priority, wl.spec.priority_class_ref.name, wl.spec.priority_class_ref.kind) == (  # type: ignore[union-attr]  # absent fails the test too
        100, "high", "WorkloadPriorityClass")
    (ps,) = wl.spec.pod_sets
    assert (ps.name, ps.count, ps.min_count) == ("main", 3, 2)
    assert "controller-uid" not in ps.template.metadata.labels  # managed labels stay on the Job
    assert ps.template.metadata.labels["batch.kubernetes.io/job-name"] == "j1"
    assert ps.topology_request is not None and ps.topology_request.pod_index_label == jp.JOB_COMPLETION_INDEX_ANNOTATION


def test_tas_annotation_becomes_a_topology_request() -> None:
    j = job()
    t = replace(j.spec.template, metadata=replace(j.spec.template.metadata,
                                                  annotations={k.PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "rack"}))
    wl = jp.build_workload(replace(j, spec=replace(j.spec, template=t)), {})
    req = wl.spec.pod_sets[0].topology_request
    assert req is not None and (req.required, req.preferred) == ("rack", None)


def _run(j, wl, flavors=FLAVORS):
    s = reconcile_job(j, wl, flavors, {}, NOW)
    assert isinstance(s, Write), s
    return s


def test_start_merges_flavor_directives() -> None:
    j = job(node_selector={"zone": "z1"})
    s = _run(j, admitted(workload_for(j)))
    started = merge_apply(j, s.patch)
    assert started.spec.suspend is False
    tpl = started.spec.template
    assert tpl.spec.node_selector == {"zone": "z1", "pool": "a"}
    assert tpl.spec.tolerations == FLAVORS["f1"].spec.tolerations
    assert tpl.metadata.labels[jp.PODSET_LABEL] == "main"
    assert started.spec.parallelism == 2  # no partial admission: untouched
    assert msgspec.json.decode(s.patch)["metadata"]["resourceVersion"] == "10"


def test_partial_admission_sets_parallelism() -> None:
    j = job(parallelism=4, annotations={k.JOB_MIN_PARALLELISM_ANNOTATION: "1"})
    s = _run(j, admitted(workload_for(j), admission(count=3)))
    assert merge_apply(j, s.patch).spec.parallelism == 3


def test_topology_assignment_gates_pods() -> None:
    j = job()
    adm = admission(topology_assignment=TopologyAssignment(levels=("rack",)))
    wl = admitted(workload_for(j), adm)
    t = merge_apply(j, _run(j, wl).patch).spec.template
    assert [g.name for g in t.spec.scheduling_gates] == [k.TOPOLOGY_SCHEDULING_GATE]
    assert t.metadata.annotations[k.WORKLOAD_ANNOTATION] == wl.metadata.name


def test_conflicting_admission_check_update_fails_the_workload() -> None:
    j = job(node_selector={"pool": "b"})  # the flavor wants pool=a
    s = _run(j, admitted(workload_for(j)))
    assert s.kind == "workload" and s.subresource == "status"
    fin = find_condition(merge_apply(admitted(workload_for(j)), s.patch).status.conditions, k.WORKLOAD_FINISHED)
    assert fin is not None and fin.reason == "FailedToStart"


def test_admission_check_pod_set_updates_are_merged() -> None:
    j = job()
    wl = admitted(workload_for(j))
    wl = replace(wl, status=replace(wl.status, admission_checks=(AdmissionCheckState(
        name="ac", state="Ready", pod_set_updates=(PodSetUpdate(name="main", node_selector={"gpu": "yes"}),)),)))
    t = merge_apply(j, _run(j, wl).patch).spec.template
    assert t.spec.node_selector == {"pool": "a", "gpu": "yes"}


def test_eviction_handshake_converges() -> None:
    """Run -> Evicted: suspend, reset start time, restore the template, then release the quota."""
    j0 = job(node_selector={"zone": "z1"})
    wl = admitted(workload_for(j0))
    j = merge_apply(j0, _run(j0, wl).patch)  # started
    j = replace(j, status=replace(j.status, active=2, start_time="2026-01-01T00:00:05Z"))
    wl = evicted(wl)
    seen = []
    for _ in range(10):
        s = reconcile_job(j, wl, FLAVORS, {}, NOW)
        seen.append(step(s))
        if isinstance(s, Skip):
            j = replace(j, status=replace(j.status, active=0))  # the Job controller deletes the pods
            s = reconcile_job(j, wl, FLAVORS, {}, NOW)
            seen.append(step(s))
        if isinstance(s, Skip):
            break
        assert isinstance(s, Write)
        if s.kind == "job":
            j = merge_apply(j, s.patch)
        else:
            wl = merge_apply(wl, s.patch)
    assert seen == [
        ("write", "job", "main"),  # suspend + stopping annotation
        ("write", "job", "status"),  # startTime reset
        ("write", "job", "main"),  # template restored, annotation dropped
        ("skip", "Evicted"), ("write", "workload", "status"),  # pods gone: quota released
        ("skip", "Evicted"), ("skip", "Evicted"),
    ]
    assert j.spec.suspend is True and j.spec.template.spec.node_selector == {"zone": "z1"}
    assert jp.STOPPING_ANNOTATION not in j.metadata.annotations
    assert j.spec.template.metadata.labels.get("controller-uid") == "job-uid"  # managed label kept
    assert wl.status.admission is None and not ws.has_quota_reservation(wl)


PREBUILT = {k.PREBUILT_WORKLOAD_LABEL: "remote-wl"}


def prebuilt_for(j, **kw):
    """A Workload built by someone else (the MultiKueue dispatcher) for Job j, not yet owned by it."""
    wl = workload_for(j, **kw)
    return replace(wl, metadata=replace(wl.metadata, name="remote-wl", owner_references=(), labels={}))


def adopted(wl, j):
    return jp.with_owner(wl, j)


PJ = job(labels=PREBUILT)


@pytest.mark.parametrize(
    "j,wl,want",
    [
        pytest.param(PJ, None, ("skip", "PrebuiltWorkloadNotFound"), id="waits-for-prebuilt"),
        pytest.param(job(labels=PREBUILT, suspend=False), None, ("write", "job", "main"), id="stopped-until-prebuilt"),
        pytest.param(PJ, prebuilt_for(PJ), ("write", "workload", "main"), id="adopts-prebuilt"),
        pytest.param(PJ, adopted(prebuilt_for(job(uid="other")), job(uid="other")), ("skip", "PrebuiltWorkloadNotFound"),
                     id="prebuilt-controlled-by-another"),
        pytest.param(job(labels=PREBUILT, parallelism=7), adopted(prebuilt_for(PJ), job(labels=PREBUILT, parallelism=7)),
                     ("write", "workload", "status"), id="prebuilt-out-of-sync-finished"),
        pytest.param(PJ, adopted(prebuilt_for(PJ), PJ), ("skip", "WaitingForAdmission"), id="prebuilt-waits"),
        pytest.param(PJ, admitted(adopted(prebuilt_for(PJ), PJ)), ("write", "job", "main"), id="prebuilt-admitted-starts"),
    ],
)
def test_prebuilt_workload(j: Any, wl: Any, want: tuple[str, ...]) -> None:
    assert step(reconcile_job(j, wl, FLAVORS, {}, NOW)) == want


def test_adopting_a_prebuilt_workload_makes_the_job_its_controller() -> None:
    wl = prebuilt_for(PJ)
    s = reconcile_job(PJ, wl, FLAVORS, {}, NOW)
    assert isinstance(s, Write)
    got = merge_apply(wl, s.patch)
    assert jp.owned_by(got, PJ) and got.metadata.labels[k.JOB_UID_LABEL] == "job-uid"


@pytest.mark.parametrize(
    "wl,want",
    [
        pytest.param(plain_workload(), ("skip", "Idle"), id="pending"),
        pytest.param(evicted(admitted(plain_workload())), ("write", "workload", "status"), id="evicted-releases-at-once"),
        pytest.param(finished(plain_workload()), ("skip", "Finished"), id="finished"),
        pytest.param(deleting(WL), ("write", "workload", "main"), id="orphan-deleted-released"),
    ],
)
def test_unowned_workload(wl: Any, want: tuple[str, ...]) -> None:
    assert step(reconcile_unowned_workload(wl, NOW)) == want
