"""A minimal Kubeflow training operator: PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob (kubeflow.org/v1)
and the MPI operator's MPIJob (kubeflow.org/v2beta1).

Not suspended: one pod per replica, `<job>-<type>-<index>` (type in lower case) from the replica
type's template, labelled as the operators do. Status: replicaStatuses per type (active,
succeeded, failed), conditions Created, Running (every pod ready or done), Suspended,
Succeeded (the Launcher for an MPIJob, else the Chief/Master, else every Worker succeeded; the
pods still running are then deleted, as cleanPodPolicy Running does) and Failed (any pod
failed). Suspended: the pods are deleted. Acts only when runPolicy.managedBy is unset or the
operator's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from kubesim.controllers.conditions import condition_true, set_condition
from kubesim.controllers.ownership import controller_ref, is_terminal, owned
from kubesim.controllers.workqueue import WorkQueue, per_key
from kubesim.errors import ApiError
from kubesim.resources import PODS, TRAINING_JOBS, ResourceType
from kubesim.store import now_rfc3339
from kubesim.watch import DELETED

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

_copy = msgspec.json.Decoder().decode
_enc = msgspec.json.Encoder().encode
# kind -> (replica specs field, replica types in order, the type whose success is the job's)
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "PyTorchJob": ("pytorchReplicaSpecs", ("Master", "Worker")),
    "TFJob": ("tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator")),
    "XGBoostJob": ("xgbReplicaSpecs", ("Master", "Worker")),
    "PaddleJob": ("paddleReplicaSpecs", ("Master", "Worker")),
    "JAXJob": ("jaxReplicaSpecs", ("Worker",)),
    "MPIJob": ("mpiReplicaSpecs", ("Launcher", "Worker")),
}
_LEADERS = ("Launcher", "Chief", "Master")
TRAINING_OPERATOR = "kubeflow.org/training-operator"
MPI_OPERATOR = "kubeflow.org/mpi-operator"
OPERATORS = (None, "", TRAINING_OPERATOR, MPI_OPERATOR)
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
Key = tuple[str, str, str]  # kind, namespace, name


def replica_types(kind: str, spec: Mapping[str, Any]) -> list[str]:
    field, order = KINDS[kind]
    specs = spec.get(field) or {}
    return [t for t in order if isinstance(specs.get(t), dict)]


class TrainingController:
    def __init__(self, cluster: Cluster) -> None:
        self._store = cluster.store
        self._rt = {rt.kind: rt for rt in TRAINING_JOBS}
        self.queue: WorkQueue[Key] = WorkQueue("training", per_key(self.reconcile, "training"))
        for rt in TRAINING_JOBS:
            self._store.subscribe(rt, self._on_job)
        self._store.subscribe(PODS, self._on_pod)

    def _on_job(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        if etype != DELETED:
            self.queue.add((rt.kind, new["metadata"]["namespace"], new["metadata"]["name"]))

    def _on_pod(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        ref = controller_ref(new)
        if ref is not None and ref.get("kind") in self._rt:
            self.queue.add((ref["kind"], new["metadata"]["namespace"], ref["name"]))

    def reconcile(self, key: Key) -> None:
        kind, ns, name = key
        rt = self._rt[kind]
        e = self._store.find(rt, ns, name)
        if e is None:
            return
        job = e.obj
        spec = job.get("spec") or {}
        policy = spec.get("runPolicy") or {}
        if policy.get("managedBy") not in OPERATORS or job["metadata"].get("deletionTimestamp"):
            return
        uid = job["metadata"]["uid"]
        pods = {p.obj["metadata"]["name"]: p.obj for p in owned(self._store, uid, PODS)
                if (controller_ref(p.obj) or {}).get("uid") == uid}
        types = replica_types(kind, spec)
        field = KINDS[kind][0]
        now = now_rfc3339()
        status: dict[str, Any] = _copy(_enc(job.get("status") or {}))
        done = condition_true(job, "Succeeded") or condition_true(job, "Failed")
        suspended = bool(policy.get("suspend"))
        set_condition(status, "Created", "True", f"{kind}Created", f"{kind} {name} is created.", now)

        if done or suspended:
            for pname, pod in pods.items():
                if (suspended or not is_terminal(pod)) and not pod["metadata"].get("deletionTimestamp"):
                    self._delete_pod(ns, pname)
            if suspended and not done:
                set_condition(status, "Suspended", "True", f"{kind}Suspended", f"{kind} {name} is suspended.", now)
                set_condition(status, "Running", "False", f"{kind}Suspended", f"{kind} {name} is suspended.", now)
                status.pop("startTime", None)
        else:
            if condition_true(job, "Suspended"):
                set_condition(status, "Suspended", "False", f"{kind}Resumed", f"{kind} {name} is resumed.", now)
            status.setdefault("startTime", now)
            for t in types:
                rs = spec[field][t]
                for i in range(int(rs.get("replicas", 1) if rs.get("replicas") is not None else 1)):
                    pname = f"{name}-{t.lower()}-{i}"
                    if pname not in pods:
                        created = self._create_pod(job, kind, t, i, rs)
                        if created is not None:
                            pods[pname] = created
            self._conditions(job, kind, types, pods, status, now)
        status["replicaStatuses"] = {t: _counts(name, t, spec[field][t], pods) for t in types}
        self._store.modify(rt, ns, name, lambda o: o.__setitem__("status", status), status_only=True)

    def _conditions(self, job: Mapping[str, Any], kind: str, types: list[str], pods: Mapping[str, Mapping[str, Any]],
                    status: dict[str, Any], now: str) -> None:
        name = job["metadata"]["name"]
        field = KINDS[kind][0]
        spec = job["spec"]

        def of(t: str) -> list[Mapping[str, Any]]:
            n = spec[field][t].get("replicas")
            return [p for i in range(1 if n is None else int(n)) if (p := pods.get(f"{name}-{t.lower()}-{i}"))]

        mine = [p for t in types for p in of(t)]
        if any(p.get("status", {}).get("phase") == "Failed" for p in mine):
            set_condition(status, "Failed", "True", f"{kind}Failed", f"{kind} {name} has failed because a pod failed.",
                          now)
            set_condition(status, "Running", "False", f"{kind}Failed", f"{kind} {name} has failed.", now)
            status["completionTime"] = now
            return
        leader = next((t for t in _LEADERS if t in types), None)
        deciding = of(leader) if leader is not None else [p for t in types if t == "Worker" for p in of(t)]
        expected = sum(1 if spec[field][t].get("replicas") is None else int(spec[field][t]["replicas"])
                       for t in ([leader] if leader else [t for t in types if t == "Worker"]))
        if deciding and len(deciding) == expected and all(p.get("status", {}).get("phase") == "Succeeded"
                                                          for p in deciding):
            set_condition(status, "Succeeded", "True", f"{kind}Succeeded",
                          f"{kind} {name} is successfully completed.", now)
            set_condition(status, "Running", "False", f"{kind}Succeeded", f"{kind} {name} is completed.", now)
            status["completionTime"] = now
            return
        total = sum(1 if spec[field][t].get("replicas") is None else int(spec[field][t]["replicas"]) for t in types)
        if len(mine) == total and all(condition_true(p, "Ready") or is_terminal(p) for p in mine):
            set_condition(status, "Running", "True", f"{kind}Running", f"{kind} {name} is running.", now)

    def _create_pod(self, job: Mapping[str, Any], kind: str, rtype: str, index: int,
                    rs: Mapping[str, Any]) -> dict[str, Any] | None:
        meta = job["metadata"]
        t = _copy(_enc(rs.get("template") or {}))
        tmeta = t.get("metadata") or {}
        labels = {**(tmeta.get("labels") or {}), JOB_NAME_LABEL: meta["name"],
                  "training.kubeflow.org/replica-type": rtype.lower(),
                  "training.kubeflow.org/replica-index": str(index)}
        pod_spec = t.get("spec") or {}
        restart = rs.get("restartPolicy")
        if restart in ("Always", "OnFailure", "Never"):
            pod_spec["restartPolicy"] = restart
        elif restart == "ExitCode":
            pod_spec["restartPolicy"] = "Never"
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{meta['name']}-{rtype.lower()}-{index}", "labels": labels,
                            "annotations": dict(tmeta.get("annotations") or {}),
                            "ownerReferences": [{"apiVersion": job["apiVersion"], "kind": kind, "name": meta["name"],
                                                 "uid": meta["uid"], "controller": True,
                                                 "blockOwnerDeletion": True}]},
               "spec": pod_spec}
        try:
            return dict(self._store.create(PODS, meta["namespace"], pod).obj)
        except ApiError:
            return None  # an invalid template: the job never gets this pod (as with a real operator)

    def _delete_pod(self, ns: str, name: str) -> None:
        with contextlib.suppress(ApiError):
            self._store.delete(PODS, ns, name)


def _counts(name: str, rtype: str, rs: Mapping[str, Any], pods: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    out = {"active": 0, "succeeded": 0, "failed": 0}
    n = 1 if rs.get("replicas") is None else int(rs["replicas"])
    for i in range(n):
        pod = pods.get(f"{name}-{rtype.lower()}-{i}")
        if pod is None:
            continue
        phase = pod.get("status", {}).get("phase")
        if phase == "Succeeded":
            out["succeeded"] += 1
        elif phase == "Failed":
            out["failed"] += 1
        else:
            out["active"] += 1
    return out
