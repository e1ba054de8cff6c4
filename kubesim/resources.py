"""The resources kubesim serves: group/version/plural, kind, scope and subresources.

Scope and subresources follow Kubernetes and Kueue's CRDs exactly: a client
that gets the scope wrong here would get it wrong against a real cluster too.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    status: bool = False  # has a status subresource
    custom: bool = False  # a CustomResourceDefinition (no strategic merge patch, rv required on PUT)
    keep_status_on_create: bool = False  # Nodes may be created with their status
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    extra_subresources: tuple[str, ...] = field(default=())
    # Derived once (read on every request and commit): identity inside a cluster's store,
    # plural.group (plural for core), and group/version (version for core).
    key: str = field(init=False, repr=False, compare=False)
    api_version: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.plural}.{self.group}" if self.group else self.plural)
        object.__setattr__(self, "api_version", f"{self.group}/{self.version}" if self.group else self.version)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


_KUEUE = "kueue.x-k8s.io"
_V1B2 = "v1beta2"


def _kueue(plural: str, kind: str, namespaced: bool, status: bool, short: tuple[str, ...]) -> ResourceType:
    return ResourceType(
        _KUEUE, _V1B2, plural, kind, namespaced, status=status, custom=True, short_names=short, categories=("kueue",)
    )


RESOURCES: tuple[ResourceType, ...] = (
    # core/v1
    ResourceType("", "v1", "namespaces", "Namespace", False, status=True, short_names=("ns",)),
    ResourceType("", "v1", "nodes", "Node", False, status=True, keep_status_on_create=True, short_names=("no",)),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        status=True,
        short_names=("po",),
        categories=("all",),
        extra_subresources=("binding",),
    ),
    ResourceType("", "v1", "secrets", "Secret", True),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, short_names=("cm",)),
    ResourceType("", "v1", "events", "Event", True, short_names=("ev",)),
    ResourceType("", "v1", "limitranges", "LimitRange", True, short_names=("limits",)),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=("sa",)),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, short_names=("ev",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short_names=("pc",)),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        status=True,
        short_names=("crd", "crds"),
    ),
    # batch/v1
    ResourceType("batch", "v1", "jobs", "Job", True, status=True, categories=("all",)),
    # apps/v1 (the serving integrations)
    ResourceType("apps", "v1", "deployments", "Deployment", True, status=True, short_names=("deploy",),
                 categories=("all",)),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, status=True, short_names=("rs",),
                 categories=("all",)),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True, status=True, short_names=("sts",),
                 categories=("all",)),
    # leaderworkerset.x-k8s.io/v1
    ResourceType("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True, status=True,
                 custom=True, short_names=("lws",)),
    # jobset.x-k8s.io/v1alpha2
    ResourceType("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True, status=True, custom=True),
    # kubeflow.org (the training operator's v1 kinds, the MPI operator's v2beta1 MPIJob) and ray.io/v1
    *(ResourceType("kubeflow.org", "v1", f"{kind.lower()}s", kind, True, status=True, custom=True)
      for kind in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob")),
    ResourceType("kubeflow.org", "v2beta1", "mpijobs", "MPIJob", True, status=True, custom=True),
    ResourceType("ray.io", "v1", "rayjobs", "RayJob", True, status=True, custom=True),
    ResourceType("workload.codeflare.dev", "v1beta2", "appwrappers", "AppWrapper", True, status=True, custom=True,
                 short_names=("aw",)),
    ResourceType("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", True, status=True, custom=True),
    ResourceType("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime", True, custom=True),
    ResourceType("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", False,
                 custom=True),
    ResourceType("ray.io", "v1", "rayclusters", "RayCluster", True, status=True, custom=True),
    # kueue.x-k8s.io/v1beta2 (scope and status subresources as in Kueue's CRDs)
    _kueue("resourceflavors", "ResourceFlavor", False, False, ("flavor", "flavors", "rf")),
    _kueue("clusterqueues", "ClusterQueue", False, True, ("cq",)),
    _kueue("localqueues", "LocalQueue", True, True, ("queue", "queues", "lq")),
    _kueue("cohorts", "Cohort", False, True, ("co",)),
    _kueue("topologies", "Topology", False, False, ("topo",)),
    _kueue("admissionchecks", "AdmissionCheck", False, True, ("ac",)),
    _kueue("multikueueconfigs", "MultiKueueConfig", False, False, ("mkconf",)),
    _kueue("multikueueclusters", "MultiKueueCluster", False, True, ("mkc",)),
    _kueue("workloadpriorityclasses", "WorkloadPriorityClass", False, False, ("wpc",)),
    _kueue("workloads", "Workload", True, True, ("kwl", "kueueworkload", "kueueworkloads")),
)

_BY_PATH: dict[tuple[str, str, str], ResourceType] = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_KEY: dict[str, ResourceType] = {r.key: r for r in RESOURCES}


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    return _BY_PATH.get((group, version, plural))


def by_kind(api_version: str, kind: str) -> ResourceType | None:
    return next((r for r in RESOURCES if r.api_version == api_version and r.kind == kind), None)


def by_key(key: str) -> ResourceType:
    return _BY_KEY[key]


def groups() -> dict[str, list[str]]:
    """Group name -> its versions (in order of first appearance), core group excluded."""
    out: dict[str, list[str]] = {}
    for r in RESOURCES:
        if r.group and r.version not in out.setdefault(r.group, []):
            out[r.group].append(r.version)
    return out


def in_group_version(group: str, version: str) -> list[ResourceType]:
    return [r for r in RESOURCES if r.group == group and r.version == version]


# Handy names for the controllers.
NAMESPACES = _BY_KEY["namespaces"]
NODES = _BY_KEY["nodes"]
PODS = _BY_KEY["pods"]
EVENTS = _BY_KEY["events"]
JOBS = _BY_KEY["jobs.batch"]
JOBSETS = _BY_KEY["jobsets.jobset.x-k8s.io"]
DEPLOYMENTS = _BY_KEY["deployments.apps"]
REPLICASETS = _BY_KEY["replicasets.apps"]
STATEFULSETS = _BY_KEY["statefulsets.apps"]
LEADERWORKERSETS = _BY_KEY["leaderworkersets.leaderworkerset.x-k8s.io"]
WORKLOADS = _BY_KEY["workloads.kueue.x-k8s.io"]
LOCALQUEUES = _BY_KEY["localqueues.kueue.x-k8s.io"]
CLUSTERQUEUES = _BY_KEY["clusterqueues.kueue.x-k8s.io"]
ADMISSIONCHECKS = _BY_KEY["admissionchecks.kueue.x-k8s.io"]
TRAINING_JOBS = tuple(r for r in RESOURCES if r.group == "kubeflow.org")
RAYJOBS = _BY_KEY["rayjobs.ray.io"]
RAYCLUSTERS = _BY_KEY["rayclusters.ray.io"]
TRAINJOBS = _BY_KEY["trainjobs.trainer.kubeflow.org"]
APPWRAPPERS = _BY_KEY["appwrappers.workload.codeflare.dev"]
TRAINING_RUNTIMES = _BY_KEY["trainingruntimes.trainer.kubeflow.org"]
CLUSTER_TRAINING_RUNTIMES = _BY_KEY["clustertrainingruntimes.trainer.kubeflow.org"]
