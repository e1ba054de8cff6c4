"""Kueue's job webhooks as kubesim applies them on create: which objects Kueue manages, and defaults.

- The default LocalQueue (Kueue's LocalQueueDefaulting): a top-level object of a job kind without
  the queue-name label, in a namespace the managedJobsNamespaceSelector matches, that has a
  LocalQueue named `default`, gets `kueue.x-k8s.io/queue-name: default`.
- manageJobsWithoutQueueName: such an object without a queue name is managed too (created
  suspended, or gated for a standalone pod) when its namespace matches the selector.
- Top-level: no controller owner of a kind Kueue integrates (a JobSet's Jobs, a training job's pods,
  a RayJob's RayCluster and submitter Job are run by their parent's admission).
- TrainJobs Kueue manages are created suspended; every TrainJob gets Kueue's (empty) runtime patch.
- Kubeflow training jobs and MPIJobs (runPolicy.suspend) and RayJobs/RayClusters (spec.suspend) that
  Kueue manages are created suspended; a RayJob's submissionMode defaults to K8sJobMode (KubeRay's CRD).

The options come from kq's Kueue configuration (`python -m kubesim --manage-jobs-without-queue-name
--managed-jobs-namespace-selector JSON`); without a selector Kueue's default applies: every
namespace but kube-system and Kueue's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kq.api.appwrapper import infer_pod_sets
from kubesim.controllers.appwrappers import APPWRAPPER_CONTROLLER
from kubesim.controllers.jobs import JOB_CONTROLLER
from kubesim.controllers.jobsets import JOBSET_CONTROLLER
from kubesim.controllers.ray import KUBERAY_CONTROLLER
from kubesim.controllers.training import MPI_OPERATOR, TRAINING_OPERATOR
from kubesim.controllers.trainjobs import TRAINER_CONTROLLER
from kubesim.errors import invalid
from kubesim.resources import ADMISSIONCHECKS, CLUSTERQUEUES, LOCALQUEUES, NAMESPACES, ResourceType

if TYPE_CHECKING:
    from kubesim.store import Store

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
DEFAULT_QUEUE = "default"
NAME_LABEL = "kubernetes.io/metadata.name"
# Kinds whose objects Kueue queues, and whose children it leaves to them.
JOB_KINDS = frozenset(("Job", "JobSet", "Pod", "Deployment", "StatefulSet", "LeaderWorkerSet", "PyTorchJob",
                       "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob", "RayJob", "RayCluster", "TrainJob",
                       "AppWrapper"))
PARENT_KINDS = JOB_KINDS | {"ReplicaSet"}  # a Deployment's pods carry its queue label already
TRAINING_FIELDS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "XGBoostJob": "xgbReplicaSpecs",
                   "PaddleJob": "paddleReplicaSpecs", "JAXJob": "jaxReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}


@dataclass(frozen=True)
class KueueOptions:
    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: Mapping[str, Any] | None = None  # metav1.LabelSelector; None: Kueue's default
    kueue_namespace: str = "kueue-system"

    def selector(self) -> Mapping[str, Any]:
        if self.managed_jobs_namespace_selector is not None:
            return self.managed_jobs_namespace_selector
        return {"matchExpressions": [{"key": NAME_LABEL, "operator": "NotIn",
                                      "values": ["kube-system", self.kueue_namespace]}]}


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics (an empty selector matches everything)."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for req in selector.get("matchExpressions") or ():
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _top_level(obj: Mapping[str, Any]) -> bool:
    return not any(r.get("controller") and r.get("kind") in PARENT_KINDS
                   for r in obj["metadata"].get("ownerReferences") or ())


def _namespace_managed(store: Store, opts: KueueOptions, ns: str) -> bool:
    e = store.find(NAMESPACES, "", ns)
    labels = dict((e.obj["metadata"].get("labels") or {}) if e is not None else {})
    labels.setdefault(NAME_LABEL, ns)
    return selector_matches(opts.selector(), labels)


def apply_queue_defaults(store: Store, opts: KueueOptions, rt: ResourceType, obj: dict[str, Any]) -> bool:
    """Give an unlabelled top-level object the default LocalQueue where Kueue would; True when Kueue
    manages it without a queue name (manageJobsWithoutQueueName)."""
    if rt.kind not in JOB_KINDS or not _top_level(obj):
        return False
    meta = obj["metadata"]
    if (meta.get("labels") or {}).get(QUEUE_LABEL):
        return False
    ns = meta.get("namespace", "")
    if not _namespace_managed(store, opts, ns):
        return False
    if store.find(LOCALQUEUES, ns, DEFAULT_QUEUE) is not None:
        meta.setdefault("labels", {})[QUEUE_LABEL] = DEFAULT_QUEUE
        return False
    return opts.manage_jobs_without_queue_name and rt.kind not in ("Deployment", "StatefulSet", "LeaderWorkerSet")


# Where each kind keeps managedBy, and the value Kueue's webhook may replace: unset, or the kind's own
# controller (CanDefaultManagedBy of each job framework), as kubesim's controllers name it.
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
_KUBEFLOW = ("runPolicy", TRAINING_OPERATOR)
MANAGED_BY: Mapping[str, tuple[str | None, str]] = {
    "Job": (None, JOB_CONTROLLER),
    "JobSet": (None, JOBSET_CONTROLLER),
    "PyTorchJob": _KUBEFLOW, "TFJob": _KUBEFLOW, "XGBoostJob": _KUBEFLOW, "PaddleJob": _KUBEFLOW, "JAXJob": _KUBEFLOW,
    "MPIJob": ("runPolicy", MPI_OPERATOR),
    "RayJob": (None, KUBERAY_CONTROLLER),
    "RayCluster": (None, KUBERAY_CONTROLLER),
    "TrainJob": (None, TRAINER_CONTROLLER),
    "AppWrapper": (None, APPWRAPPER_CONTROLLER),
}


def _multikueue_queue(store: Store, ns: str, local_queue: str) -> bool:
    """Does the LocalQueue's ClusterQueue carry an AdmissionCheck of MultiKueue's controller?"""
    lq = store.find(LOCALQUEUES, ns, local_queue)
    cq_name = ((lq.obj.get("spec") or {}).get("clusterQueue") if lq is not None else None) or ""
    cq = store.find(CLUSTERQUEUES, "", cq_name) if cq_name else None
    if cq is None:
        return False
    rules = ((cq.obj.get("spec") or {}).get("admissionChecksStrategy") or {}).get("admissionChecks") or ()
    for rule in rules:
        ac = store.find(ADMISSIONCHECKS, "", rule.get("name") or "") if isinstance(rule, dict) else None
        if ac is not None and (ac.obj.get("spec") or {}).get("controllerName") == MULTIKUEUE:
            return True
    return False


def default_managed_by(store: Store, rt: ResourceType, obj: dict[str, Any]) -> None:
    """Kueue's ApplyDefaultForManagedBy: a queued object of a kind MultiKueue runs, sent to a
    ClusterQueue with a MultiKueue check, is managed by MultiKueue unless it names another
    controller than its own (so the manager never runs it; the worker's copy does)."""
    where = MANAGED_BY.get(rt.kind)
    queue = (obj["metadata"].get("labels") or {}).get(QUEUE_LABEL)
    spec = obj.get("spec")
    if where is None or not queue or not isinstance(spec, dict) or not _top_level(obj):
        return
    parent_field, own = where
    parent = spec.get(parent_field) or {} if parent_field else spec
    if not isinstance(parent, dict) or parent.get("managedBy") not in (None, own):
        return
    if _multikueue_queue(store, obj["metadata"].get("namespace", ""), queue):
        parent["managedBy"] = MULTIKUEUE
        if parent_field:
            spec[parent_field] = parent


def _queued(obj: Mapping[str, Any], managed: bool) -> bool:
    return managed or bool((obj["metadata"].get("labels") or {}).get(QUEUE_LABEL))


def default_training_job(rt: ResourceType, obj: dict[str, Any], managed: bool) -> None:
    name = obj["metadata"]["name"]
    spec = obj.get("spec")
    field = TRAINING_FIELDS[rt.kind]
    if not isinstance(spec, dict) or not isinstance(spec.get(field), dict) or not spec[field]:
        raise invalid(rt, name, f"spec.{field}", None, "Required value")
    for rtype, rs in spec[field].items():
        if not isinstance(rs, dict) or not isinstance(rs.get("template"), dict):
            raise invalid(rt, name, f"spec.{field}.{rtype}.template", None, "Required value")
        rs.setdefault("replicas", 1)
    policy = spec.setdefault("runPolicy", {})
    policy.setdefault("suspend", False)
    if _queued(obj, managed):
        policy["suspend"] = True  # Kueue's webhook


def default_ray(rt: ResourceType, obj: dict[str, Any], managed: bool) -> None:
    name = obj["metadata"]["name"]
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise invalid(rt, name, "spec", None, "Required value")
    cluster = spec.get("rayClusterSpec") if rt.kind == "RayJob" else spec
    if rt.kind == "RayJob":
        spec.setdefault("submissionMode", "K8sJobMode")
        if cluster is None and not spec.get("clusterSelector"):
            raise invalid(rt, name, "spec.rayClusterSpec", None, "Required value")
    if isinstance(cluster, dict):
        head = cluster.get("headGroupSpec")
        if not isinstance(head, dict) or not isinstance(head.get("template"), dict):
            raise invalid(rt, name, "spec.rayClusterSpec.headGroupSpec.template" if rt.kind == "RayJob"
                          else "spec.headGroupSpec.template", None, "Required value")
        for g in cluster.get("workerGroupSpecs") or ():
            if isinstance(g, dict):
                g.setdefault("replicas", 1)
                g.setdefault("numOfHosts", 1)
    spec.setdefault("suspend", False)
    if _queued(obj, managed) and not spec.get("clusterSelector"):
        spec["suspend"] = True  # Kueue's webhook


KUEUE_MANAGER = "kueue.x-k8s.io/manager"


def default_trainjob(rt: ResourceType, obj: dict[str, Any], managed: bool) -> None:
    name = obj["metadata"]["name"]
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("runtimeRef"), dict) or not spec["runtimeRef"].get("name"):
        raise invalid(rt, name, "spec.runtimeRef.name", None, "Required value")
    ref = spec["runtimeRef"]
    ref.setdefault("apiGroup", "trainer.kubeflow.org")
    ref.setdefault("kind", "ClusterTrainingRuntime")
    if _queued(obj, managed):
        spec["suspend"] = True  # Kueue's webhook
    patches = spec.setdefault("runtimePatches", [])
    patches.append({"manager": KUEUE_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}})


def default_appwrapper(rt: ResourceType, obj: dict[str, Any], managed: bool) -> None:
    """The AppWrapper webhook's checks (every component a map with a name; podSets declared or known)
    and Kueue's: a queued AppWrapper is created suspended."""
    name = obj["metadata"]["name"]
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("components"), list) or not spec["components"]:
        raise invalid(rt, name, "spec.components", None, "Required value")
    for i, c in enumerate(spec["components"]):
        t = c.get("template") if isinstance(c, dict) else None
        if not isinstance(t, dict) or not (t.get("metadata") or {}).get("name"):
            raise invalid(rt, name, f"spec.components[{i}].template.metadata.name", None, "Required value")
        if not c.get("podSets") and not infer_pod_sets(t) and t.get("kind") not in ("Service", "ConfigMap", "Secret"):
            raise invalid(rt, name, f"spec.components[{i}].podSets", None,
                          f"podSets must be declared for a {t.get('kind')}")
    spec.setdefault("suspend", False)
    if _queued(obj, managed):
        spec["suspend"] = True  # Kueue's webhook
