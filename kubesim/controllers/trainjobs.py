"""A minimal Kubeflow Trainer: TrainJob (trainer.kubeflow.org/v1alpha1) runs a JobSet.

The JobSet, named after the TrainJob and owned by it, comes from the runtime the TrainJob names
(a ClusterTrainingRuntime, or a TrainingRuntime in its namespace): the runtime's JobSet template
with the TrainJob's trainer settings on the replicated Job labelled
`trainer.kubeflow.org/trainjob-ancestor-step: trainer` (numNodes, else mlPolicy.numNodes, as
parallelism and completions; image, command, args and resourcesPerNode on its `node` container, else
its first) and every runtime patch's replicatedJobs (pod-template labels, annotations, nodeSelector,
tolerations, schedulingGates). Suspending the TrainJob suspends the JobSet; resuming writes the
current templates into it first (as the Trainer does). Status: jobsStatus from the JobSet's
replicatedJobsStatus, Complete / Failed from its conditions, Suspended. Acts only when managedBy is
unset or the Trainer's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from kubesim.controllers.conditions import condition_true, set_condition
from kubesim.controllers.ownership import controller_ref
from kubesim.controllers.workqueue import WorkQueue, per_key
from kubesim.errors import ApiError
from kubesim.resources import CLUSTER_TRAINING_RUNTIMES, JOBSETS, TRAINING_RUNTIMES, TRAINJOBS, ResourceType
from kubesim.store import now_rfc3339
from kubesim.watch import DELETED

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

_copy = msgspec.json.Decoder().decode
_enc = msgspec.json.Encoder().encode
TRAINER_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
TRAINER = (None, "", TRAINER_CONTROLLER)
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
Key = tuple[str, str]


def _trainer_container(pod_spec: dict[str, Any], trainer: Mapping[str, Any]) -> None:
    containers = pod_spec.get("containers") or []
    if not containers:
        return
    c = next((c for c in containers if c.get("name") == "node"), containers[0])
    for field, key in (("image", "image"), ("command", "command"), ("args", "args"), ("resourcesPerNode", "resources")):
        if trainer.get(field) is not None:
            c[key] = _copy(_enc(trainer[field]))


def _apply_patch(pod: dict[str, Any], patch: Mapping[str, Any]) -> None:
    meta, spec = patch.get("metadata") or {}, patch.get("spec") or {}
    pm = pod.setdefault("metadata", {})
    for k in ("labels", "annotations"):
        if meta.get(k):
            pm[k] = {**(pm.get(k) or {}), **meta[k]}
    ps = pod.setdefault("spec", {})
    if spec.get("nodeSelector"):
        ps["nodeSelector"] = {**(ps.get("nodeSelector") or {}), **spec["nodeSelector"]}
    for k in ("tolerations", "schedulingGates"):
        if spec.get(k):
            ps[k] = [*(ps.get(k) or []), *spec[k]]


def child_replicated_jobs(tj: Mapping[str, Any], runtime: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = tj.get("spec") or {}
    trainer = spec.get("trainer") or {}
    nodes = trainer.get("numNodes") or (runtime.get("mlPolicy") or {}).get("numNodes")
    rjs: list[dict[str, Any]] = _copy(_enc(((runtime.get("template") or {}).get("spec") or {}).get("replicatedJobs")
                                           or []))
    patches = [rj for p in spec.get("runtimePatches") or ()
               for rj in (((p.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {})
               .get("replicatedJobs") or ()]
    for rj in rjs:
        rj.setdefault("replicas", 1)
        jt = rj.setdefault("template", {})
        js = jt.setdefault("spec", {})
        pod = js.setdefault("template", {})
        if ((jt.get("metadata") or {}).get("labels") or {}).get(ANCESTOR_LABEL) == "trainer":
            if nodes:
                js["parallelism"] = js["completions"] = int(nodes)
            _trainer_container(pod.setdefault("spec", {}), trainer)
        for p in patches:
            if p.get("name") == rj.get("name"):
                _apply_patch(pod, (((p.get("template") or {}).get("spec") or {}).get("template") or {}))
    return rjs


class TrainJobController:
    def __init__(self, cluster: Cluster) -> None:
        self._store = cluster.store
        self.queue: WorkQueue[Key] = WorkQueue("trainjob", per_key(self.reconcile, "trainjob"))
        self._store.subscribe(TRAINJOBS, self._on_trainjob)
        self._store.subscribe(JOBSETS, self._on_jobset)
        self._store.subscribe(TRAINING_RUNTIMES, self._on_runtime)
        self._store.subscribe(CLUSTER_TRAINING_RUNTIMES, self._on_runtime)

    def _on_trainjob(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        if etype != DELETED:
            self.queue.add((new["metadata"]["namespace"], new["metadata"]["name"]))

    def _on_jobset(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        if (ref := controller_ref(new, "TrainJob")) is not None:
            self.queue.add((new["metadata"]["namespace"], ref["name"]))

    def _on_runtime(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        for e in self._store.list(TRAINJOBS):  # a TrainJob may have been waiting for it
            self.queue.add((e.obj["metadata"]["namespace"], e.obj["metadata"]["name"]))

    def _runtime(self, tj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        ref = (tj.get("spec") or {}).get("runtimeRef") or {}
        if ref.get("kind") == "TrainingRuntime":
            e = self._store.find(TRAINING_RUNTIMES, tj["metadata"]["namespace"], ref.get("name", ""))
        else:
            e = self._store.find(CLUSTER_TRAINING_RUNTIMES, "", ref.get("name", ""))
        return (e.obj.get("spec") or {}) if e is not None else None

    def reconcile(self, key: Key) -> None:
        ns, name = key
        e = self._store.find(TRAINJOBS, ns, name)
        if e is None:
            return
        tj = e.obj
        spec = tj.get("spec") or {}
        if spec.get("managedBy") not in TRAINER or tj["metadata"].get("deletionTimestamp"):
            return
        runtime = self._runtime(tj)
        now = now_rfc3339()
        status: dict[str, Any] = _copy(_enc(tj.get("status") or {}))
        suspended = bool(spec.get("suspend"))
        done = condition_true(tj, "Complete") or condition_true(tj, "Failed")
        js_entry = self._store.find(JOBSETS, ns, name)
        js = js_entry.obj if js_entry is not None and (controller_ref(js_entry.obj) or {}).get(
            "uid") == tj["metadata"]["uid"] else None
        if runtime is not None and not done:
            if js is None and not suspended:
                self._create(tj, runtime)
            elif js is not None and bool((js.get("spec") or {}).get("suspend")) != suspended:
                rjs = child_replicated_jobs(tj, runtime)
                self._store.modify(JOBSETS, ns, name, lambda o: _set_suspend(o, suspended, rjs))
        if suspended and not done:
            set_condition(status, "Suspended", "True", "Suspended", "TrainJob is suspended", now)
        elif condition_true(tj, "Suspended"):
            set_condition(status, "Suspended", "False", "Resumed", "TrainJob is resumed", now)
        if js is not None:
            jst = js.get("status") or {}
            status["jobsStatus"] = [{k: s.get(k, 0) for k in ("name", "ready", "succeeded", "failed", "active",
                                                              "suspended")}
                                    for s in jst.get("replicatedJobsStatus") or ()]
            if condition_true(js, "Completed"):
                set_condition(status, "Complete", "True", "JobsCompleted", "TrainJob completed successfully", now)
            elif condition_true(js, "Failed"):
                set_condition(status, "Failed", "True", "JobsFailed", "TrainJob failed", now)
        self._store.modify(TRAINJOBS, ns, name, lambda o: o.__setitem__("status", status), status_only=True)

    def _create(self, tj: Mapping[str, Any], runtime: Mapping[str, Any]) -> None:
        meta = tj["metadata"]
        js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": meta["name"], "labels": {"trainer.kubeflow.org/trainjob-name": meta["name"]},
                           "ownerReferences": [{"apiVersion": tj["apiVersion"], "kind": "TrainJob",
                                                "name": meta["name"], "uid": meta["uid"], "controller": True,
                                                "blockOwnerDeletion": True}]},
              "spec": {"replicatedJobs": child_replicated_jobs(tj, runtime), "suspend": False}}
        with contextlib.suppress(ApiError):  # an invalid runtime template: no JobSet, as with the Trainer
            self._store.create(JOBSETS, meta["namespace"], js)


def _set_suspend(js: dict[str, Any], suspend: bool, rjs: list[dict[str, Any]]) -> None:
    if not suspend:  # resuming: the current templates (the admission's directives) first
        by_name = {rj.get("name"): rj for rj in rjs}
        for rj in js["spec"].get("replicatedJobs") or ():
            new = by_name.get(rj.get("name"))
            if new is not None:
                rj["template"]["spec"]["template"] = new["template"]["spec"]["template"]
    js["spec"]["suspend"] = suspend
