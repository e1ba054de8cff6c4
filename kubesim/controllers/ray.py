"""A minimal KubeRay operator: RayCluster and RayJob (ray.io/v1).

- RayCluster, not suspended: a head pod `<cluster>-head` and `replicas x numOfHosts` pods
  `<cluster>-<group>-worker-<i>` per worker group (recreated when deleted); status.state `ready`
  once every pod runs and is ready. Suspended: its pods are deleted, state `suspended`.
- RayJob, not suspended: creates its RayCluster `<job>-raycluster` from rayClusterSpec
  (Initializing); once the cluster is ready, in K8sJobMode (the default) the submitter Job `<job>`
  from submitterPodTemplate or KubeRay's default (Running); when that Job completes or fails, jobStatus
  SUCCEEDED or FAILED and jobDeploymentStatus Complete or Failed, and with shutdownAfterJobFinishes
  the cluster is deleted. In the other submission modes the job runs until the head pod ends.
  Suspended while Initializing or Running: cluster and submitter Job deleted, Suspended.
Acts only when spec.managedBy is unset or KubeRay's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from kubesim.controllers.conditions import condition_true
from kubesim.controllers.ownership import controller_ref, is_terminal, owned
from kubesim.controllers.workqueue import WorkQueue, per_key
from kubesim.errors import ApiError
from kubesim.resources import JOBS, PODS, RAYCLUSTERS, RAYJOBS, ResourceType
from kubesim.store import now_rfc3339
from kubesim.watch import DELETED

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

_copy = msgspec.json.Decoder().decode
_enc = msgspec.json.Encoder().encode
KUBERAY_CONTROLLER = "ray.io/kuberay-operator"
KUBERAY = (None, "", KUBERAY_CONTROLLER)
CLUSTER_LABEL = "ray.io/cluster"
Key = tuple[str, str]


def _ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def _mine(store: Any, owner_uid: str, rt: ResourceType) -> dict[str, dict[str, Any]]:
    return {e.obj["metadata"]["name"]: e.obj for e in owned(store, owner_uid, rt)
            if (controller_ref(e.obj) or {}).get("uid") == owner_uid}


def _delete(store: Any, rt: ResourceType, ns: str, name: str) -> None:
    with contextlib.suppress(ApiError):
        store.delete(rt, ns, name, propagation="Background")


class RayControllers:
    def __init__(self, cluster: Cluster) -> None:
        self._store = cluster.store
        self.clusters: WorkQueue[Key] = WorkQueue("raycluster", per_key(self.reconcile_cluster, "raycluster"))
        self.jobs: WorkQueue[Key] = WorkQueue("rayjob", per_key(self.reconcile_job, "rayjob"))
        self.queues = (self.clusters, self.jobs)
        self._store.subscribe(RAYCLUSTERS, self._on(self.clusters, None))
        self._store.subscribe(RAYJOBS, self._on(self.jobs, None))
        self._store.subscribe(PODS, self._on(self.clusters, "RayCluster"))
        self._store.subscribe(RAYCLUSTERS, self._on(self.jobs, "RayJob"))
        self._store.subscribe(JOBS, self._on(self.jobs, "RayJob"))

    @staticmethod
    def _on(q: WorkQueue[Key], owner_kind: str | None) -> Any:
        def on(etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
            ns = new["metadata"]["namespace"]
            if owner_kind is None:
                if etype != DELETED:
                    q.add((ns, new["metadata"]["name"]))
            elif (ref := controller_ref(new, owner_kind)) is not None:
                q.add((ns, ref["name"]))
        return on

    # --- RayCluster ---

    def reconcile_cluster(self, key: Key) -> None:
        ns, name = key
        e = self._store.find(RAYCLUSTERS, ns, name)
        if e is None:
            return
        rc = e.obj
        spec = rc.get("spec") or {}
        if spec.get("managedBy") not in KUBERAY or rc["metadata"].get("deletionTimestamp"):
            return
        pods = _mine(self._store, rc["metadata"]["uid"], PODS)
        status: dict[str, Any] = _copy(_enc(rc.get("status") or {}))
        if spec.get("suspend"):
            for pname in pods:
                _delete(self._store, PODS, ns, pname)
            status.update(state="suspended", readyWorkerReplicas=0)
        else:
            want = {f"{name}-head": ("head", "headgroup", (spec.get("headGroupSpec") or {}).get("template") or {})}
            desired = 0
            for g in spec.get("workerGroupSpecs") or ():
                n = (1 if g.get("replicas") is None else int(g["replicas"])) * max(int(g.get("numOfHosts") or 1), 1)
                desired += n
                for i in range(n):
                    want[f"{name}-{g.get('groupName', '').lower()}-worker-{i}"] = ("worker", g.get("groupName", ""),
                                                                                  g.get("template") or {})
            for pname, (node_type, group, template) in want.items():
                if pname not in pods and (pod := self._create_pod(rc, pname, node_type, group, template)) is not None:
                    pods[pname] = pod
            live = [pods[p] for p in want if p in pods]
            ready = len(live) == len(want) and all(condition_true(p, "Ready") and not is_terminal(p) for p in live)
            status["desiredWorkerReplicas"] = desired
            status["readyWorkerReplicas"] = sum(1 for p in live if condition_true(p, "Ready")
                                                and p["metadata"]["name"] != f"{name}-head")
            if ready:
                status["state"] = "ready"
            elif status.get("state") == "suspended":
                status.pop("state")
        self._store.modify(RAYCLUSTERS, ns, name, lambda o: o.__setitem__("status", status), status_only=True)

    def _create_pod(self, rc: Mapping[str, Any], name: str, node_type: str, group: str,
                    template: Mapping[str, Any]) -> dict[str, Any] | None:
        t = _copy(_enc(template))
        tmeta = t.get("metadata") or {}
        labels = {**(tmeta.get("labels") or {}), CLUSTER_LABEL: rc["metadata"]["name"],
                  "ray.io/node-type": node_type, "ray.io/group": group}
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "labels": labels, "annotations": dict(tmeta.get("annotations") or {}),
                            "ownerReferences": [_ref(rc)]},
               "spec": t.get("spec") or {}}
        try:
            return dict(self._store.create(PODS, rc["metadata"]["namespace"], pod).obj)
        except ApiError:
            return None

    # --- RayJob ---

    def reconcile_job(self, key: Key) -> None:
        ns, name = key
        e = self._store.find(RAYJOBS, ns, name)
        if e is None:
            return
        rj = e.obj
        spec = rj.get("spec") or {}
        if (spec.get("managedBy") not in KUBERAY or rj["metadata"].get("deletionTimestamp")
                or spec.get("clusterSelector")):
            return
        uid = rj["metadata"]["uid"]
        status: dict[str, Any] = _copy(_enc(rj.get("status") or {}))
        phase = status.get("jobDeploymentStatus", "")
        clusters = _mine(self._store, uid, RAYCLUSTERS)
        jobs = _mine(self._store, uid, JOBS)
        cluster_name = f"{name}-raycluster"
        if phase in ("Complete", "Failed"):
            if spec.get("shutdownAfterJobFinishes"):
                for c in clusters:
                    _delete(self._store, RAYCLUSTERS, ns, c)
        elif spec.get("suspend"):
            if phase in ("Initializing", "Running"):
                for c in clusters:
                    _delete(self._store, RAYCLUSTERS, ns, c)
                for j in jobs:
                    _delete(self._store, JOBS, ns, j)
                status.update(jobDeploymentStatus="Suspended", jobStatus="", rayClusterStatus={})
        else:
            rc = clusters.get(cluster_name)
            if phase in ("", "Suspended"):
                if rc is None and not clusters:
                    self._create_cluster(rj, cluster_name)
                    status.update(jobDeploymentStatus="Initializing", rayClusterName=cluster_name, jobStatus="PENDING",
                                  startTime=now_rfc3339())
            elif rc is not None:
                status["rayClusterStatus"] = rc.get("status") or {}
                ready = (rc.get("status") or {}).get("state") == "ready"
                mode = spec.get("submissionMode") or "K8sJobMode"
                if phase == "Initializing" and ready:
                    if mode == "K8sJobMode" and name not in jobs:
                        self._create_submitter(rj)
                    status.update(jobDeploymentStatus="Running", jobStatus="RUNNING")
                elif phase == "Running":
                    self._follow(rj, mode, jobs.get(name), cluster_name, status)
        self._store.modify(RAYJOBS, ns, name, lambda o: o.__setitem__("status", status), status_only=True)

    def _follow(self, rj: Mapping[str, Any], mode: str, job: Mapping[str, Any] | None, cluster_name: str,
                status: dict[str, Any]) -> None:
        if mode == "K8sJobMode":
            if job is None:
                return
            if condition_true(job, "Complete"):
                status.update(jobStatus="SUCCEEDED", jobDeploymentStatus="Complete",
                              message="Job finished successfully.", endTime=now_rfc3339())
            elif condition_true(job, "Failed"):
                status.update(jobStatus="FAILED", jobDeploymentStatus="Failed",
                              message="the submitter Job failed", endTime=now_rfc3339())
            return
        head = self._store.find(PODS, rj["metadata"]["namespace"], f"{cluster_name}-head")
        if head is not None and is_terminal(head.obj):
            ok = head.obj["status"]["phase"] == "Succeeded"
            status.update(jobStatus="SUCCEEDED" if ok else "FAILED", jobDeploymentStatus="Complete" if ok else "Failed",
                          endTime=now_rfc3339())

    def _create_cluster(self, rj: Mapping[str, Any], name: str) -> None:
        spec = _copy(_enc((rj.get("spec") or {}).get("rayClusterSpec") or {}))
        spec.pop("suspend", None)
        rc = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
              "metadata": {"name": name, "labels": {"ray.io/originated-from-crd": "RayJob",
                                                    "ray.io/originated-from-cr-name": rj["metadata"]["name"]},
                           "ownerReferences": [_ref(rj)]},
              "spec": spec}
        with contextlib.suppress(ApiError):  # the previous one is still going away: its deletion brings us back
            self._store.create(RAYCLUSTERS, rj["metadata"]["namespace"], rc)

    def _create_submitter(self, rj: Mapping[str, Any]) -> None:
        spec = rj.get("spec") or {}
        template = _copy(_enc(spec.get("submitterPodTemplate") or {}))
        if not template:
            head = (((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {})
            image = ((head.get("spec") or {}).get("containers") or [{}])[0].get("image", "")
            template = {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "ray-job-submitter", "image": image,
                "command": ["ray", "job", "submit", "--", *str(spec.get("entrypoint", "")).split()],
                "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            }]}}
        template.setdefault("spec", {}).setdefault("restartPolicy", "Never")
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": rj["metadata"]["name"], "labels": {"ray.io/originated-from-crd": "RayJob"},
                            "ownerReferences": [_ref(rj)]},
               "spec": {"backoffLimit": 0, "template": template}}
        with contextlib.suppress(ApiError):
            self._store.create(JOBS, rj["metadata"]["namespace"], job)
