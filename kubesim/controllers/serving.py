"""apps/v1 controllers, the parts Kueue's serving integrations rely on.

- Deployment: one ReplicaSet per pod template (`<name>-<template hash>`) with the
  Deployment's replicas; the ReplicaSets of older templates are scaled to 0 (a
  Recreate rollout). Status counts from its ReplicaSets.
- ReplicaSet: keeps `replicas` live pods (`<rs>-<random>`), replacing pods that ended
  or were deleted, removing the newest extras. Status replicas / readyReplicas.
- StatefulSet: pods `<name>-<ordinal>` for ordinals below replicas; with
  podManagementPolicy OrderedReady (the default) the next ordinal only once every
  lower one is Ready, with Parallel all at once; a pod that ended or was deleted is
  recreated under the same name; ordinals at or above replicas are deleted.
- LeaderWorkerSet (leaderworkerset.x-k8s.io/v1), as the LWS project runs it: a leader
  StatefulSet `<name>` of `replicas` leader pods (Parallel), and for each leader pod a worker
  StatefulSet `<name>-<group index>` of `size - 1` workers, owned by that leader pod (so a
  leader's deletion takes its workers). Every pod carries the LWS name, its group index and the
  group size; Kueue's pod webhook (kubesim/admission.py) turns a queued group into one serving
  pod group. Status: replicas and readyReplicas (groups whose pods are all ready).

Each kind's reconcile reads its object (`_live_object`), makes or scales what it owns
(ReplicaSets, StatefulSets, pods, all with a controller `_ref` to it) and writes its status
when it changed (`_write_status`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from kubesim.controllers.conditions import condition_true
from kubesim.controllers.ownership import controller_ref, is_terminal, owned
from kubesim.controllers.workqueue import WorkQueue, per_key
from kubesim.errors import ApiError
from kubesim.resources import DEPLOYMENTS, LEADERWORKERSETS, PODS, REPLICASETS, STATEFULSETS, ResourceType
from kubesim.store import Store
from kubesim.watch import DELETED

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

_copy = msgspec.json.Decoder().decode
_enc = msgspec.json.Encoder(order="sorted").encode
HASH_LABEL = "pod-template-hash"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
Key = tuple[str, str]


def _ref(obj: Mapping[str, Any], api_version: str = "apps/v1") -> dict[str, Any]:
    """The controller ownerReference to `obj` (of `api_version`)."""
    return {"apiVersion": api_version, "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def _live_object(store: Store, rt: ResourceType, key: Key) -> dict[str, Any] | None:
    """The object to reconcile: None when it is gone or being deleted."""
    e = store.find(rt, *key)
    if e is None or e.obj["metadata"].get("deletionTimestamp"):
        return None
    return e.obj


def _write_status(store: Store, rt: ResourceType, obj: Mapping[str, Any], status: dict[str, Any]) -> None:
    if (obj.get("status") or {}) != status:
        meta = obj["metadata"]
        store.modify(rt, meta["namespace"], meta["name"], lambda o: o.__setitem__("status", status), status_only=True)


def _statefulset(name: str, ns: str, owner: dict[str, Any], *, labels: dict[str, str], selector: dict[str, str],
                 replicas: int, template: dict[str, Any], service: str) -> dict[str, Any]:
    """A Parallel StatefulSet of `replicas` pods from `template`."""
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [owner]},
            "spec": {"replicas": replicas, "podManagementPolicy": "Parallel", "serviceName": service,
                     "selector": {"matchLabels": selector}, "template": template}}


def _live(store: Any, owner_uid: str) -> list[Mapping[str, Any]]:
    """The owner's pods that count: not ended, not being deleted."""
    return [e.obj for e in owned(store, owner_uid, PODS)
            if (controller_ref(e.obj) or {}).get("uid") == owner_uid
            and not is_terminal(e.obj) and not e.obj["metadata"].get("deletionTimestamp")]


def _ready(pods: list[Mapping[str, Any]]) -> int:
    return sum(1 for p in pods if condition_true(p, "Ready"))


def _pod_from(template: Mapping[str, Any], owner: Mapping[str, Any], **meta: Any) -> dict[str, Any]:
    t = _copy(_enc(template))
    tmeta = t.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"labels": dict(tmeta.get("labels") or {}), "annotations": dict(tmeta.get("annotations") or {}),
                         "ownerReferences": [_ref(owner)], **meta},
            "spec": t.get("spec") or {}}


class ServingControllers:
    def __init__(self, cluster: Cluster) -> None:
        self._store = cluster.store
        self.deployments: WorkQueue[Key] = WorkQueue("deployment", per_key(self.reconcile_deployment, "deployment"))
        self.replicasets: WorkQueue[Key] = WorkQueue("replicaset", per_key(self.reconcile_replicaset, "replicaset"))
        self.statefulsets: WorkQueue[Key] = WorkQueue("statefulset",
                                                      per_key(self.reconcile_statefulset, "statefulset"))
        self.leaderworkersets: WorkQueue[Key] = WorkQueue("leaderworkerset",
                                                          per_key(self.reconcile_leaderworkerset, "leaderworkerset"))
        self.queues = (self.deployments, self.replicasets, self.statefulsets, self.leaderworkersets)
        self._store.subscribe(DEPLOYMENTS, self._on_self(self.deployments))
        self._store.subscribe(REPLICASETS, self._on_self(self.replicasets))
        self._store.subscribe(STATEFULSETS, self._on_self(self.statefulsets))
        self._store.subscribe(LEADERWORKERSETS, self._on_self(self.leaderworkersets))
        self._store.subscribe(REPLICASETS, self._on_owned("Deployment", self.deployments))
        self._store.subscribe(PODS, self._on_owned("ReplicaSet", self.replicasets))
        self._store.subscribe(PODS, self._on_owned("StatefulSet", self.statefulsets))
        self._store.subscribe(PODS, self._on_lws_pod)

    @staticmethod
    def _on_self(q: WorkQueue[Key]) -> Any:
        def on(etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
            if etype != DELETED:
                q.add((new["metadata"]["namespace"], new["metadata"]["name"]))
        return on

    @staticmethod
    def _on_owned(kind: str, q: WorkQueue[Key]) -> Any:
        def on(etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
            ref = controller_ref(new, kind)
            if ref is not None:
                q.add((new["metadata"]["namespace"], ref["name"]))
        return on

    def _on_lws_pod(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None,
                    new: Mapping[str, Any]) -> None:
        name = (new["metadata"].get("labels") or {}).get(LWS_NAME_LABEL)  # a leader's or a worker's
        if name:
            self.leaderworkersets.add((new["metadata"]["namespace"], name))

    # --- Deployment ---

    def reconcile_deployment(self, key: Key) -> None:
        d = _live_object(self._store, DEPLOYMENTS, key)
        if d is None:
            return
        ns, name = key
        spec = d.get("spec") or {}
        template = spec.get("template") or {}
        digest = hashlib.sha256(_enc(template)).hexdigest()[:10]
        current = f"{name}-{digest}"
        replicas = int(spec.get("replicas", 1))
        sets: dict[str, Any] = {x.obj["metadata"]["name"]: x.obj
                                for x in owned(self._store, d["metadata"]["uid"], REPLICASETS)}
        if current not in sets:
            t = _copy(_enc(template))
            t.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = digest
            selector = _copy(_enc(spec.get("selector") or {}))
            selector.setdefault("matchLabels", {})[HASH_LABEL] = digest
            rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": current, "namespace": ns, "labels": dict(t["metadata"]["labels"]),
                               "ownerReferences": [_ref(d)]},
                  "spec": {"replicas": replicas, "selector": selector, "template": t}}
            sets[current] = self._store.create(REPLICASETS, ns, rs).obj
        for rs_name, rs in sets.items():
            want = replicas if rs_name == current else 0
            if int((rs.get("spec") or {}).get("replicas", 0)) != want:
                self._store.modify(REPLICASETS, ns, rs_name, _set_replicas(want))
        total = sum(int((rs.get("status") or {}).get("replicas", 0)) for rs in sets.values())
        ready = sum(int((rs.get("status") or {}).get("readyReplicas", 0)) for rs in sets.values())
        _write_status(self._store, DEPLOYMENTS, d, {
            "observedGeneration": d["metadata"].get("generation", 1), "replicas": total, "readyReplicas": ready,
            "availableReplicas": ready, "updatedReplicas": int((sets[current].get("status") or {}).get("replicas", 0))})

    # --- ReplicaSet ---

    def reconcile_replicaset(self, key: Key) -> None:
        rs = _live_object(self._store, REPLICASETS, key)
        if rs is None:
            return
        ns, name = key
        want = int((rs.get("spec") or {}).get("replicas", 1))
        pods = sorted(_live(self._store, rs["metadata"]["uid"]), key=lambda p: p["metadata"]["creationTimestamp"])
        for _ in range(want - len(pods)):
            pod = _pod_from(rs["spec"]["template"], rs, generateName=f"{name}-", namespace=ns)
            self._store.create(PODS, ns, pod)
        for extra in pods[want:][::-1]:
            self._delete_pod(ns, extra["metadata"]["name"])
        pods = _live(self._store, rs["metadata"]["uid"])
        _write_status(self._store, REPLICASETS, rs, {"replicas": len(pods), "readyReplicas": _ready(pods),
                                                     "availableReplicas": _ready(pods),
                                                     "observedGeneration": rs["metadata"].get("generation", 1)})

    # --- StatefulSet ---

    def reconcile_statefulset(self, key: Key) -> None:
        sts = _live_object(self._store, STATEFULSETS, key)
        if sts is None:
            return
        ns, name = key
        spec = sts.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        parallel = spec.get("podManagementPolicy") == "Parallel"
        uid = sts["metadata"]["uid"]
        by_name = {p.obj["metadata"]["name"]: p.obj for p in owned(self._store, uid, PODS)}
        for i in range(replicas):
            pod_name = f"{name}-{i}"
            pod = by_name.get(pod_name)
            if pod is not None and is_terminal(pod) and not pod["metadata"].get("deletionTimestamp"):
                self._delete_pod(ns, pod_name)  # recreated once it is gone
                pod = None
                if not parallel:
                    break
                continue
            if pod is None and pod_name not in by_name:
                labels = {"statefulset.kubernetes.io/pod-name": pod_name, "apps.kubernetes.io/pod-index": str(i)}
                new = _pod_from(spec.get("template") or {}, sts, name=pod_name, namespace=ns)
                new["metadata"]["labels"].update(labels)
                new["spec"].setdefault("hostname", pod_name)
                self._store.create(PODS, ns, new)
                if not parallel:
                    break
            elif not parallel and (pod is None or not condition_true(pod, "Ready")):
                break  # OrderedReady: the next ordinal waits for this one
        for pod_name, pod in by_name.items():
            ordinal = pod_name.rsplit("-", 1)[-1]
            if ordinal.isdigit() and int(ordinal) >= replicas and not pod["metadata"].get("deletionTimestamp"):
                self._delete_pod(ns, pod_name)
        pods = _live(self._store, uid)
        _write_status(self._store, STATEFULSETS, sts, {
            "observedGeneration": sts["metadata"].get("generation", 1), "replicas": len(pods),
            "readyReplicas": _ready(pods), "availableReplicas": _ready(pods), "currentReplicas": len(pods)})

    # --- LeaderWorkerSet ---

    def reconcile_leaderworkerset(self, key: Key) -> None:
        lws = _live_object(self._store, LEADERWORKERSETS, key)
        if lws is None:
            return
        ns, name = key
        spec = lws.get("spec") or {}
        lwt = spec.get("leaderWorkerTemplate") or {}
        size = int(lwt.get("size", 1))
        replicas = int(spec.get("replicas", 1))
        worker_t = lwt.get("workerTemplate") or {}
        leader_t = lwt.get("leaderTemplate") or worker_t
        sets = {s.obj["metadata"]["name"]: s.obj for s in owned(self._store, lws["metadata"]["uid"], STATEFULSETS)}
        if name not in sets:
            labels = {LWS_NAME_LABEL: name, LWS_WORKER_INDEX_LABEL: "0"}
            self._store.create(STATEFULSETS, ns, _statefulset(
                name, ns, _ref(lws, "leaderworkerset.x-k8s.io/v1"), labels={LWS_NAME_LABEL: name}, selector=labels,
                replicas=replicas, template=_lws_template(leader_t, labels, size), service=name))
        elif int((sets[name].get("spec") or {}).get("replicas", 0)) != replicas:
            self._store.modify(STATEFULSETS, ns, name, _set_replicas(replicas))
        ready_groups = 0
        leaders = [p.obj for p in owned(self._store, (sets.get(name) or {}).get("metadata", {}).get("uid", ""), PODS)]
        for leader in leaders:
            if leader["metadata"].get("deletionTimestamp"):
                continue
            index = (leader["metadata"].get("labels") or {}).get("apps.kubernetes.io/pod-index", "0")
            workers = [p.obj for p in owned(self._store, leader["metadata"]["uid"], STATEFULSETS)]
            if size > 1 and not workers:
                labels = {LWS_NAME_LABEL: name, LWS_GROUP_INDEX_LABEL: index}
                self._store.create(STATEFULSETS, ns, _statefulset(
                    f"{name}-{index}", ns, _ref(leader, "v1"), labels=dict(labels), selector=labels,
                    replicas=size - 1, template=_lws_template(worker_t, labels, size), service=name))
            group = [leader] + [p.obj for w in workers for p in owned(self._store, w["metadata"]["uid"], PODS)
                                if controller_ref(p.obj) is not None]
            if len(group) == size and all(condition_true(p, "Ready") for p in group):
                ready_groups += 1
        _write_status(self._store, LEADERWORKERSETS, lws, {"replicas": len(leaders), "readyReplicas": ready_groups})

    def _delete_pod(self, ns: str, name: str) -> None:
        try:
            self._store.delete(PODS, ns, name)
        except ApiError as err:
            if err.code != 404:
                raise


def _set_replicas(n: int) -> Any:
    def change(o: dict[str, Any]) -> None:
        o["spec"]["replicas"] = n
    return change


def _lws_template(t: Mapping[str, Any], labels: dict[str, str], size: int) -> dict[str, Any]:
    """A leader's or workers' pod template with the group's labels and size."""
    out: dict[str, Any] = _copy(_enc(t))
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    meta["annotations"] = {**(meta.get("annotations") or {}), LWS_SIZE_ANNOTATION: str(size)}
    return out
