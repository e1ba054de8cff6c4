"""The Kubeflow, MPIJob and Ray adapters under the generic reconciler: their podsets, and the writes that
start, stop and finish them, run step by step as the shell does (apply the write, ask again)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import yaml
from msgspec.structs import replace
from unit.watcher.test_watcher_core_frameworks import FLAVORS, admit, apply, step, with_meta
from unit.watcher.watcher_builders import NOW, evicted, merge_apply

from kq.api import constants as k
from kq.api.appwrapper import AppWrapper, AppWrapperStatus
from kq.api.core import (
    Container,
    CoreCondition,
    JobSetSpec,
    JobSpec,
    JobTemplateSpec,
    PodSpec,
    PodTemplateSpec,
    PriorityClass,
    ReplicatedJob,
    ResourceRequirements,
)
from kq.api.kueue import Workload
from kq.api.meta import ObjectMeta, OwnerReference
from kq.api.training import (
    HeadGroupSpec,
    JobSetTemplateSpec,
    KubeflowJobSpec,
    KubeflowJobStatus,
    MLPolicy,
    MPIJob,
    PyTorchJob,
    RayCluster,
    RayClusterSpec,
    RayJob,
    RayJobSpec,
    RayJobStatus,
    ReplicaSpec,
    ReplicaStatus,
    RunPolicy,
    RuntimePatch,
    RuntimeRef,
    SchedulingPolicy,
    Trainer,
    TrainingRuntimeSpec,
    TrainJob,
    TrainJobSpec,
    WorkerGroupSpec,
)
from services.watcher.core import generic
from services.watcher.core import workload_status as ws
from services.watcher.core.adapter import build_workload
from services.watcher.core.frameworks.appwrapper import AppWrapperAdapter
from services.watcher.core.frameworks.kubeflow import MPIJobAdapter, PyTorchJobAdapter
from services.watcher.core.frameworks.ray import RayClusterAdapter, RayJobAdapter
from services.watcher.core.frameworks.trainjob import (
    ANCESTOR_LABEL,
    KUEUE_MANAGER,
    TrainJobAdapter,
    TrainJobView,
    child_jobset,
)
from services.watcher.core.managed import JobPolicy, default_selector, manages_unlabelled, namespace_managed
from services.watcher.core.writes import Create, Skip, Write

PT = PyTorchJobAdapter()
RJ = RayJobAdapter()
RC = RayClusterAdapter()
TJ = TrainJobAdapter()
AW = AppWrapperAdapter()
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "integrations"
META = ObjectMeta(name="j", namespace="ns", uid="j-uid", resource_version="5", labels={k.QUEUE_NAME_LABEL: "lq"})


def _template(cpu: str = "1", image: str = "img") -> PodTemplateSpec:
    return PodTemplateSpec(spec=PodSpec(containers=(
        Container(name="c", image=image, resources=ResourceRequirements(requests={"cpu": cpu})),)))


NO_STATUS = KubeflowJobStatus()


def pytorch(*, suspend: bool | None = True, status: KubeflowJobStatus = NO_STATUS,
            policy: RunPolicy | None = None) -> PyTorchJob:
    specs = {"Worker": ReplicaSpec(replicas=3, template=_template("2")), "Master": ReplicaSpec(template=_template())}
    return PyTorchJob(metadata=META, spec=KubeflowJobSpec(pytorch_replica_specs=specs,
                                                          run_policy=policy or RunPolicy(suspend=suspend)),
                      status=status)


def rayjob(**spec: Any) -> RayJob:
    cluster = RayClusterSpec(head_group_spec=HeadGroupSpec(template=_template(image="ray:2.9")),
                             worker_group_specs=(WorkerGroupSpec(group_name="Small-Group", replicas=2,
                                                                 template=_template()),))
    return RayJob(metadata=META, spec=RayJobSpec(ray_cluster_spec=cluster, suspend=True, **spec))


def started(ad: Any, obj: Any, *podsets: str) -> tuple[Any, Workload]:
    wl = admit(with_meta(build_workload(ad, obj, {}, {})), *podsets)
    write = step(ad, obj, wl)
    assert isinstance(write, Write) and write.patch_type == "json", write
    return apply(obj, write), wl


def test_a_pytorchjob_gets_master_then_worker_podsets_and_its_scheduling_priority() -> None:
    assert isinstance(step(PT, pytorch(), None), Create)
    wl = build_workload(PT, pytorch(), {}, {})
    assert wl.metadata.name.startswith("pytorchjob-j-")
    assert [(p.name, p.count) for p in wl.spec.pod_sets] == [("master", 1), ("worker", 3)]
    high = pytorch(policy=RunPolicy(suspend=True, scheduling_policy=SchedulingPolicy(priority_class="high")))
    wl = build_workload(PT, high, {}, {"high": PriorityClass(value=100)})
    assert wl.spec.priority == 100 and wl.spec.priority_class_ref is not None


def test_admission_unsuspends_the_pytorchjob_with_each_replica_types_node_selector() -> None:
    running, wl = started(PT, pytorch(), "master", "worker")
    assert running.spec.run_policy.suspend is False
    for rs in running.spec.pytorch_replica_specs.values():
        assert rs.template.spec.node_selector == {"pool": "a"}
    assert step(PT, running, wl) == Skip(reason="Running")


def test_eviction_suspends_restores_then_releases_the_pytorchjob_once_no_replica_is_active() -> None:
    running, wl = started(PT, pytorch(), "master", "worker")
    active = replace(running, status=KubeflowJobStatus(replica_statuses={"Worker": ReplicaStatus(active=3)}))
    out = evicted(wl)
    stopped = apply(active, step(PT, active, out))
    assert stopped.spec.run_policy.suspend is True
    assert all(rs.template.spec.node_selector == {} for rs in stopped.spec.pytorch_replica_specs.values())
    assert step(PT, stopped, out) == Skip(reason="Evicted")
    release = step(PT, replace(stopped, status=KubeflowJobStatus()), out)
    assert isinstance(release, Write) and release.kind == "workload"
    assert not ws.has_quota_reservation(merge_apply(out, release.patch))


def test_a_succeeded_pytorchjob_finishes_its_workload() -> None:
    running, wl = started(PT, pytorch(), "master", "worker")
    done = replace(running, status=KubeflowJobStatus(conditions=(
        CoreCondition(type="Succeeded", status="True", message="done"),)))
    write = step(PT, done, wl)
    assert isinstance(write, Write)
    assert ws.is_finished(merge_apply(wl, write.patch))


def test_a_pytorchjob_without_run_policy_is_suspended_before_its_workload_exists() -> None:
    bare = replace(pytorch(), spec=replace(pytorch().spec, run_policy=None))
    write = step(PT, bare, None)
    assert isinstance(write, Write)
    assert apply(bare, write).spec.run_policy.suspend is True


def test_an_mpijob_has_launcher_then_worker_podsets() -> None:
    job = MPIJob(metadata=META, spec=KubeflowJobSpec(run_policy=RunPolicy(suspend=True), mpi_replica_specs={
        "Worker": ReplicaSpec(replicas=2, template=_template()), "Launcher": ReplicaSpec(template=_template())}))
    wl = build_workload(MPIJobAdapter(), job, {}, {})
    assert [(p.name, p.count) for p in wl.spec.pod_sets] == [("launcher", 1), ("worker", 2)]
    assert wl.metadata.name.startswith("mpijob-j-")


def test_a_rayjob_has_head_worker_group_and_kuberays_default_submitter() -> None:
    wl = build_workload(RJ, rayjob(), {}, {})
    assert [(p.name, p.count) for p in wl.spec.pod_sets] == [("head", 1), ("small-group", 2), ("submitter", 1)]
    (sub,) = wl.spec.pod_sets[2].template.spec.containers
    assert sub.image == "ray:2.9" and sub.resources.requests == {"cpu": "500m", "memory": "200Mi"}
    http = build_workload(RJ, rayjob(submission_mode="HTTPMode"), {}, {})
    assert [p.name for p in http.spec.pod_sets] == ["head", "small-group"]


def test_admission_resumes_the_rayjob_and_sets_its_submitter_template() -> None:
    running, wl = started(RJ, rayjob(), "head", "small-group", "submitter")
    assert running.spec.suspend is False
    assert running.spec.ray_cluster_spec.head_group_spec.template.spec.node_selector == {"pool": "a"}
    assert running.spec.submitter_pod_template.spec.node_selector == {"pool": "a"}
    live = replace(running, status=RayJobStatus(job_deployment_status="Running"))
    assert step(RJ, live, wl) == Skip(reason="Running")
    done = replace(running, status=RayJobStatus(job_deployment_status="Complete", job_status="SUCCEEDED"))
    write = step(RJ, done, wl)
    assert isinstance(write, Write) and ws.is_finished(merge_apply(wl, write.patch))


def test_a_rayjob_on_an_existing_cluster_and_a_rayjobs_own_cluster_are_not_queued() -> None:
    assert step(RJ, rayjob(cluster_selector={"ray.io/cluster": "c"}), None) == Skip(reason="NotQueued")
    owned = RayCluster(metadata=replace(META, owner_references=(OwnerReference(
        api_version="ray.io/v1", kind="RayJob", name="j", uid="x", controller=True),)),
        spec=RayClusterSpec(head_group_spec=HeadGroupSpec(template=_template())))
    assert step(RC, owned, None) == Skip(reason="NotQueued")


# --- which objects are Kueue's (managedJobsNamespaceSelector, manageJobsWithoutQueueName) ---


def test_kueues_default_namespace_selector_leaves_out_kube_system_and_kueues_namespace() -> None:
    policy = JobPolicy(namespace_selector=default_selector("kueue-system"))
    assert namespace_managed(policy, "default", None)
    assert not namespace_managed(policy, "kube-system", None)
    assert not namespace_managed(policy, "kueue-system", {"team": "x"})


def test_an_unlabelled_object_is_kueues_only_with_the_option_and_when_top_level() -> None:
    on = JobPolicy(manage_without_queue_name=True)
    child = replace(META, owner_references=(OwnerReference(api_version="ray.io/v1", kind="RayJob", name="j",
                                                           uid="x", controller=True),))
    assert manages_unlabelled(on, META) and not manages_unlabelled(on, child)
    assert not manages_unlabelled(JobPolicy(), META)
    unlabelled = replace(pytorch(), metadata=replace(META, labels={}))
    assert step(PT, unlabelled, None) == Skip(reason="NotQueued")

    created = generic.reconcile(PT, unlabelled, None, FLAVORS, {}, {}, NOW, manage_unlabelled=True)
    assert isinstance(created, Create)
    assert build_workload(PT, unlabelled, {}, {}).spec.queue_name == ""


# --- TrainJob ---


def _runtime() -> TrainingRuntimeSpec:
    node = ReplicatedJob(name="node", template=JobTemplateSpec(
        metadata=ObjectMeta(labels={ANCESTOR_LABEL: "trainer"}),
        spec=JobSpec(template=PodTemplateSpec(spec=PodSpec(containers=(Container(name="node", image="torch"),))))))
    init = ReplicatedJob(name="dataset-initializer", template=JobTemplateSpec(
        spec=JobSpec(template=_template("500m"))))
    return TrainingRuntimeSpec(ml_policy=MLPolicy(num_nodes=1),
                               template=JobSetTemplateSpec(spec=JobSetSpec(replicated_jobs=(init, node))))


def trainjob(nodes: int | None = 2) -> TrainJobView:
    job = TrainJob(metadata=META, spec=TrainJobSpec(
        runtime_ref=RuntimeRef(name="torch"), suspend=True,
        trainer=Trainer(num_nodes=nodes, resources_per_node=ResourceRequirements(requests={"cpu": "4"})),
        runtime_patches=(RuntimePatch(manager=KUEUE_MANAGER),)))
    return TrainJobView(job=job, runtime=_runtime())


def test_a_trainjob_has_the_podsets_of_its_runtimes_jobset_with_its_trainer_settings() -> None:
    wl = build_workload(TJ, trainjob(), {}, {})
    assert wl.metadata.name.startswith("trainjob-j-")
    assert [(p.name, p.count) for p in wl.spec.pod_sets] == [("dataset-initializer", 1), ("node", 2)]
    assert wl.spec.pod_sets[1].template.spec.containers[0].resources.requests == {"cpu": "4"}
    assert [p.count for p in build_workload(TJ, trainjob(None), {}, {}).spec.pod_sets] == [1, 1]  # mlPolicy
    missing = replace(trainjob(), runtime=None)
    assert step(TJ, missing, None) == Skip(reason="CannotCreateWorkload: runtime 'torch' not found")


def test_admission_writes_kueues_runtime_patch_and_eviction_empties_it() -> None:
    view = trainjob()
    wl = admit(with_meta(build_workload(TJ, view, {}, {})), "dataset-initializer", "node")
    write = step(TJ, view, wl)
    assert isinstance(write, Write)
    running = replace(view, job=apply(view.job, write))
    assert running.job.spec.suspend is False
    child = child_jobset(running)
    assert all(rj.template.spec.template.spec.node_selector == {"pool": "a"} for rj in child.spec.replicated_jobs)
    assert step(TJ, running, wl) == Skip(reason="Running")
    stopped = replace(running, job=apply(running.job, step(TJ, running, evicted(wl))))
    assert stopped.job.spec.suspend is True
    assert all(rj.template.spec.template.spec.node_selector == {} for rj in child_jobset(stopped).spec.replicated_jobs)


# --- AppWrapper ---


def appwrapper() -> AppWrapper:
    sample = yaml.safe_load((EXAMPLES / "sample-appwrapper.yaml").read_text())
    return msgspec.convert(sample | {"metadata": {"name": "aw", "namespace": "ns", "uid": "aw-uid",
                                                  "resourceVersion": "5", "labels": sample["metadata"]["labels"]},
                                     "spec": sample["spec"] | {"suspend": True}}, AppWrapper)


def test_an_appwrappers_podsets_are_inferred_from_its_wrapped_pytorchjob() -> None:
    wl = build_workload(AW, appwrapper(), {}, {})
    assert wl.metadata.name.startswith("appwrapper-aw-") and wl.spec.queue_name == "user-queue"
    assert [(p.name, p.count) for p in wl.spec.pod_sets] == [("aw-0", 1), ("aw-1", 1)]
    assert wl.spec.pod_sets[0].template.spec.containers[0].resources.requests == {"cpu": "1"}


def test_admission_writes_the_appwrappers_podset_infos_and_eviction_clears_them() -> None:
    view = appwrapper()
    wl = admit(with_meta(build_workload(AW, view, {}, {})), "aw-0", "aw-1")
    running = apply(view, step(AW, view, wl))
    assert running.spec.suspend is False
    assert [i.node_selector for i in running.spec.components[0].pod_set_infos] == [{"pool": "a"}, {"pool": "a"}]
    assert step(AW, running, wl) == Skip(reason="Running")
    stopped = apply(running, step(AW, running, evicted(wl)))
    assert stopped.spec.suspend is True and stopped.spec.components[0].pod_set_infos == ()
    done = replace(running, status=AppWrapperStatus(phase="Succeeded"))
    write = step(AW, done, wl)
    assert isinstance(write, Write) and ws.is_finished(merge_apply(wl, write.patch))
