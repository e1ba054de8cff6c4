"""A minimal JobSet controller (jobset.x-k8s.io/v1alpha2).

Not suspended: creates the child Jobs `<jobset>-<replicatedJob>-<index>` from each
replicatedJob's template (with the JobSet labels), and resumes suspended children after
copying the template's scheduling directives onto them (what JobSet does when Kueue
resumes it). Suspended: suspends the children. Status: per replicatedJob counts,
Suspended, and Completed when every child Job completed / Failed when any child failed.
Acts only when spec.managedBy is unset or jobset.sigs.k8s.io/jobset-controller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from kubesim.controllers.conditions import condition_true, set_condition
from kubesim.controllers.ownership import controller_ref, owned
from kubesim.controllers.workqueue import WorkQueue, per_key
from kubesim.resources import JOBS, JOBSETS, ResourceType
from kubesim.store import now_rfc3339
from kubesim.watch import DELETED

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"
_copy = msgspec.json.Decoder().decode
_enc = msgspec.json.Encoder().encode
_DIRECTIVES = ("nodeSelector", "tolerations", "affinity", "schedulingGates")

Key = tuple[str, str]


class JobSetController:
    def __init__(self, cluster: Cluster) -> None:
        self._c = cluster
        self._store = cluster.store
        self.queue: WorkQueue[Key] = WorkQueue("jobset", per_key(self.reconcile, "jobset"))
        self._store.subscribe(JOBSETS, self._on_jobset)
        self._store.subscribe(JOBS, self._on_job)

    def _on_jobset(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        if etype != DELETED:
            self.queue.add((new["metadata"]["namespace"], new["metadata"]["name"]))

    def _on_job(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        ref = controller_ref(new, "JobSet")
        if ref is not None:
            self.queue.add((new["metadata"]["namespace"], ref["name"]))

    def reconcile(self, key: Key) -> None:
        ns, name = key
        e = self._store.find(JOBSETS, ns, name)
        if e is None:
            return
        js = e.obj
        spec = js.get("spec", {})
        if spec.get("managedBy") not in (None, JOBSET_CONTROLLER) or js["metadata"].get("deletionTimestamp"):
            return
        uid = js["metadata"]["uid"]
        children = {c.obj["metadata"]["name"]: c.obj for c in owned(self._store, uid, JOBS)}
        now = now_rfc3339()
        status: dict[str, Any] = _copy(_enc(js.get("status") or {}))
        done = condition_true(js, "Completed") or condition_true(js, "Failed")
        suspended = bool(spec.get("suspend"))
        expected = [(rj, i) for rj in spec.get("replicatedJobs", []) for i in range(int(rj.get("replicas", 1)))]

        if not done:
            for rj, i in expected:
                child_name = f"{name}-{rj['name']}-{i}"
                child = children.get(child_name)
                if child is None and not suspended:
                    children[child_name] = self._create_child(js, rj, i).obj
                elif child is not None and bool(child.get("spec", {}).get("suspend")) != suspended:
                    self._set_child_suspend(ns, child_name, rj, suspended)
            if any(condition_true(c, "Failed") for c in children.values()):
                set_condition(status, "Failed", "True", "FailedJobs", "jobset failed due to a failed job", now)
            elif expected and all(
                condition_true(children.get(f"{name}-{rj['name']}-{i}") or {}, "Complete") for rj, i in expected
            ):
                set_condition(status, "Completed", "True", "AllJobsCompleted", "jobset completed successfully", now)
            if suspended:
                set_condition(status, "Suspended", "True", "SuspendedJobs", "jobset is suspended", now)
            elif condition_true(js, "Suspended"):
                set_condition(status, "Suspended", "False", "ResumeJobs", "jobset is resumed", now)

        status["replicatedJobsStatus"] = [self._rj_status(name, rj, children) for rj in spec.get("replicatedJobs", [])]
        self._store.modify(JOBSETS, ns, name, lambda o: o.__setitem__("status", status), status_only=True)

    def _rj_status(self, name: str, rj: Mapping[str, Any], children: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        counts = {"name": rj["name"], "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
        for i in range(int(rj.get("replicas", 1))):
            child = children.get(f"{name}-{rj['name']}-{i}")
            if child is None:
                continue
            st = child.get("status") or {}
            if condition_true(child, "Complete"):
                counts["succeeded"] += 1
            elif condition_true(child, "Failed"):
                counts["failed"] += 1
            elif child.get("spec", {}).get("suspend"):
                counts["suspended"] += 1
            elif st.get("active"):
                counts["active"] += 1
                if st.get("ready", 0) >= st.get("active", 0):
                    counts["ready"] += 1
        return counts

    def _labels(self, js: Mapping[str, Any], rj: Mapping[str, Any], index: int) -> dict[str, str]:
        return {
            "jobset.sigs.k8s.io/jobset-name": js["metadata"]["name"],
            "jobset.sigs.k8s.io/jobset-uid": js["metadata"]["uid"],
            "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
            "jobset.sigs.k8s.io/replicatedjob-replicas": str(rj.get("replicas", 1)),
            "jobset.sigs.k8s.io/job-index": str(index),
        }

    def _create_child(self, js: Mapping[str, Any], rj: Mapping[str, Any], index: int) -> Any:
        meta = js["metadata"]
        tmpl = _copy(_enc(rj["template"]))
        jlabels = self._labels(js, rj, index)
        tmeta = tmpl.get("metadata") or {}
        jspec = tmpl.get("spec") or {}
        pod_meta = jspec.setdefault("template", {}).setdefault("metadata", {})
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **jlabels}
        jspec["suspend"] = False
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"{meta['name']}-{rj['name']}-{index}",
                "namespace": meta["namespace"],
                "labels": {**(tmeta.get("labels") or {}), **jlabels},
                "annotations": dict(tmeta.get("annotations") or {}),
                "ownerReferences": [{
                    "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": meta["name"],
                    "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True,
                }],
            },
            "spec": jspec,
        }
        return self._store.create(JOBS, meta["namespace"], job)

    def _set_child_suspend(self, ns: str, name: str, rj: Mapping[str, Any], suspend: bool) -> None:
        tmpl_spec = (rj["template"].get("spec") or {}).get("template") or {}

        def change(job: dict[str, Any]) -> None:
            if not suspend:
                # Resuming: carry the JobSet's current scheduling directives to the child's pods.
                pod_tmpl = job["spec"].setdefault("template", {})
                pod_spec = pod_tmpl.setdefault("spec", {})
                for f in _DIRECTIVES:
                    if f in (tmpl_spec.get("spec") or {}):
                        pod_spec[f] = _copy(_enc(tmpl_spec["spec"][f]))
                    else:
                        pod_spec.pop(f, None)
                src_meta = tmpl_spec.get("metadata") or {}
                pm = pod_tmpl.setdefault("metadata", {})
                pm["labels"] = {**(pm.get("labels") or {}), **(src_meta.get("labels") or {})}
                if src_meta.get("annotations"):
                    pm["annotations"] = {**(pm.get("annotations") or {}), **src_meta["annotations"]}
            job["spec"]["suspend"] = suspend

        self._store.modify(JOBS, ns, name, change)
