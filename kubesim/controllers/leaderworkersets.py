"""A minimal LeaderWorkerSet controller (leaderworkerset.x-k8s.io/v1), as the LWS project runs it.

A leader StatefulSet `<name>` of `replicas` leader pods (Parallel), and for each leader pod a
worker StatefulSet `<name>-<group index>` of `size - 1` workers, owned by that leader pod (so a
leader's deletion takes its workers). Every pod carries the LWS name, its group index and the
group size; Kueue's pod webhook (kubesim/admission.py) turns a queued group into one serving
pod group. Status: replicas and readyReplicas (groups whose pods are all ready).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from kubesim.controllers.conditions import condition_true
from kubesim.controllers.ownership import controller_ref, owned
from kubesim.controllers.workqueue import WorkQueue, per_key
from kubesim.resources import LEADERWORKERSETS, PODS, STATEFULSETS, ResourceType
from kubesim.watch import DELETED

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
_copy = msgspec.json.Decoder().decode
_enc = msgspec.json.Encoder().encode
Key = tuple[str, str]


def _owner(obj: Mapping[str, Any], api_version: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def _template(t: Mapping[str, Any], labels: dict[str, str], size: int) -> dict[str, Any]:
    out = _copy(_enc(t))
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    meta["annotations"] = {**(meta.get("annotations") or {}), SIZE_ANNOTATION: str(size)}
    return out


class LeaderWorkerSetController:
    def __init__(self, cluster: Cluster) -> None:
        self._store = cluster.store
        self.queue: WorkQueue[Key] = WorkQueue("leaderworkerset", per_key(self.reconcile, "leaderworkerset"))
        self._store.subscribe(LEADERWORKERSETS, self._on_lws)
        self._store.subscribe(PODS, self._on_pod)

    def _on_lws(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        if etype != DELETED:
            self.queue.add((new["metadata"]["namespace"], new["metadata"]["name"]))

    def _on_pod(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        name = (new["metadata"].get("labels") or {}).get(NAME_LABEL)
        if name:
            self.queue.add((new["metadata"]["namespace"], name))

    def reconcile(self, key: Key) -> None:
        ns, name = key
        e = self._store.find(LEADERWORKERSETS, ns, name)
        if e is None or e.obj["metadata"].get("deletionTimestamp"):
            return
        lws = e.obj
        spec = lws.get("spec") or {}
        lwt = spec.get("leaderWorkerTemplate") or {}
        size = int(lwt.get("size", 1))
        replicas = int(spec.get("replicas", 1))
        worker_t = lwt.get("workerTemplate") or {}
        leader_t = lwt.get("leaderTemplate") or worker_t
        sets = {s.obj["metadata"]["name"]: s.obj for s in owned(self._store, lws["metadata"]["uid"], STATEFULSETS)}
        if name not in sets:
            labels = {NAME_LABEL: name, WORKER_INDEX_LABEL: "0"}
            self._store.create(STATEFULSETS, ns, {
                "apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": name, "namespace": ns, "labels": {NAME_LABEL: name},
                             "ownerReferences": [_owner(lws, "leaderworkerset.x-k8s.io/v1")]},
                "spec": {"replicas": replicas, "podManagementPolicy": "Parallel", "serviceName": name,
                         "selector": {"matchLabels": labels}, "template": _template(leader_t, labels, size)},
            })
        elif int((sets[name].get("spec") or {}).get("replicas", 0)) != replicas:
            self._store.modify(STATEFULSETS, ns, name, lambda o: o["spec"].__setitem__("replicas", replicas))
        ready_groups = 0
        leaders = [p.obj for p in owned(self._store, (sets.get(name) or {}).get("metadata", {}).get("uid", ""), PODS)]
        for leader in leaders:
            if leader["metadata"].get("deletionTimestamp"):
                continue
            index = (leader["metadata"].get("labels") or {}).get("apps.kubernetes.io/pod-index", "0")
            workers = [p.obj for p in owned(self._store, leader["metadata"]["uid"], STATEFULSETS)]
            if size > 1 and not workers:
                labels = {NAME_LABEL: name, GROUP_INDEX_LABEL: index}
                self._store.create(STATEFULSETS, ns, {
                    "apiVersion": "apps/v1", "kind": "StatefulSet",
                    "metadata": {"name": f"{name}-{index}", "namespace": ns, "labels": dict(labels),
                                 "ownerReferences": [_owner(leader, "v1")]},
                    "spec": {"replicas": size - 1, "podManagementPolicy": "Parallel", "serviceName": name,
                             "selector": {"matchLabels": labels}, "template": _template(worker_t, labels, size)},
                })
            group = [leader] + [p.obj for w in workers for p in owned(self._store, w["metadata"]["uid"], PODS)
                                if controller_ref(p.obj) is not None]
            if len(group) == size and all(condition_true(p, "Ready") for p in group):
                ready_groups += 1
        status = {"replicas": len(leaders), "readyReplicas": ready_groups}
        if (lws.get("status") or {}) != status:
            self._store.modify(LEADERWORKERSETS, ns, name, lambda o: o.__setitem__("status", status),
                               status_only=True)
