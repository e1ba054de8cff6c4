"""The smaller MultiKueue cores: kubeconfigs, conditions, the objects copied to workers, gc's sweep,
and the watcher's planning of the dispatcher's commands."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import TypedDict

import msgspec
import pytest
from msgspec.structs import replace
from unit.multikueue.mk_builders import cond, copy, job, jobset, local

from kq.api import constants as k
from kq.api.core import CoreCondition, JobStatus, Secret
from kq.api.kueue import (
    AdmissionCheck,
    AdmissionCheckParametersReference,
    AdmissionCheckSpec,
    AdmissionCheckState,
    MultiKueueCluster,
    MultiKueueClusterStatus,
    MultiKueueConfig,
    MultiKueueConfigSpec,
    Workload,
)
from kq.api.meta import ObjectMeta
from kq.kubeconfigs import KubeconfigError, kubeconfig_from_secret, kubeconfig_from_text
from kq.messages import DeleteWorkload, FinishWorkload, SetAdmissionCheckState, SetNominatedClusters, SyncJobStatus
from services.dispatcher.core.clusters import admission_check_condition
from services.dispatcher.core.copies import remote_job, remote_workload
from services.gc.core.sweep import Orphans, confirmed, expired, orphans
from services.watcher.core.mk_commands import plan_mk
from services.watcher.core.writes import Delete, Refusal, Skip, Write

GOOD = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://x'}}]\ncontexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c\n"


def _secret(data: dict[str, str]) -> Secret:
    return Secret(metadata=ObjectMeta(name="w1-kubeconfig", namespace="kq-system"), data=data)


@pytest.mark.parametrize(("secret", "why"), [
    (None, "not found"),
    (_secret({}), "has no key"),
    (_secret({"kubeconfig": "%%%"}), "not base64"),
    (_secret({"kubeconfig": base64.b64encode(b"just text").decode()}), "not a kubeconfig"),
    (_secret({"kubeconfig": base64.b64encode(b"a: [").decode()}), "not valid YAML"),
])
def test_unusable_kubeconfig_secrets_say_why_without_content(secret: Secret | None, why: str) -> None:
    with pytest.raises(KubeconfigError) as e:
        kubeconfig_from_secret(secret, "w1-kubeconfig", "kq-system")
    assert why in str(e.value) and "just text" not in str(e.value)


def test_good_kubeconfig_and_exec_users_refused() -> None:
    assert kubeconfig_from_secret(_secret({"kubeconfig": base64.b64encode(GOOD.encode()).decode()}), "n", "ns")["clusters"]
    with pytest.raises(KubeconfigError, match="exec"):
        kubeconfig_from_text(GOOD + "users: [{name: u, user: {exec: {command: x}}}]\n", "file f")


def _mkc(name: str, active: bool | None) -> MultiKueueCluster:
    conds = () if active is None else (cond(k.ACTIVE, "True" if active else "False"),)
    return MultiKueueCluster(metadata=ObjectMeta(name=name), status=MultiKueueClusterStatus(conditions=conds))


def test_admission_check_active_needs_its_config_and_one_active_cluster() -> None:
    ac = AdmissionCheck(metadata=ObjectMeta(name="mk"), spec=AdmissionCheckSpec(
        controller_name=k.MULTIKUEUE_CONTROLLER_NAME,
        parameters=AdmissionCheckParametersReference(api_group=k.KUEUE_GROUP, kind="MultiKueueConfig", name="cfg")))
    cfg = {"cfg": MultiKueueConfig(metadata=ObjectMeta(name="cfg"), spec=MultiKueueConfigSpec(clusters=("w1", "w2")))}
    assert admission_check_condition(ac, {}, {}).reason == "BadConfig"
    both = admission_check_condition(ac, cfg, {"w1": _mkc("w1", True), "w2": _mkc("w2", True)})
    assert (both.status, both.reason) == ("True", "Active")
    some = admission_check_condition(ac, cfg, {"w1": _mkc("w1", True)})
    assert (some.status, some.reason, some.message) == ("True", "SomeActiveClusters", "Missing clusters: [w2]")
    none = admission_check_condition(ac, cfg, {"w1": _mkc("w1", False)})
    assert (none.status, none.reason) == ("False", "NoUsableClusters")


def test_copies_carry_origin_and_drop_server_fields() -> None:
    wl = {"metadata": {"name": "w", "namespace": "ns", "uid": "u1", "resourceVersion": "3",
                       "labels": {k.JOB_UID_LABEL: "x", "a": "b"}, "ownerReferences": [{}], "finalizers": ["f"]},
          "spec": {"queueName": "lq"}, "status": {"admission": {}}}
    out = remote_workload(wl, "mk", "2026-01-01T00:00:00Z")
    assert out["metadata"]["labels"] == {"a": "b", k.MULTIKUEUE_ORIGIN_LABEL: "mk"}
    assert out["metadata"]["annotations"][k.MULTIKUEUE_ORIGIN_UID_ANNOTATION] == "u1"
    assert out["metadata"]["annotations"]["kq.dev/multikueue-lease-until"] == "2026-01-01T00:00:00Z"
    assert "uid" not in out["metadata"] and "status" not in out and "ownerReferences" not in out["metadata"]
    j = {"metadata": {"name": "j1", "namespace": "ns", "uid": "ju", "labels": {"controller-uid": "ju"}},
         "spec": {"managedBy": k.MULTIKUEUE_MANAGED_BY, "suspend": False, "selector": {"matchLabels": {}},
                  "template": {"metadata": {"labels": {"controller-uid": "ju", "app": "a"}}}}}
    rj = remote_job(j, "w", "mk")
    assert "managedBy" not in rj["spec"] and rj["spec"]["suspend"] is True and "selector" not in rj["spec"]
    assert rj["metadata"]["labels"] == {k.PREBUILT_WORKLOAD_LABEL: "w", k.MULTIKUEUE_ORIGIN_LABEL: "mk"}
    assert rj["spec"]["template"]["metadata"]["labels"] == {"app": "a"}


def test_gc_removes_only_confirmed_orphans_of_missing_or_other_incarnations() -> None:
    kept, old, gone = copy(), copy(origin_uid="old"), replace(copy(), metadata=replace(copy().metadata, name="gone"))
    j = replace(job(), metadata=replace(job().metadata, labels={k.PREBUILT_WORKLOAD_LABEL: "gone"}))
    js = replace(jobset(), metadata=replace(jobset().metadata, labels={k.PREBUILT_WORKLOAD_LABEL: "gone"}))
    js_kept = replace(jobset(), metadata=replace(jobset().metadata, name="k",
                                                 labels={k.PREBUILT_WORKLOAD_LABEL: "job-j1-abc"}))
    found = orphans([kept, gone], {"job": [j], "jobset": [js, js_kept]}, {("ns", "job-j1-abc"): "wl-uid"})
    assert found == Orphans(workloads=(("ns", "gone"),), objects=(("job", "ns", "j1"), ("jobset", "ns", "j1")))
    assert orphans([old], {}, {("ns", "job-j1-abc"): "wl-uid"}).workloads == (("ns", "job-j1-abc"),)
    assert confirmed(found, None) == Orphans()  # first sighting: wait one pass
    assert confirmed(found, found) == found


def test_retention_after_finished_and_after_deactivation_by_kueue() -> None:
    now = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    fin = local(conds=(cond(k.WORKLOAD_FINISHED, reason="Succeeded", at="2026-01-01T00:00:05Z"),))
    assert [r for _, r in expired([fin], 5.0, None, now)] == ["AfterFinished"]
    assert expired([fin], 6.0, None, now) == []
    deact = local(conds=(cond(k.WORKLOAD_EVICTED, reason="DeactivatedDueToAdmissionCheck", at="2026-01-01T00:00:00Z"),))
    deact = replace(deact, spec=replace(deact.spec, active=False))
    assert [r for _, r in expired([deact], None, 1.0, now)] == ["AfterDeactivatedByKueue"]
    user = replace(deact, status=replace(deact.status, conditions=(cond(k.WORKLOAD_EVICTED, reason="Deactivated"),)))
    assert expired([user], None, 1.0, now) == []


class _WorkloadFields(TypedDict):
    """The fields the workload commands below share (kq.messages._WorkloadCommand; epoch left default)."""

    id: str
    cluster: str
    writer: str
    namespace: str
    name: str
    uid: str


_W = _WorkloadFields(id="x", cluster="m", writer="dispatcher", namespace="ns", name="job-j1-abc", uid="wl-uid")


def test_check_state_sets_cluster_name_once() -> None:
    wl = local()
    ready = plan_mk(SetAdmissionCheckState(**_W, check="mk", state="Ready", message="ok", cluster_name="w1"), wl, "T")
    assert isinstance(ready, Write) and b'"clusterName":"w1"' in ready.patch
    other = plan_mk(SetAdmissionCheckState(**_W, check="mk", state="Ready", message="ok", cluster_name="w2"),
                    local(cluster="w1"), "T")
    assert isinstance(other, Refusal) and other.reason == "ClusterNameImmutable"
    missing = plan_mk(SetAdmissionCheckState(**_W, check="nope", state="Ready", message=""), wl, "T")
    assert isinstance(missing, Refusal)
    assert isinstance(plan_mk(SetNominatedClusters(**_W, clusters=("w1",)), local(cluster="w1"), "T"), Refusal)
    assert isinstance(plan_mk(SetNominatedClusters(**_W, clusters=("w1",)), wl, "T"), Write)


def test_the_last_check_ready_admits_in_the_same_write() -> None:
    """Kueue's workload controller sets Admitted once every check is Ready; kq writes it with that check."""
    ready = plan_mk(SetAdmissionCheckState(**_W, check="mk", state="Ready", message="ok", cluster_name="w1"),
                    local(), "T")
    assert isinstance(ready, Write)
    patch = msgspec.json.decode(ready.patch)
    (admitted,) = [c for c in patch["status"]["conditions"] if c["type"] == k.WORKLOAD_ADMITTED]
    assert (admitted["status"], admitted["reason"], admitted["lastTransitionTime"]) == ("True", "Admitted", "T")
    other = replace(local(), status=replace(local().status, admission_checks=(
        *local().status.admission_checks, AdmissionCheckState(name="prov", state="Pending"))))
    waiting = plan_mk(SetAdmissionCheckState(**_W, check="mk", state="Ready", message="ok", cluster_name="w1"),
                      other, "T")
    assert isinstance(waiting, Write) and b'"Admitted"' not in waiting.patch
    pending = plan_mk(SetAdmissionCheckState(**_W, check="mk", state="Pending", message="wait"), local(), "T")
    assert isinstance(pending, Write) and b'"Admitted"' not in pending.patch


def test_job_status_sync_and_retention_delete() -> None:
    cmd = SyncJobStatus(id="s", cluster="m", writer="dispatcher", namespace="ns", name="j1", uid="job-uid",
                        status=JobStatus(active=1))
    assert isinstance(plan_mk(cmd, job(), "T"), Write)
    assert isinstance(plan_mk(replace(cmd, status=JobStatus()), job(), "T"), Skip)
    fin = local(conds=(cond(k.WORKLOAD_FINISHED, reason="Succeeded"),))
    assert isinstance(plan_mk(DeleteWorkload(**_W, reason="AfterFinished"), fin, "T"), Delete)
    assert isinstance(plan_mk(DeleteWorkload(**_W, reason="AfterFinished"), local(), "T"), Refusal)
    assert isinstance(plan_mk(DeleteWorkload(**_W, reason="AfterFinished"), None, "T"), Skip)


@pytest.mark.parametrize(("suspend", "finished", "start_time"), [
    (True, False, None),  # a stop under way reset it: the restore of the template needs it unset
    (False, False, "T0"),
    (True, True, "T0"),  # a finished status is copied whole, suspended or not (Kueue's determineStatusUpdate)
], ids=["suspended-keeps-its-own", "running-takes-the-workers", "suspended-takes-a-finished-one"])
def test_job_status_sync_sets_no_start_time_on_a_suspended_job(suspend: bool, finished: bool,
                                                               start_time: str | None) -> None:
    done = (CoreCondition(type="Complete", status="True"),) if finished else ()
    cmd = SyncJobStatus(id="s", cluster="m", writer="dispatcher", namespace="ns", name="j1", uid="job-uid",
                        status=JobStatus(active=0, succeeded=1 if finished else 0, start_time="T0", conditions=done))
    plan = plan_mk(cmd, job(suspend=suspend, status=JobStatus(active=1)), "T")
    assert isinstance(plan, Write)
    assert json.loads(plan.patch)["status"].get("startTime") == start_time


def test_a_finish_of_a_finished_workload_is_done_not_refused() -> None:
    finish = FinishWorkload(**_W, reason="Succeeded", message="done")
    plan = plan_mk(finish, local(), "T")
    assert isinstance(plan, Write) and b'"Finished"' in plan.patch
    fin = local(conds=(cond(k.WORKLOAD_FINISHED, reason="Succeeded"),))
    assert plan_mk(finish, fin, "T") == Skip(reason="AlreadyFinished")
    # Other commands on a finished Workload are still refused.
    other = plan_mk(SetNominatedClusters(**_W, clusters=("w1",)), fin, "T")
    assert isinstance(other, Refusal) and other.reason == "Finished"


def test_a_finished_workload_still_takes_the_record_of_where_it_ran() -> None:
    """The winner's check can reach the manager after the Workload finished (its job ran and its status
    came back first, under load): clusterName and the check are still written, set once, and nothing
    else is (no Admitted); any other check change on a finished Workload is refused."""
    fin = local(conds=(cond(k.WORKLOAD_FINISHED, reason="Succeeded"),))
    ready = SetAdmissionCheckState(**_W, check="mk", state="Ready", message='admitted on "w1"', cluster_name="w1")
    plan = plan_mk(ready, fin, "T")
    assert isinstance(plan, Write)
    status = msgspec.json.decode(plan.patch)["status"]
    assert status["clusterName"] == "w1"
    assert [(c["name"], c["state"]) for c in status["admissionChecks"]] == [("mk", "Ready")]
    assert all(c["type"] != k.WORKLOAD_ADMITTED for c in status.get("conditions", ()))
    done = replace(fin, status=replace(fin.status, cluster_name="w1"))
    assert plan_mk(ready, done, "T") == Skip(reason="AlreadyFinished")
    elsewhere = plan_mk(replace(ready, cluster_name="w2"), done, "T")
    assert isinstance(elsewhere, Refusal) and elsewhere.reason == "ClusterNameImmutable"
    for refused in (replace(ready, cluster_name=None), replace(ready, state="Retry")):
        plan = plan_mk(refused, fin, "T")
        assert isinstance(plan, Refusal) and plan.reason == "Finished"
    missing = plan_mk(replace(ready, check="nope"), fin, "T")
    assert isinstance(missing, Refusal) and missing.reason == "NoSuchAdmissionCheck"


def _delayed(wl: Workload) -> Workload:
    adm = wl.status.admission
    assert adm is not None
    psas = tuple(replace(p, delayed_topology_request="Pending") for p in adm.pod_set_assignments)
    return replace(wl, status=replace(wl.status, admission=replace(adm, pod_set_assignments=psas)))


def test_a_delayed_topology_admits_only_once_the_winner_placed_it() -> None:
    """Kueue's SyncAdmittedCondition: no Admitted while a pod set's topology request waits (delayed,
    Pending, unplaced); the winner's check names the pod sets its worker placed, made Ready with it."""
    ready = SetAdmissionCheckState(**_W, check="mk", state="Ready", message="ok", cluster_name="w1")
    waiting = plan_mk(ready, _delayed(local()), "T")
    assert isinstance(waiting, Write) and b'"Admitted"' not in waiting.patch
    placed = plan_mk(replace(ready, topology_ready=("main",)), _delayed(local()), "T")
    assert isinstance(placed, Write)
    status = msgspec.json.decode(placed.patch)["status"]
    assert [p["delayedTopologyRequest"] for p in status["admission"]["podSetAssignments"]] == ["Ready"]
    assert any(c["type"] == k.WORKLOAD_ADMITTED and c["status"] == "True" for c in status["conditions"])
