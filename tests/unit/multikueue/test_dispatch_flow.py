"""core.flow.reconcile: one manager workload against its copies (table-driven, Kueue's rules)."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace
from unit.multikueue.mk_builders import SETTINGS, cond, copy, inputs, job, jobset, local, with_owner

from kq.api import constants as k
from kq.api.core import CoreCondition, JobSetStatus, JobStatus, ReplicatedJobStatus
from kq.api.kueue import Admission, PodSetAssignment, Workload
from kq.api.meta import OwnerReference
from kq.api.workload import TopologyAssignment
from services.dispatcher.core.copies import remote_copy
from services.dispatcher.core.flow import reconcile
from services.dispatcher.core.guard import expired_copies
from services.dispatcher.core.model import (
    FINISH_HOLD_S,
    FINISH_UNSYNCED_S,
    LEASE_ANNOTATION,
    ClusterView,
    Finish,
    Nominate,
    Plan,
    SetCheck,
    SyncJob,
)


def _first_check(plan: Plan) -> SetCheck:
    first = plan.manager[0]
    assert isinstance(first, SetCheck), plan.manager
    return first


def test_all_at_once_nominates_every_reachable_worker_and_copies_there() -> None:
    clusters = (ClusterView(name="w1", available=True), ClusterView(name="w2", available=True),
                ClusterView(name="w3", available=False))
    plan = reconcile(inputs(local(), clusters=clusters), SETTINGS)
    assert plan.manager == (Nominate(clusters=("w1", "w2")),)
    assert plan.create == ("w1", "w2") and plan.delete == () and plan.create_job is None


def test_first_admitted_copy_wins_others_go_job_only_on_winner() -> None:
    remotes = {"w1": copy(admitted_at="2026-01-01T00:00:05Z"), "w2": copy(admitted_at="2026-01-01T00:00:03Z")}
    plan = reconcile(inputs(local(nominated=("w1", "w2")), remotes=remotes), SETTINGS)
    assert plan.delete == ("w1",) and plan.create_job == "w2" and plan.create == ()
    assert plan.manager == (SetCheck(state="Ready", message='The workload was admitted on "w2"', cluster_name="w2"),)


def test_a_cluster_already_running_our_job_stays_the_winner() -> None:
    # A restart between creating the Job and recording clusterName must not start a second Job.
    remotes = {"w1": copy(admitted_at="2026-01-01T00:00:05Z"), "w2": copy(admitted_at="2026-01-01T00:00:03Z")}
    plan = reconcile(inputs(local(), remotes=remotes, jobs={"w1": job()}), SETTINGS)
    assert plan.delete == ("w2",) and plan.create_job is None


def test_cluster_name_is_final_even_if_another_copy_was_admitted_earlier() -> None:
    remotes = {"w1": copy(admitted_at="2026-01-01T00:00:01Z"), "w2": copy(admitted_at="2026-01-01T00:00:09Z")}
    plan = reconcile(inputs(local(state="Ready", cluster="w2"), remotes=remotes, jobs={"w2": job()}), SETTINGS)
    assert plan.delete == ("w1",) and plan.create_job is None and plan.manager == ()


def test_running_job_status_is_copied_back_once_the_manager_job_runs() -> None:
    running = JobStatus(active=1, ready=1)
    inp = inputs(local(state="Ready", cluster="w1"), remotes={"w1": copy(admitted_at=T)}, jobs={"w1": job(status=running)},
                 local_job=job(suspend=False))
    assert reconcile(inp, SETTINGS).manager == (SyncJob(status=running),)
    suspended = replace(inp, local_job=job(suspend=True))
    assert reconcile(suspended, SETTINGS).manager == ()  # deferred while the manager Job is suspended


def test_finished_job_status_is_copied_back_and_finishes_the_workload_suspended_or_not() -> None:
    """Kueue's determineStatusUpdate: a finished worker Job's status goes to the manager's at once,
    suspended or not, before the copy finishes; and the Workload is finished in the same turn, with
    the reason and message its integrations give (not before its check is Ready on the winner)."""
    inp = inputs(local(state="Ready", cluster="w1"), remotes={"w1": copy(admitted_at=T)}, local_job=job(suspend=True))
    for kind, reason in (("Complete", "Succeeded"), ("Failed", "Failed")):
        done = JobStatus(succeeded=1, conditions=(CoreCondition(type=kind, status="True", message="it ended"),))
        ended = replace(inp, remote_jobs={"w1": job(suspend=False, status=done)})
        assert reconcile(ended, SETTINGS).manager == (SyncJob(status=done), Finish(reason=reason, message="it ended"))
        not_ready = reconcile(replace(ended, local=local(state="Pending")), SETTINGS)
        assert _first_check(not_ready).state == "Ready" and not_ready.manager[1:] == (SyncJob(status=done),)
    js = with_owner(replace(inp, local_job=jobset(suspend=True)), (JOBSET_API, "JobSet"))
    running = JobSetStatus(replicated_jobs_status=(ReplicatedJobStatus(name="workers", active=1),))
    assert reconcile(replace(js, remote_jobs={"w1": jobset(suspend=False, status=running)}), SETTINGS).manager == ()
    done_js = JobSetStatus(conditions=(cond("Completed", message="jobset done"),))
    assert reconcile(replace(js, remote_jobs={"w1": jobset(suspend=False, status=done_js)}), SETTINGS).manager == (
        SyncJob(status=done_js), Finish(reason="Succeeded", message="jobset done"))


T = "2026-01-01T00:00:02Z"


def test_finished_copy_finishes_the_manager_workload_with_its_reason() -> None:
    failed = cond(k.WORKLOAD_FINISHED, reason="Failed", message="Job failed")
    done = JobStatus(failed=1, conditions=())
    inp = inputs(local(state="Ready", cluster="w1"), remotes={"w1": copy(admitted_at=T, finished=failed)},
                 jobs={"w1": job(status=done)}, finish_held_since=100.0 - FINISH_UNSYNCED_S)
    plan = reconcile(inp, SETTINGS)
    assert plan.manager == (SyncJob(status=done), Finish(reason="Failed", message="Job failed"))


def test_finish_waits_for_the_manager_job_to_finish_its_workload_then_is_sent() -> None:
    """The manager Job gets the worker's status and its integration finishes the Workload from
    that update: the Finish is held FINISH_HOLD_S from the moment the manager Job shows the status,
    then sent (the fallback); FINISH_UNSYNCED_S after the copy finished should it never show."""
    ok = cond(k.WORKLOAD_FINISHED, reason="Succeeded", message="done")
    done = JobStatus(succeeded=1)
    inp = inputs(local(state="Ready", cluster="w1"), remotes={"w1": copy(admitted_at=T, finished=ok)},
                 jobs={"w1": job(status=done)}, local_job=job(suspend=False))
    no_job = reconcile(replace(inp, remote_jobs={}), SETTINGS)  # nothing to sync a status from: at once
    assert no_job.manager == (Finish(reason="Succeeded", message="done"),) and not no_job.hold_finish
    held = reconcile(inp, SETTINGS)
    assert held.manager == (SyncJob(status=done),) and held.hold_finish and not held.finish_synced
    assert held.wake_in == FINISH_UNSYNCED_S
    # The status has not landed on the manager yet (a loaded watcher): no Finish to race its integration.
    slow = reconcile(replace(inp, finish_held_since=inp.now - FINISH_HOLD_S - 1.0), SETTINGS)
    assert slow.manager == (SyncJob(status=done),) and slow.hold_finish
    synced = replace(inp, local_job=job(suspend=False, status=done), finish_held_since=inp.now - 5.0)
    landed = reconcile(synced, SETTINGS)
    assert landed.manager == () and landed.hold_finish and landed.finish_synced and landed.wake_in == FINISH_HOLD_S
    again = reconcile(replace(synced, finish_synced_since=inp.now - 1.0), SETTINGS)
    assert again.manager == () and again.hold_finish and again.wake_in is not None
    assert abs(again.wake_in - (FINISH_HOLD_S - 1.0)) < 1e-9
    late = reconcile(replace(synced, finish_synced_since=inp.now - FINISH_HOLD_S), SETTINGS)
    assert late.manager == (Finish(reason="Succeeded", message="done"),) and not late.hold_finish
    never = reconcile(replace(inp, finish_held_since=inp.now - FINISH_UNSYNCED_S), SETTINGS)
    assert never.manager == (SyncJob(status=done), Finish(reason="Succeeded", message="done"))


def test_finished_or_evicted_manager_workload_removes_every_copy() -> None:
    remotes = {"w1": copy(admitted_at=T), "w2": copy(pending="no quota")}
    for wl in (local(conds=(cond(k.WORKLOAD_FINISHED, reason="Succeeded"),)),
               local(conds=(cond(k.WORKLOAD_EVICTED, reason="Preempted"),)),
               local(reserved=False)):
        plan = reconcile(inputs(wl, remotes=remotes), SETTINGS)
        assert plan.delete == ("w1", "w2") and plan.create == () and plan.create_job is None


def test_evicted_manager_job_loses_its_synced_active_pods() -> None:
    wl = local(conds=(cond(k.WORKLOAD_EVICTED, reason="Preempted"),))
    plan = reconcile(inputs(wl, local_job=job(suspend=True, status=JobStatus(active=1, ready=1))), SETTINGS)
    assert plan.manager == (SyncJob(status=JobStatus(active=0, ready=0, terminating=0)),)


def test_lost_winner_is_waited_for_then_retried() -> None:
    lost = (ClusterView(name="w1", available=False, lost_since=95.0), ClusterView(name="w2", available=True))
    wl = local(state="Ready", cluster="w1")
    waiting = reconcile(inputs(wl, clusters=lost, now=100.0), SETTINGS)
    assert waiting.manager == () and waiting.wake_in == 5.0
    past = reconcile(inputs(wl, clusters=lost, now=105.5), SETTINGS)
    assert past.manager == (SetCheck(state="Retry", message="Admitting remote lost"),)


def test_reachable_winner_without_its_copy_is_retried_at_once() -> None:
    plan = reconcile(inputs(local(state="Ready", cluster="w1")), SETTINGS)
    assert plan.manager == (SetCheck(state="Retry", message="Admitting remote no longer exists"),)


def test_evicted_on_the_worker_resets_for_readmission() -> None:
    inp = inputs(local(state="Ready", cluster="w1"), remotes={"w1": copy(admitted_at=T, evicted=True)})
    assert _first_check(reconcile(inp, SETTINGS)).state == "Retry"


def test_copy_of_an_older_incarnation_is_removed() -> None:
    plan = reconcile(inputs(local(nominated=("w1", "w2")), remotes={"w1": copy(origin_uid="old")}), SETTINGS)
    assert "w1" in plan.delete and "w1" in plan.create


def test_incremental_rounds() -> None:
    s = replace(SETTINGS, mode="Incremental", step_size=1, round_timeout_s=5.0)
    first = reconcile(inputs(local()), s)
    assert first.manager == (Nominate(clusters=("w1",)),) and first.create == ("w1",) and first.round_started == 100.0
    # Our nomination not visible yet: kept, not shrunk; the round is not over.
    mid = reconcile(inputs(local(), round_started=100.0, round_nominated=("w1",), now=102.0), s)
    assert mid.delete == () and mid.manager == () and mid.wake_in == 3.0
    later = reconcile(inputs(local(nominated=("w1",)), round_started=100.0, round_nominated=("w1",), now=105.0,
                             remotes={"w1": copy(pending="no quota")}), s)
    assert Nominate(clusters=("w1", "w2")) in later.manager and later.create == ("w2",)


def test_external_waits_for_a_nomination_and_follows_it() -> None:
    s = replace(SETTINGS, mode="External")
    idle = reconcile(inputs(local()), s)
    assert idle.awaiting_nomination and idle.create == () and idle.manager == ()
    nominated = reconcile(inputs(local(nominated=("w2",)), remotes={"w1": copy()}), s)
    assert nominated.create == ("w2",) and nominated.delete == ("w1",)


def test_workers_pending_reason_shows_on_the_manager() -> None:
    plan = reconcile(inputs(local(nominated=("w1", "w2")), remotes={"w1": copy(pending="LocalQueue lq doesn't exist")}),
                     SETTINGS)
    assert plan.create == ("w2",)
    assert SetCheck(state="Pending", message="w1: LocalQueue lq doesn't exist") in plan.manager


def test_no_adapter_or_unmanaged_job_is_rejected() -> None:
    assert _first_check(reconcile(with_owner(inputs(local()), None), SETTINGS)).state == "Rejected"
    assert "Kind=Foo" in _first_check(reconcile(with_owner(inputs(local()), ("example.com/v1", "Foo")),
                                                SETTINGS)).message
    # A kind MultiKueue runs, but its integration is off: no adapter, as in Kueue.
    no_pytorch = replace(SETTINGS, kinds=("job", "jobset"))
    assert "PyTorchJob" in _first_check(reconcile(with_owner(inputs(local()), ("kubeflow.org/v1", "PyTorchJob")),
                                                  no_pytorch)).message
    js_unmanaged = with_owner(inputs(local(), local_job=jobset(managed=False)), (JOBSET_API, "JobSet"))
    assert "managedBy" in _first_check(reconcile(js_unmanaged, SETTINGS)).message
    unmanaged = _first_check(reconcile(inputs(local(), local_job=job(managed=False)), SETTINGS))
    assert unmanaged.state == "Rejected" and "managedBy" in unmanaged.message


def test_rejected_check_does_nothing() -> None:
    plan = reconcile(inputs(local(state="Rejected"), remotes={"w1": copy()}), SETTINGS)
    assert plan.create == () and plan.delete == () and plan.manager == ()


def test_winner_copy_gets_the_managers_lease_renewed_ahead() -> None:
    inp = inputs(local(state="Ready", cluster="w1"), remotes={"w1": copy(admitted_at=T)}, jobs={"w1": job()}, now=100.0)
    assert reconcile(inp, SETTINGS).renew_lease is None  # workerLostTimeout 10s: too short for a lease
    s = replace(SETTINGS, worker_lost_timeout_s=16.0)  # lease 12 s ahead, renewed every 2 s
    plan = reconcile(inp, s)
    assert plan.renew_lease == ("w1", 112.0) and plan.wake_in == 2.0
    fresh = copy(admitted_at=T)
    fresh = replace(fresh, metadata=replace(fresh.metadata, annotations={
        **fresh.metadata.annotations, LEASE_ANNOTATION: "1970-01-01T00:01:51Z"}))  # 111 s
    assert reconcile(replace(inp, remotes={"w1": fresh}), s).renew_lease is None
    assert reconcile(replace(inp, remotes={"w1": fresh}, now=101.5), s).renew_lease == ("w1", 113.5)


def test_guard_stops_only_reserved_copies_whose_lease_ran_out() -> None:
    running_job = OwnerReference(api_version="batch/v1", kind="Job", name="j1", uid="rj", controller=True)

    def leased(until: str, **kw: Any) -> Workload:
        wl = copy(admitted_at=T, **kw)
        return replace(wl, metadata=replace(wl.metadata, annotations={LEASE_ANNOTATION: until},
                                            owner_references=(running_job,)))

    now = 100.0
    old, fresh = leased("1970-01-01T00:01:39Z"), leased("1970-01-01T00:01:41Z")
    done = leased("1970-01-01T00:01:39Z", finished=cond(k.WORKLOAD_FINISHED, reason="Succeeded"))
    stopped = replace(old, spec=replace(old.spec, active=False))
    unleased = copy(admitted_at=T)
    no_job = replace(old, metadata=replace(old.metadata, owner_references=()))  # a copy that did not win
    assert expired_copies([old, fresh, done, stopped, unleased, no_job], now) == [old]


def test_finished_before_its_cluster_was_recorded_records_it_then_finishes() -> None:
    ok = cond(k.WORKLOAD_FINISHED, reason="Succeeded", message="done")
    inp = inputs(local(state="Pending"), remotes={"w2": copy(admitted_at=T, finished=ok)}, jobs={"w2": job()},
                 finish_held_since=100.0 - FINISH_HOLD_S, finish_synced_since=100.0 - FINISH_HOLD_S)
    plan = reconcile(inp, SETTINGS)
    assert plan.manager[0] == SetCheck(state="Ready", message='The workload was admitted on "w2"', cluster_name="w2")
    assert plan.manager[-1] == Finish(reason="Succeeded", message="done")


JOBSET_API = "jobset.x-k8s.io/v1alpha2"


def test_jobset_runs_on_the_winner_and_its_status_comes_back() -> None:
    """Kueue's JobSet MultiKueue adapter: the same flow as a Job, the JobSet's status copied back."""
    inp = with_owner(inputs(local(), remotes={"w1": copy(admitted_at=T)}, local_job=jobset()), (JOBSET_API, "JobSet"))
    plan = reconcile(inp, SETTINGS)
    assert plan.create_job == "w1" and _first_check(plan).state == "Ready"
    running = JobSetStatus(replicated_jobs_status=(ReplicatedJobStatus(name="workers", active=1, ready=1),))
    ready = replace(inp, local=local(state="Ready", cluster="w1"), local_job=jobset(suspend=False),
                    remote_jobs={"w1": jobset(status=running)})
    assert reconcile(ready, SETTINGS).manager == (SyncJob(status=running),)
    evicted = replace(ready, local=local(conds=(cond(k.WORKLOAD_EVICTED, reason="Preempted"),)),
                      local_job=jobset(status=running))
    stopped = JobSetStatus(replicated_jobs_status=(ReplicatedJobStatus(name="workers"),))
    assert reconcile(evicted, SETTINGS).manager == (SyncJob(status=stopped),)


def test_jobset_copy_is_suspended_without_managed_by_and_labelled() -> None:
    local_js = {"apiVersion": JOBSET_API, "kind": "JobSet",
                "metadata": {"name": "js", "namespace": "ns", "uid": "u", "resourceVersion": "3",
                             "labels": {k.QUEUE_NAME_LABEL: "q"}},
                "spec": {"managedBy": k.MULTIKUEUE_MANAGED_BY, "suspend": False, "replicatedJobs": [{"name": "w"}]}}
    out = remote_copy("jobset", local_js, "jobset-js-123", "mk")
    assert out["spec"] == {"suspend": True, "replicatedJobs": [{"name": "w"}]}
    assert out["metadata"]["labels"] == {k.QUEUE_NAME_LABEL: "q", k.PREBUILT_WORKLOAD_LABEL: "jobset-js-123",
                                         k.MULTIKUEUE_ORIGIN_LABEL: "mk"}
    assert "uid" not in out["metadata"] and "resourceVersion" not in out["metadata"]


def _delayed(wl: Workload, state: str = "Pending") -> Workload:
    adm = wl.status.admission
    assert adm is not None
    psas = tuple(replace(p, delayed_topology_request=state) for p in adm.pod_set_assignments)
    return replace(wl, status=replace(wl.status, admission=replace(adm, pod_set_assignments=psas)))


def _placed(wl: Workload) -> Workload:
    placement = TopologyAssignment(levels=("kubernetes.io/hostname",), slices=())
    admission = Admission(cluster_queue="worker-cq", pod_set_assignments=(
        PodSetAssignment(name="main", topology_assignment=placement),))
    return replace(wl, status=replace(wl.status, admission=admission))


def test_the_winner_s_topology_readies_the_manager_s_delayed_request_with_its_check() -> None:
    # MultiKueue with TAS: the manager reserved without a placement (delayed, Pending); the winner's
    # copy was placed by its worker, so the check's Ready marks the request Ready in the same write,
    # and again later if the check was Ready before the placement showed (Kueue's needsDelayedTopologyUpdate).
    remotes = {"w1": _placed(copy(admitted_at="2026-01-01T00:00:05Z"))}
    plan = reconcile(inputs(_delayed(local(nominated=("w1",))), remotes=remotes), SETTINGS)
    assert _first_check(plan) == SetCheck(state="Ready", message='The workload was admitted on "w1"',
                                          cluster_name="w1", topology_ready=("main",))
    ready = _delayed(local(state="Ready", cluster="w1"))
    plan = reconcile(inputs(ready, remotes=remotes, jobs={"w1": job()}), SETTINGS)
    assert _first_check(plan).topology_ready == ("main",)
    done = _delayed(local(state="Ready", cluster="w1"), "Ready")
    assert reconcile(inputs(done, remotes=remotes, jobs={"w1": job()}), SETTINGS).manager == ()
    unplaced = {"w1": copy(admitted_at="2026-01-01T00:00:05Z")}
    assert _first_check(reconcile(inputs(_delayed(local()), remotes=unplaced), SETTINGS)).topology_ready == ()
