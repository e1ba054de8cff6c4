"""A minimal AppWrapper controller (workload.codeflare.dev/v1beta2).

Not suspended: each component's object is created (in the AppWrapper's namespace, owned by it,
labelled `workload.codeflare.dev/appwrapper: <name>`), with each podSet's podSetInfo (labels,
annotations, nodeSelector, tolerations, schedulingGates) and that label put on the pod template at
the podSet's path; phase Running, QuotaReserved and ResourcesDeployed True. PodsReady once the
labelled pods that are ready or done reach the podSets' replicas; Succeeded once they have all
succeeded; Failed (its objects deleted) when one fails. Suspended: its objects are deleted, then
QuotaReserved and ResourcesDeployed go False and the phase is Suspended. The wrapped objects run
through kubesim's own controllers. Acts only when managedBy is unset or the AppWrapper controller's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from kq.api.appwrapper import AppWrapperComponent, PodSetPathError, component_pod_sets, value_at
from kubesim.controllers.conditions import condition_true, set_condition
from kubesim.controllers.ownership import controller_ref
from kubesim.controllers.workqueue import WorkQueue, per_key
from kubesim.errors import ApiError
from kubesim.resources import APPWRAPPERS, PODS, ResourceType, by_kind
from kubesim.store import now_rfc3339
from kubesim.watch import DELETED

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

_copy = msgspec.json.Decoder().decode
_enc = msgspec.json.Encoder().encode
APPWRAPPER_CONTROLLER = "workload.codeflare.dev/appwrapper-controller"
CONTROLLER = (None, "", APPWRAPPER_CONTROLLER)
LABEL = "workload.codeflare.dev/appwrapper"
Key = tuple[str, str]


def _inject(pod: dict[str, Any], info: Mapping[str, Any], aw_name: str) -> None:
    meta = pod.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **(info.get("labels") or {}), LABEL: aw_name}
    if info.get("annotations"):
        meta["annotations"] = {**(meta.get("annotations") or {}), **info["annotations"]}
    spec = pod.setdefault("spec", {})
    if info.get("nodeSelector"):
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **info["nodeSelector"]}
    for k in ("tolerations", "schedulingGates"):
        if info.get(k):
            spec[k] = [*(spec.get(k) or []), *info[k]]


class AppWrapperController:
    def __init__(self, cluster: Cluster) -> None:
        self._store = cluster.store
        self.queue: WorkQueue[Key] = WorkQueue("appwrapper", per_key(self.reconcile, "appwrapper"))
        self._store.subscribe(APPWRAPPERS, self._on_appwrapper)
        self._store.subscribe(PODS, self._on_pod)

    def _on_appwrapper(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None,
                       new: Mapping[str, Any]) -> None:
        if etype != DELETED:
            self.queue.add((new["metadata"]["namespace"], new["metadata"]["name"]))

    def _on_pod(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        if aw := (new["metadata"].get("labels") or {}).get(LABEL):
            self.queue.add((new["metadata"]["namespace"], aw))

    def _objects(self, aw: Mapping[str, Any]) -> list[tuple[ResourceType, str]]:
        """The wrapped objects that exist (kind, name), in component order."""
        out = []
        for c in (aw.get("spec") or {}).get("components") or ():
            t = c.get("template") or {}
            rt = by_kind(t.get("apiVersion", ""), t.get("kind", ""))
            name = (t.get("metadata") or {}).get("name", "")
            e = self._store.find(rt, aw["metadata"]["namespace"], name) if rt is not None else None
            if rt is not None and e is not None and (controller_ref(e.obj) or {}).get("uid") == aw["metadata"]["uid"]:
                out.append((rt, name))
        return out

    def reconcile(self, key: Key) -> None:
        ns, name = key
        e = self._store.find(APPWRAPPERS, ns, name)
        if e is None:
            return
        aw = e.obj
        spec = aw.get("spec") or {}
        if spec.get("managedBy") not in CONTROLLER or aw["metadata"].get("deletionTimestamp"):
            return
        now = now_rfc3339()
        status: dict[str, Any] = _copy(_enc(aw.get("status") or {}))
        phase = status.get("phase", "")
        objects = self._objects(aw)
        if spec.get("suspend") or phase == "Failed":
            for rt, obj_name in objects:
                with contextlib.suppress(ApiError):
                    self._store.delete(rt, ns, obj_name, propagation="Background")
            if not self._objects(aw):
                set_condition(status, "ResourcesDeployed", "False", "Deleted", "resources deleted", now)
                set_condition(status, "QuotaReserved", "False", "Suspended", "not admitted", now)
                set_condition(status, "PodsReady", "False", "Suspended", "no pods", now)
                if phase != "Failed":
                    status["phase"] = "Suspended"
            elif phase != "Failed":
                status["phase"] = "Suspending"
        elif phase != "Succeeded":
            if not objects:
                self._create(aw)
            status["phase"] = "Running"
            set_condition(status, "QuotaReserved", "True", "Admitted", "resources reserved", now)
            set_condition(status, "ResourcesDeployed", "True", "Deployed", "resources deployed", now)
            self._pods(aw, status, now)
        self._store.modify(APPWRAPPERS, ns, name, lambda o: o.__setitem__("status", status), status_only=True)

    def _pods(self, aw: Mapping[str, Any], status: dict[str, Any], now: str) -> None:
        ns, name = aw["metadata"]["namespace"], aw["metadata"]["name"]
        components = msgspec.convert((aw.get("spec") or {}).get("components") or [], list[AppWrapperComponent])
        expected = sum(ps.replicas if ps.replicas is not None else 1
                       for c in components for ps in component_pod_sets(c))
        pods = [p.obj for p in self._store.list(PODS, ns)
                if (p.obj["metadata"].get("labels") or {}).get(LABEL) == name]
        phases = [p.get("status", {}).get("phase") for p in pods]
        ready = sum(1 for p, ph in zip(pods, phases, strict=True) if ph == "Succeeded" or condition_true(p, "Ready"))
        set_condition(status, "PodsReady", "True" if ready >= expected else "False", "Pods",
                      f"{ready} of {expected} pods ready or done", now)
        if "Failed" in phases:
            status["phase"] = "Failed"
        elif expected and phases.count("Succeeded") >= expected and all(ph in ("Succeeded", "Failed") for ph in phases):
            status["phase"] = "Succeeded"

    def _create(self, aw: Mapping[str, Any]) -> None:
        meta = aw["metadata"]
        for c in (aw.get("spec") or {}).get("components") or ():
            obj = _copy(_enc(c.get("template") or {}))
            rt = by_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
            if rt is None:
                continue  # a kind this cluster does not serve
            root = {"template": obj}
            infos = c.get("podSetInfos") or []
            component = msgspec.convert(c, AppWrapperComponent)
            for j, ps in enumerate(component_pod_sets(component)):
                with contextlib.suppress(PodSetPathError):
                    pod = value_at(root, ps.path)
                    if isinstance(pod, dict):
                        _inject(pod, infos[j] if j < len(infos) else {}, meta["name"])
            om = obj.setdefault("metadata", {})
            om["namespace"] = meta["namespace"]
            om["labels"] = {**(om.get("labels") or {}), LABEL: meta["name"]}
            om["ownerReferences"] = [{"apiVersion": aw["apiVersion"], "kind": "AppWrapper", "name": meta["name"],
                                      "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]
            with contextlib.suppress(ApiError):
                self._store.create(rt, meta["namespace"], obj)
