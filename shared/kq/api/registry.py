"""Every kind kq knows: where it lives in the API, its Struct, and one cached decoder per kind.

`decode_object` is the mirror's fast path: raw Kubernetes JSON straight into the
Struct with a Decoder built once per kind.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kq.api import apps, appwrapper, core, events, kueue, training
from kq.api.constants import KUEUE_GROUP, KUEUE_VERSION

__all__ = [
    "KindInfo",
    "KINDS",
    "UnknownKindError",
    "kind_info",
    "kind_for",
    "decode_object",
    "encode_object",
    "decoder_for",
]


class KindInfo(msgspec.Struct, frozen=True, kw_only=True):
    kind: str  # "ClusterQueue"
    group: str  # "" for the core group
    version: str
    plural: str  # the REST resource: "clusterqueues"
    namespaced: bool
    type: Any  # the msgspec Struct class
    has_status: bool  # served with a status subresource
    short_names: tuple[str, ...] = ()
    mirrored: bool = True  # the watcher lists and watches it into KQ_OBJECTS

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def token(self) -> str:
        """Lower-case kind, as used in NATS subjects and command kinds: "clusterqueue"."""
        return self.kind.lower()

    @property
    def strict(self) -> bool:
        """Kueue kinds reject unknown fields; core kinds ignore them."""
        return self.group == KUEUE_GROUP


def _kueue(kind: str, plural: str, namespaced: bool, type_: type, has_status: bool, *short: str) -> KindInfo:
    return KindInfo(
        kind=kind,
        group=KUEUE_GROUP,
        version=KUEUE_VERSION,
        plural=plural,
        namespaced=namespaced,
        type=type_,
        has_status=has_status,
        short_names=short,
    )


KINDS: tuple[KindInfo, ...] = (
    KindInfo(kind="Namespace", group="", version="v1", plural="namespaces", namespaced=False,
             type=core.Namespace, has_status=True, short_names=("ns",)),
    KindInfo(kind="Node", group="", version="v1", plural="nodes", namespaced=False,
             type=core.Node, has_status=True, short_names=("no",)),
    KindInfo(kind="Pod", group="", version="v1", plural="pods", namespaced=True,
             type=core.Pod, has_status=True, short_names=("po",)),
    KindInfo(kind="PriorityClass", group="scheduling.k8s.io", version="v1", plural="priorityclasses",
             namespaced=False, type=core.PriorityClass, has_status=False, short_names=("pc",)),
    KindInfo(kind="Secret", group="", version="v1", plural="secrets", namespaced=True,
             type=core.Secret, has_status=False),
    KindInfo(kind="Job", group="batch", version="v1", plural="jobs", namespaced=True,
             type=core.Job, has_status=True),
    KindInfo(kind="JobSet", group="jobset.x-k8s.io", version="v1alpha2", plural="jobsets", namespaced=True,
             type=core.JobSet, has_status=True),
    KindInfo(kind="Deployment", group="apps", version="v1", plural="deployments", namespaced=True,
             type=apps.Deployment, has_status=True, short_names=("deploy",)),
    KindInfo(kind="ReplicaSet", group="apps", version="v1", plural="replicasets", namespaced=True,
             type=apps.ReplicaSet, has_status=True, short_names=("rs",)),
    KindInfo(kind="StatefulSet", group="apps", version="v1", plural="statefulsets", namespaced=True,
             type=apps.StatefulSet, has_status=True, short_names=("sts",)),
    KindInfo(kind="LeaderWorkerSet", group="leaderworkerset.x-k8s.io", version="v1", plural="leaderworkersets",
             namespaced=True, type=apps.LeaderWorkerSet, has_status=True, short_names=("lws",)),
    *(KindInfo(kind=kind, group="kubeflow.org", version="v1", plural=f"{kind.lower()}s", namespaced=True,
               type=getattr(training, kind), has_status=True)
      for kind in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob")),
    KindInfo(kind="MPIJob", group="kubeflow.org", version="v2beta1", plural="mpijobs", namespaced=True,
             type=training.MPIJob, has_status=True),
    KindInfo(kind="RayJob", group="ray.io", version="v1", plural="rayjobs", namespaced=True,
             type=training.RayJob, has_status=True),
    KindInfo(kind="TrainJob", group="trainer.kubeflow.org", version="v1alpha1", plural="trainjobs", namespaced=True,
             type=training.TrainJob, has_status=True),
    KindInfo(kind="TrainingRuntime", group="trainer.kubeflow.org", version="v1alpha1", plural="trainingruntimes",
             namespaced=True, type=training.TrainingRuntime, has_status=False),
    KindInfo(kind="ClusterTrainingRuntime", group="trainer.kubeflow.org", version="v1alpha1",
             plural="clustertrainingruntimes", namespaced=False, type=training.ClusterTrainingRuntime,
             has_status=False),
    KindInfo(kind="AppWrapper", group="workload.codeflare.dev", version="v1beta2", plural="appwrappers",
             namespaced=True, type=appwrapper.AppWrapper, has_status=True, short_names=("aw",)),
    KindInfo(kind="RayCluster", group="ray.io", version="v1", plural="rayclusters", namespaced=True,
             type=training.RayCluster, has_status=True),
    _kueue("ResourceFlavor", "resourceflavors", False, kueue.ResourceFlavor, False, "flavor", "flavors", "rf"),
    _kueue("ClusterQueue", "clusterqueues", False, kueue.ClusterQueue, True, "cq"),
    _kueue("LocalQueue", "localqueues", True, kueue.LocalQueue, True, "queue", "queues", "lq"),
    _kueue("Cohort", "cohorts", False, kueue.Cohort, True),
    _kueue("Topology", "topologies", False, kueue.Topology, False),
    _kueue("AdmissionCheck", "admissionchecks", False, kueue.AdmissionCheck, True),
    _kueue("MultiKueueConfig", "multikueueconfigs", False, kueue.MultiKueueConfig, False),
    _kueue("MultiKueueCluster", "multikueueclusters", False, kueue.MultiKueueCluster, True),
    _kueue("WorkloadPriorityClass", "workloadpriorityclasses", False, kueue.WorkloadPriorityClass, False),
    _kueue("Workload", "workloads", True, kueue.Workload, True, "wl"),
    # Written by the watcher (kq.messages.RecordEvent), read by `kq describe` from the API server.
    KindInfo(kind="Event", group="", version="v1", plural="events", namespaced=True,
             type=events.Event, has_status=False, short_names=("ev",), mirrored=False),
)


class UnknownKindError(LookupError):
    pass


_BY_NAME: dict[str, KindInfo] = {}
for _info in KINDS:
    for _name in (_info.token, _info.plural, *_info.short_names):
        _BY_NAME[_name] = _info
_BY_API: dict[tuple[str, str], KindInfo] = {(i.api_version, i.kind): i for i in KINDS}
_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {}
_ENCODER = msgspec.json.Encoder()


def kind_info(kind: str) -> KindInfo:
    """Look a kind up by name, case-insensitively: "ClusterQueue", "clusterqueue", "clusterqueues", "cq"."""
    info = _BY_NAME.get(kind.lower())
    if info is None:
        raise UnknownKindError(f"unknown kind {kind!r}; known: {', '.join(i.kind for i in KINDS)}")
    return info


def kind_for(api_version: str, kind: str) -> KindInfo:
    """The kind served at exactly this apiVersion (v1beta1 Kueue objects go through kq.api.convert first)."""
    info = _BY_API.get((api_version, kind))
    if info is None:
        raise UnknownKindError(f"unknown apiVersion/kind {api_version}/{kind}")
    return info


def decoder_for(kind: str) -> msgspec.json.Decoder[Any]:
    info = kind_info(kind)
    dec = _DECODERS.get(info.token)
    if dec is None:
        dec = _DECODERS[info.token] = msgspec.json.Decoder(info.type)
    return dec


def decode_object(kind: str, raw: bytes) -> Any:
    """Raw Kubernetes JSON of one object into its Struct (msgspec.ValidationError when it does not fit)."""
    return decoder_for(kind).decode(raw)


def encode_object(obj: msgspec.Struct) -> bytes:
    """JSON for the API server, with apiVersion and kind filled in when the Struct left them empty."""
    if getattr(obj, "kind", None) == "" or getattr(obj, "api_version", None) == "":
        info = kind_info(type(obj).__name__)
        obj = msgspec.structs.replace(obj, api_version=info.api_version, kind=info.kind)
    return _ENCODER.encode(obj)
