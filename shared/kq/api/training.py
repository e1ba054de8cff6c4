"""The training and Ray kinds kq's integrations read: Kubeflow's v1 training jobs (PyTorchJob, TFJob,
XGBoostJob, PaddleJob, JAXJob), MPIJob (kubeflow.org/v2beta1), KubeRay's RayJob and RayCluster
(ray.io/v1), and Kubeflow Trainer's TrainJob with its (Cluster)TrainingRuntimes
(trainer.kubeflow.org/v1alpha1).

Lenient like kq.api.core: the fields kq reads, the rest ignored (the watcher changes these objects
with JSON patches only, so what is not modelled here stays as the API server has it).
"""

from __future__ import annotations

from kq.api.core import (
    CoreCondition,
    JobSetSpec,
    PodSchedulingGate,
    PodTemplateSpec,
    ResourceRequirements,
    Toleration,
)
from kq.api.meta import Condition, K8sStruct, ObjectMeta

__all__ = ["ReplicaSpec", "SchedulingPolicy", "RunPolicy", "ReplicaStatus", "KubeflowJobSpec", "KubeflowJobStatus",
           "KubeflowJob", "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob",
           "KUBEFLOW_REPLICA_FIELDS", "HeadGroupSpec", "AutoscalerOptions", "WorkerGroupSpec", "RayClusterSpec",
           "RayClusterStatus", "RayCluster", "RayJobSpec", "RayJobStatus", "RayJob", "RuntimeRef", "Trainer",
           "PodSpecPatch", "PodTemplatePatch", "JobSpecPatch", "JobTemplatePatch", "ReplicatedJobPatch",
           "JobSetSpecPatch", "JobSetTemplatePatch", "TrainingRuntimeSpecPatch", "RuntimePatch", "TrainJobSpec",
           "TrainJobJobStatus", "TrainJobStatus", "TrainJob", "MLPolicy", "JobSetTemplateSpec", "TrainingRuntimeSpec",
           "TrainingRuntime", "ClusterTrainingRuntime"]


class ReplicaSpec(K8sStruct, frozen=True, kw_only=True):
    replicas: int | None = None  # 1 when unset
    template: PodTemplateSpec = PodTemplateSpec()
    restart_policy: str = ""


class SchedulingPolicy(K8sStruct, frozen=True, kw_only=True):
    priority_class: str = ""


class RunPolicy(K8sStruct, frozen=True, kw_only=True):
    suspend: bool | None = None
    managed_by: str | None = None
    clean_pod_policy: str | None = None
    scheduling_policy: SchedulingPolicy | None = None


class ReplicaStatus(K8sStruct, frozen=True, kw_only=True):
    active: int = 0
    succeeded: int = 0
    failed: int = 0


class KubeflowJobSpec(K8sStruct, frozen=True, kw_only=True):
    """Every kind's replica specs field; a kind uses its own (KUBEFLOW_REPLICA_FIELDS)."""

    pytorch_replica_specs: dict[str, ReplicaSpec] | None = None
    tf_replica_specs: dict[str, ReplicaSpec] | None = None
    xgb_replica_specs: dict[str, ReplicaSpec] | None = None
    paddle_replica_specs: dict[str, ReplicaSpec] | None = None
    jax_replica_specs: dict[str, ReplicaSpec] | None = None
    mpi_replica_specs: dict[str, ReplicaSpec] | None = None
    run_policy: RunPolicy | None = None


class KubeflowJobStatus(K8sStruct, frozen=True, kw_only=True):
    conditions: tuple[CoreCondition, ...] = ()  # Created, Running, Restarting, Succeeded, Failed, Suspended
    replica_statuses: dict[str, ReplicaStatus] = {}
    start_time: str | None = None
    completion_time: str | None = None


class KubeflowJob(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: KubeflowJobSpec = KubeflowJobSpec()
    status: KubeflowJobStatus = KubeflowJobStatus()


class PyTorchJob(KubeflowJob, frozen=True, kw_only=True):
    pass


class TFJob(KubeflowJob, frozen=True, kw_only=True):
    pass


class XGBoostJob(KubeflowJob, frozen=True, kw_only=True):
    pass


class PaddleJob(KubeflowJob, frozen=True, kw_only=True):
    pass


class JAXJob(KubeflowJob, frozen=True, kw_only=True):
    pass


class MPIJob(KubeflowJob, frozen=True, kw_only=True):
    pass


# kind -> (the spec field holding its replica specs, as Python and JSON names; its replica types in
# the order Kueue makes podsets of them).
KUBEFLOW_REPLICA_FIELDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "PyTorchJob": ("pytorch_replica_specs", "pytorchReplicaSpecs", ("Master", "Worker")),
    "TFJob": ("tf_replica_specs", "tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator")),
    "XGBoostJob": ("xgb_replica_specs", "xgbReplicaSpecs", ("Master", "Worker")),
    "PaddleJob": ("paddle_replica_specs", "paddleReplicaSpecs", ("Master", "Worker")),
    "JAXJob": ("jax_replica_specs", "jaxReplicaSpecs", ("Worker",)),
    "MPIJob": ("mpi_replica_specs", "mpiReplicaSpecs", ("Launcher", "Worker")),
}


# --- ray.io/v1 ---


class HeadGroupSpec(K8sStruct, frozen=True, kw_only=True):
    template: PodTemplateSpec = PodTemplateSpec()


class WorkerGroupSpec(K8sStruct, frozen=True, kw_only=True):
    group_name: str = ""
    replicas: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    num_of_hosts: int = 1
    template: PodTemplateSpec = PodTemplateSpec()


class AutoscalerOptions(K8sStruct, frozen=True, kw_only=True):
    resources: ResourceRequirements | None = None


class RayClusterSpec(K8sStruct, frozen=True, kw_only=True):
    head_group_spec: HeadGroupSpec = HeadGroupSpec()
    worker_group_specs: tuple[WorkerGroupSpec, ...] = ()
    suspend: bool | None = None
    enable_in_tree_autoscaling: bool | None = None
    autoscaler_options: AutoscalerOptions | None = None
    managed_by: str | None = None


class RayClusterStatus(K8sStruct, frozen=True, kw_only=True):
    state: str = ""  # ready | suspended | failed
    reason: str = ""
    ready_worker_replicas: int = 0
    desired_worker_replicas: int = 0


class RayCluster(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: RayClusterSpec = RayClusterSpec()
    status: RayClusterStatus = RayClusterStatus()


class RayJobSpec(K8sStruct, frozen=True, kw_only=True):
    entrypoint: str = ""
    suspend: bool = False
    submission_mode: str = ""  # K8sJobMode (the default), HTTPMode, SidecarMode, InteractiveMode
    ray_cluster_spec: RayClusterSpec | None = None
    submitter_pod_template: PodTemplateSpec | None = None
    cluster_selector: dict[str, str] = {}
    shutdown_after_job_finishes: bool = False
    managed_by: str | None = None


class RayJobStatus(K8sStruct, frozen=True, kw_only=True):
    job_status: str = ""  # PENDING RUNNING STOPPED SUCCEEDED FAILED
    job_deployment_status: str = ""  # "" (new) Initializing Running Complete Failed Suspending Suspended ...
    message: str = ""
    ray_cluster_name: str = ""
    ray_cluster_status: RayClusterStatus = RayClusterStatus()


class RayJob(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: RayJobSpec = RayJobSpec()
    status: RayJobStatus = RayJobStatus()


# --- trainer.kubeflow.org/v1alpha1 (Kubeflow Trainer v2) ---


class RuntimeRef(K8sStruct, frozen=True, kw_only=True):
    name: str = ""
    api_group: str | None = None
    kind: str | None = None  # ClusterTrainingRuntime (the default) or TrainingRuntime


class Trainer(K8sStruct, frozen=True, kw_only=True):
    image: str | None = None
    command: tuple[str, ...] | None = None
    args: tuple[str, ...] | None = None
    num_nodes: int | None = None
    resources_per_node: ResourceRequirements | None = None


class PodSpecPatch(K8sStruct, frozen=True, kw_only=True):
    node_selector: dict[str, str] | None = None
    tolerations: tuple[Toleration, ...] | None = None
    scheduling_gates: tuple[PodSchedulingGate, ...] | None = None


class PodTemplatePatch(K8sStruct, frozen=True, kw_only=True):
    metadata: ObjectMeta | None = None
    spec: PodSpecPatch | None = None


class JobSpecPatch(K8sStruct, frozen=True, kw_only=True):
    template: PodTemplatePatch | None = None


class JobTemplatePatch(K8sStruct, frozen=True, kw_only=True):
    spec: JobSpecPatch | None = None


class ReplicatedJobPatch(K8sStruct, frozen=True, kw_only=True):
    name: str = ""
    template: JobTemplatePatch | None = None


class JobSetSpecPatch(K8sStruct, frozen=True, kw_only=True):
    replicated_jobs: tuple[ReplicatedJobPatch, ...] | None = None


class JobSetTemplatePatch(K8sStruct, frozen=True, kw_only=True):
    spec: JobSetSpecPatch | None = None


class TrainingRuntimeSpecPatch(K8sStruct, frozen=True, kw_only=True):
    template: JobSetTemplatePatch | None = None


class RuntimePatch(K8sStruct, frozen=True, kw_only=True):
    manager: str = ""
    training_runtime_spec: TrainingRuntimeSpecPatch | None = None


class TrainJobSpec(K8sStruct, frozen=True, kw_only=True):
    runtime_ref: RuntimeRef = RuntimeRef()
    trainer: Trainer | None = None
    runtime_patches: tuple[RuntimePatch, ...] = ()
    suspend: bool | None = None
    managed_by: str | None = None


class TrainJobJobStatus(K8sStruct, frozen=True, kw_only=True):
    name: str = ""
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0
    suspended: int = 0


class TrainJobStatus(K8sStruct, frozen=True, kw_only=True):
    conditions: tuple[Condition, ...] = ()  # Suspended, Created, Complete, Failed
    jobs_status: tuple[TrainJobJobStatus, ...] = ()


class TrainJob(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: TrainJobSpec = TrainJobSpec()
    status: TrainJobStatus = TrainJobStatus()


class MLPolicy(K8sStruct, frozen=True, kw_only=True):
    num_nodes: int | None = None


class JobSetTemplateSpec(K8sStruct, frozen=True, kw_only=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: JobSetSpec = JobSetSpec()


class TrainingRuntimeSpec(K8sStruct, frozen=True, kw_only=True):
    ml_policy: MLPolicy | None = None
    template: JobSetTemplateSpec = JobSetTemplateSpec()


class TrainingRuntime(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: TrainingRuntimeSpec = TrainingRuntimeSpec()


class ClusterTrainingRuntime(TrainingRuntime, frozen=True, kw_only=True):
    pass
