"""workload.codeflare.dev/v1beta2 AppWrapper: the fields kq reads, and its podsets' paths.

An AppWrapper wraps components (any Kubernetes objects, kept raw); each has podSets: a path to a
pod template inside the component (`template.spec.template`, `template.spec.replicatedJobs[0]...`)
and a replica count. Declared podSets win; otherwise they are inferred for the kinds the AppWrapper
project knows (pkg/utils InferPodSets): Pod, Job, Deployment, StatefulSet, JobSet, the Kubeflow
training kinds, RayCluster and RayJob. Shared by the watcher's adapter and kubesim's controller.
"""

from __future__ import annotations

import re
from typing import Any

from kq.api.core import PodSchedulingGate, RawObject, Toleration
from kq.api.meta import Condition, K8sStruct, ObjectMeta

__all__ = ["AppWrapperPodSet", "AppWrapperPodSetInfo", "AppWrapperComponent", "AppWrapperSpec", "AppWrapperStatus",
           "AppWrapper", "PodSetPathError", "value_at", "infer_pod_sets", "component_pod_sets"]

_KUBEFLOW_ORDER = {
    "PyTorchJob": ("pytorchReplicaSpecs", ("Master", "Worker")),
    "TFJob": ("tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator")),
    "XGBoostJob": ("xgbReplicaSpecs", ("Master", "Worker")),
    "PaddleJob": ("paddleReplicaSpecs", ("Master", "Worker")),
    "JAXJob": ("jaxReplicaSpecs", ("Worker",)),
    "MPIJob": ("mpiReplicaSpecs", ("Launcher", "Worker")),
}
_STEP = re.compile(r"\.?([A-Za-z0-9_-]+)|\[(\d+)\]")


class AppWrapperPodSet(K8sStruct, frozen=True, kw_only=True):
    path: str
    replicas: int | None = None  # 1 when unset
    annotations: dict[str, str] = {}


class AppWrapperPodSetInfo(K8sStruct, frozen=True, kw_only=True):
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    tolerations: tuple[Toleration, ...] = ()
    scheduling_gates: tuple[PodSchedulingGate, ...] = ()


class AppWrapperComponent(K8sStruct, frozen=True, kw_only=True):
    template: RawObject = {}
    pod_sets: tuple[AppWrapperPodSet, ...] = ()  # declared
    pod_set_infos: tuple[AppWrapperPodSetInfo, ...] = ()
    annotations: dict[str, str] = {}


class AppWrapperSpec(K8sStruct, frozen=True, kw_only=True):
    components: tuple[AppWrapperComponent, ...] = ()
    suspend: bool = False
    managed_by: str | None = None


class AppWrapperStatus(K8sStruct, frozen=True, kw_only=True):
    phase: str = ""  # Suspended Resuming Running Resetting Suspending Succeeded Failed Terminating
    conditions: tuple[Condition, ...] = ()  # QuotaReserved ResourcesDeployed PodsReady Unhealthy


class AppWrapper(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: AppWrapperSpec = AppWrapperSpec()
    status: AppWrapperStatus = AppWrapperStatus()


class PodSetPathError(ValueError):
    pass


def value_at(component: dict[str, Any], path: str) -> Any:
    """The value at an AppWrapper path (`template.spec.replicatedJobs[1].template`), rooted at the
    component (so the path starts with `template`); PodSetPathError when it leads nowhere."""
    if not path.startswith("template"):
        raise PodSetPathError(f"{path}: the first element of the path must be 'template'")
    node: Any = component
    pos = 0
    while pos < len(path):
        m = _STEP.match(path, pos)
        if m is None:
            raise PodSetPathError(f"{path}: invalid path element at {path[pos:]!r}")
        key, index = m.group(1), m.group(2)
        if key is not None:
            if not isinstance(node, dict) or key not in node:
                raise PodSetPathError(f"{path}: missing field {key!r}")
            node = node[key]
        else:
            if not isinstance(node, list) or int(index) >= len(node):
                raise PodSetPathError(f"{path}: no element [{index}]")
            node = node[int(index)]
        pos = m.end()
    return node


def _int(component: dict[str, Any], path: str, default: int) -> int:
    try:
        value = value_at(component, path)
    except PodSetPathError:
        return default
    return value if isinstance(value, int) else default


def _job_pods(component: dict[str, Any], prefix: str) -> int:
    pods = _int(component, f"{prefix}.parallelism", 1)
    completions = _int(component, f"{prefix}.completions", pods)
    return min(pods, completions)


def infer_pod_sets(template: RawObject) -> list[AppWrapperPodSet]:
    """InferPodSets for the kinds the AppWrapper project knows; [] for others."""
    c = {"template": template}
    kind = template.get("kind", "")
    spec = template.get("spec") or {}
    if kind == "Pod":
        return [AppWrapperPodSet(path="template", replicas=1)]
    if kind == "Job":
        return [AppWrapperPodSet(path="template.spec.template", replicas=_job_pods(c, "template.spec"))]
    if kind in ("Deployment", "StatefulSet"):
        return [AppWrapperPodSet(path="template.spec.template", replicas=_int(c, "template.spec.replicas", 1))]
    if kind == "JobSet":
        out = []
        for i, rj in enumerate(spec.get("replicatedJobs") or ()):
            prefix = f"template.spec.replicatedJobs[{i}]"
            replicas = rj.get("replicas", 1) if isinstance(rj.get("replicas", 1), int) else 1
            out.append(AppWrapperPodSet(path=f"{prefix}.template.spec.template",
                                        replicas=replicas * _job_pods(c, f"{prefix}.template.spec")))
        return out
    if kind in _KUBEFLOW_ORDER:
        field, order = _KUBEFLOW_ORDER[kind]
        specs = spec.get(field) or {}
        return [AppWrapperPodSet(path=f"template.spec.{field}.{t}.template",
                                 replicas=_int(c, f"template.spec.{field}.{t}.replicas", 1))
                for t in order if t in specs]
    if kind in ("RayCluster", "RayJob"):
        base = "template.spec." if kind == "RayCluster" else "template.spec.rayClusterSpec."
        cluster = spec if kind == "RayCluster" else (spec.get("rayClusterSpec") or {})
        out = [AppWrapperPodSet(path=f"{base}headGroupSpec.template", replicas=1)]
        for i, g in enumerate(cluster.get("workerGroupSpecs") or ()):
            n = g.get("replicas", 1) if isinstance(g.get("replicas", 1), int) else 1
            hosts = g.get("numOfHosts", 1) if isinstance(g.get("numOfHosts", 1), int) else 1
            out.append(AppWrapperPodSet(path=f"{base}workerGroupSpecs[{i}].template", replicas=n * max(hosts, 1)))
        return out
    return []


def component_pod_sets(component: AppWrapperComponent) -> list[AppWrapperPodSet]:
    """The component's podSets: declared, else inferred."""
    return list(component.pod_sets) or infer_pod_sets(component.template)
