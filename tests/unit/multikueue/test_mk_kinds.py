"""MultiKueue for every kind Kueue has an adapter for: the per-kind table (core/kinds.py), the
copies it makes (core/copies.py), the flow with a PyTorchJob, the watcher applying a synced status
(SyncObjectStatus) and gc sweeping orphans of any kind."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from msgspec.structs import replace
from unit.multikueue.mk_builders import SETTINGS, copy, inputs, local, with_owner

from kq.api import constants as k
from kq.api.appwrapper import AppWrapper, AppWrapperSpec, AppWrapperStatus
from kq.api.meta import Condition, ObjectMeta
from kq.api.training import (
    KubeflowJobSpec,
    KubeflowJobStatus,
    PyTorchJob,
    RayCluster,
    RayClusterStatus,
    RayJob,
    RayJobSpec,
    RayJobStatus,
    ReplicaStatus,
    RunPolicy,
    TrainJob,
    TrainJobJobStatus,
    TrainJobStatus,
)
from kq.messages import SyncObjectStatus
from services.dispatcher.core.copies import remote_copy
from services.dispatcher.core.flow import reconcile
from services.dispatcher.core.kinds import ADAPTERS, ADAPTERS_BY_TOKEN, JOB_TOKENS, token_of
from services.dispatcher.core.model import ClusterView, Nominate, SetCheck, SyncJob
from services.gc.core.sweep import orphans
from services.watcher.core.mk_commands import plan_mk
from services.watcher.core.writes import Refusal, Skip, Write

META = {"name": "x", "namespace": "ns", "uid": "u", "resourceVersion": "4", "labels": {"app": "a"}}
MK = k.MULTIKUEUE_MANAGED_BY
OWNER_PT = ("kubeflow.org/v1", "PyTorchJob")


def _raw(kind: str, api_version: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": dict(META), "spec": spec, "status": {"x": 1}}


@pytest.mark.parametrize(("token", "spec", "where"), [
    ("pytorchjob", {"runPolicy": {"managedBy": MK, "suspend": False}, "pytorchReplicaSpecs": {}}, "runPolicy"),
    ("mpijob", {"runPolicy": {"managedBy": MK}, "mpiReplicaSpecs": {}}, "runPolicy"),
    ("tfjob", {"runPolicy": {"managedBy": MK}}, "runPolicy"),
    ("rayjob", {"managedBy": MK, "suspend": False, "entrypoint": "e"}, "spec"),
    ("raycluster", {"managedBy": MK}, "spec"),
    ("appwrapper", {"managedBy": MK, "suspend": False, "components": []}, "spec"),
    ("trainjob", {"managedBy": MK, "runtimePatches": [{"manager": "kueue.x-k8s.io/manager"},
                                                      {"manager": "me"}]}, "spec"),
    ("jobset", {"managedBy": MK, "replicatedJobs": []}, "spec"),
])
def test_copy_has_labels_no_managed_by_and_is_suspended(token: str, spec: dict[str, Any], where: str) -> None:
    adapter = ADAPTERS_BY_TOKEN[token]
    local_obj = _raw(adapter.kind, adapter.api_version, spec)
    out = remote_copy(token, local_obj, "wl-name", "mk")
    assert out["kind"] == adapter.kind and out["apiVersion"] == adapter.api_version and "status" not in out
    assert out["metadata"]["labels"] == {"app": "a", k.PREBUILT_WORKLOAD_LABEL: "wl-name",
                                         k.MULTIKUEUE_ORIGIN_LABEL: "mk"}
    assert "uid" not in out["metadata"] and "resourceVersion" not in out["metadata"]
    place = out["spec"]["runPolicy"] if where == "runPolicy" else out["spec"]
    assert "managedBy" not in place and place["suspend"] is True
    assert local_obj["spec"] == spec  # the manager's object is not touched
    if token == "trainjob":  # Kueue's runtime patch goes (the worker's Kueue writes its own), the user's stays
        assert out["spec"]["runtimePatches"] == [{"manager": "me"}]


def test_table_covers_every_kind_kueue_has_a_multikueue_adapter_for() -> None:
    kinds = {kind for _, kind in ADAPTERS}
    assert kinds == {"Job", "JobSet", "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob", "RayJob",
                     "RayCluster", "TrainJob", "AppWrapper"}
    assert set(JOB_TOKENS) == set(ADAPTERS_BY_TOKEN)
    assert k.multikueue_job_kinds(frozenset({"kubeflow.org/pytorchjob", "ray.io/rayjob"})) == (
        "job", "jobset", "pytorchjob", "rayjob")


def _pt(*, active: int = 0, managed: str | None = MK, conditions: tuple[Any, ...] = ()) -> PyTorchJob:
    return PyTorchJob(metadata=ObjectMeta(name="j1", namespace="ns", uid="job-uid", resource_version="9"),
                      spec=KubeflowJobSpec(run_policy=RunPolicy(managed_by=managed, suspend=False)),
                      status=KubeflowJobStatus(conditions=conditions,
                                               replica_statuses={"Master": ReplicaStatus(active=active)}))


def _pt_local(**kw: Any) -> Any:
    wl = local(**kw)
    ref = replace(wl.metadata.owner_references[0], api_version=OWNER_PT[0], kind=OWNER_PT[1])
    return replace(wl, metadata=replace(wl.metadata, owner_references=(ref,)))


def test_stopped_status_of_each_kind_has_nothing_running() -> None:
    def stop_of(token: str) -> Any:
        def stopped(obj: Any) -> Any:
            return ADAPTERS_BY_TOKEN[token].stopped_status(obj)
        return stopped

    stop = {t: stop_of(t) for t in ADAPTERS_BY_TOKEN}
    assert stop["pytorchjob"](_pt(active=2)).replica_statuses["Master"].active == 0
    assert stop["pytorchjob"](_pt()) is None
    rj = RayJob(status=RayJobStatus(job_deployment_status="Running"))
    assert stop["rayjob"](rj).job_deployment_status == "Suspended"
    assert stop["rayjob"](replace(rj, status=RayJobStatus(job_deployment_status="Complete"))) is None
    assert stop["raycluster"](RayCluster(status=RayClusterStatus(state="ready"))).state == "suspended"
    tj = TrainJob(status=TrainJobStatus(jobs_status=(TrainJobJobStatus(name="node", active=2),)))
    assert stop["trainjob"](tj).jobs_status[0].active == 0
    aw = AppWrapper(status=AppWrapperStatus(conditions=(Condition(type="QuotaReserved", status="True"),)))
    assert stop["appwrapper"](aw).conditions[0].status == "False"
    assert stop["appwrapper"](AppWrapper()) is None


def test_pytorchjob_winner_gets_the_copy_and_its_status_comes_back() -> None:
    inp = with_owner(inputs(_pt_local(nominated=("w1", "w2")), remotes={"w1": copy(admitted_at="2026-01-01T00:00:03Z")},
                            local_job=_pt()), OWNER_PT)
    plan = reconcile(inp, SETTINGS)
    assert plan.create_job == "w1" and plan.delete == ()
    running = _pt(active=1)
    suspended = replace(_pt(), spec=KubeflowJobSpec(run_policy=RunPolicy(managed_by=MK, suspend=True)))
    plan = reconcile(replace(inp, local=_pt_local(state="Ready", cluster="w1"), remote_jobs={"w1": running},
                             local_job=suspended), SETTINGS)
    assert plan.create_job is None
    assert plan.manager == (SyncJob(status=running.status),)  # copied even while the manager's is suspended


def test_evicted_manager_pytorchjob_has_its_copy_removed_and_stops() -> None:
    wl = _pt_local(state="Ready", cluster="w1", conds=(copy(evicted=True).status.conditions[0],))
    inp = with_owner(inputs(wl, remotes={"w1": copy(admitted_at="2026-01-01T00:00:03Z")},
                            jobs={"w1": _pt(active=1)}, local_job=_pt(active=1)), OWNER_PT)
    plan = reconcile(inp, SETTINGS)
    assert plan.delete == ("w1",)
    assert len(plan.manager) == 1 and isinstance(plan.manager[0], SyncJob)
    assert plan.manager[0].status.replica_statuses["Master"].active == 0


def test_kind_that_cannot_be_dispatched_is_rejected_by_name() -> None:
    unmanaged = with_owner(inputs(_pt_local(), local_job=_pt(managed=None)), OWNER_PT)
    check = reconcile(unmanaged, SETTINGS).manager[0]
    assert isinstance(check, SetCheck) and check.state == "Rejected" and "managedBy" in check.message
    off = reconcile(with_owner(inputs(_pt_local(), local_job=_pt()), OWNER_PT), replace(SETTINGS, kinds=("job",)))
    check = off.manager[0]
    assert isinstance(check, SetCheck) and check.state == "Rejected" and "Kind=PyTorchJob" in check.message
    sts = reconcile(with_owner(inputs(local()), ("apps/v1", "StatefulSet")), SETTINGS).manager[0]
    assert isinstance(sts, SetCheck) and sts.state == "Rejected" and "Kind=StatefulSet" in sts.message


def test_token_of_typed_objects() -> None:
    assert token_of(_pt()) == "pytorchjob" and token_of(RayJob()) == "rayjob" and token_of(AppWrapper()) == "appwrapper"


def _sync(status: Any, **kw: Any) -> SyncObjectStatus:
    fields: dict[str, Any] = {"id": "i", "cluster": "manager", "writer": "dispatcher", "epoch": 1, "kind": "rayjob",
                              "namespace": "ns", "name": "rj", "uid": "rj-uid", "status": msgspec.to_builtins(status)}
    fields.update(kw)
    return SyncObjectStatus(**fields)


def test_watcher_applies_a_synced_status_of_the_kind() -> None:
    current = RayJob(metadata=ObjectMeta(name="rj", namespace="ns", uid="rj-uid", resource_version="5"),
                     spec=RayJobSpec(managed_by=MK))
    done = RayJobStatus(job_status="SUCCEEDED", job_deployment_status="Complete")
    plan = plan_mk(_sync(done), current, "2026-01-01T00:00:00Z")
    assert isinstance(plan, Write) and plan.subresource == "status" and plan.kind == "rayjob"
    assert msgspec.json.decode(plan.patch)["status"] == {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
    assert plan_mk(_sync(done), replace(current, status=done), "t") == Skip(reason="Unchanged")
    assert isinstance(plan_mk(_sync(done, uid="other"), current, "t"), Refusal)
    assert isinstance(plan_mk(_sync(done), _pt(), "t"), Refusal)  # not a RayJob
    assert isinstance(plan_mk(_sync({"jobStatus": 3}), current, "t"), Refusal)  # does not decode


def test_gc_sweeps_orphans_of_any_kind() -> None:
    orphan = replace(_pt(), metadata=ObjectMeta(name="p", namespace="ns", labels={k.PREBUILT_WORKLOAD_LABEL: "gone"}))
    kept = replace(_pt(), metadata=ObjectMeta(name="q", namespace="ns", labels={k.PREBUILT_WORKLOAD_LABEL: "here"}))
    aw = AppWrapper(metadata=ObjectMeta(name="a", namespace="ns", labels={k.PREBUILT_WORKLOAD_LABEL: "gone"}),
                    spec=AppWrapperSpec())
    found = orphans([], {"pytorchjob": [orphan, kept], "appwrapper": [aw]}, {("ns", "here"): "uid"})
    assert found.objects == (("appwrapper", "ns", "a"), ("pytorchjob", "ns", "p"))


def test_worker_without_the_kinds_api_gets_no_copy_and_the_manager_says_why() -> None:
    clusters = (ClusterView(name="w1", available=True, kinds=("job", "pytorchjob")),
                ClusterView(name="w2", available=True, kinds=("job",)))
    plan = reconcile(with_owner(inputs(_pt_local(), clusters=clusters, local_job=_pt()), OWNER_PT), SETTINGS)
    assert plan.create == ("w1",)
    assert plan.manager == (Nominate(clusters=("w1",)),
                            SetCheck(state="Pending", message="w2: the worker does not serve PyTorchJob"))
