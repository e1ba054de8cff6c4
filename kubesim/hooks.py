"""The scenario hooks: finish/fail a workload, and make its pods (not) ready.

A hook names `namespace/name`: the Workload called so (and through its owner reference
the Job or JobSet that runs it, or the Job/JobSet labelled kueue.x-k8s.io/prebuilt-workload-name
with that name, as MultiKueue's copies are), else the Job, else the JobSet called so.

- finish: every pod of the Job (or of the JobSet's Jobs) that has not ended succeeds (or
  fails), and so do pods created for it later, so the Job completes (or is marked Failed at
  once, as if past its backoffLimit). A Workload with no Job or JobSet gets its Finished
  condition directly (reason Succeeded or Failed), as Kueue's bench runner does.
  When the Job is not run by this cluster's job controller (spec.managedBy is MultiKueue's),
  the hook goes to the other cluster that has a Job of that name it does run.
- pods: readiness overrides by name, applied to current and future pods: `ready: false`
  drops their Ready condition (as on a lost node), `neverReady` keeps them from ever
  becoming ready, `ready: true` lifts the override.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesim.cluster import NEVER_READY, NOT_READY, Cluster
from kubesim.controllers.conditions import set_condition
from kubesim.controllers.jobs import managed_here
from kubesim.controllers.jobsets import JOBSET_CONTROLLER
from kubesim.controllers.ownership import PREBUILT_LABEL, is_terminal, owned, pod_names, pods_of_job
from kubesim.controllers.ray import KUBERAY
from kubesim.controllers.training import OPERATORS
from kubesim.resources import JOBS, JOBSETS, PODS, RAYJOBS, TRAINING_JOBS, WORKLOADS, ResourceType
from kubesim.store import Entry, now_rfc3339


class HookError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# What a hook can finish: kinds that run pods themselves, or through Jobs.
RUNNERS: dict[str, ResourceType] = {"Job": JOBS, "JobSet": JOBSETS, "RayJob": RAYJOBS,
                                    **{rt.kind: rt for rt in TRAINING_JOBS}}


def resolve(cluster: Cluster, ns: str, name: str) -> tuple[ResourceType, Entry]:
    """The Job, JobSet, training job or RayJob behind `ns/name`, or the bare Workload."""
    store = cluster.store
    wl = store.find(WORKLOADS, ns, name)
    if wl is not None:
        for ref in wl.obj["metadata"].get("ownerReferences") or ():
            if ref.get("kind") == "TrainJob" and (js := store.find(JOBSETS, ns, ref.get("name", ""))) is not None:
                return JOBSETS, js  # the Trainer's JobSet runs it
            if ref.get("kind") == "AppWrapper":  # the first wrapped object that runs pods
                for runner in RUNNERS.values():
                    if wrapped := owned(store, ref.get("uid", ""), runner):
                        return runner, wrapped[0]
            rt = RUNNERS.get(ref.get("kind", ""))
            if rt is None:
                continue
            e = store.find(rt, ns, ref.get("name", ""))
            if e is not None and e.obj["metadata"]["uid"] == ref.get("uid"):
                return rt, e

        for rt in (JOBS, JOBSETS):  # a MultiKueue copy: the Job names its prebuilt Workload
            for e in store.list(rt, ns):
                if (e.obj["metadata"].get("labels") or {}).get(PREBUILT_LABEL) == name:
                    return rt, e
        return WORKLOADS, wl
    for rt in RUNNERS.values():
        e = store.find(rt, ns, name)
        if e is not None:
            return rt, e
    raise HookError(404, f"cluster {cluster.name}: no Workload, Job or JobSet {ns}/{name}")


def _runs_here(rt: ResourceType, obj: Mapping[str, Any]) -> bool:
    if rt is JOBS:
        return managed_here(obj)
    if rt in TRAINING_JOBS:
        return (obj.get("spec", {}).get("runPolicy") or {}).get("managedBy") in OPERATORS
    if rt is RAYJOBS:
        return obj.get("spec", {}).get("managedBy") in KUBERAY
    return obj.get("spec", {}).get("managedBy") in (None, JOBSET_CONTROLLER)


def _running_copy(clusters: Mapping[str, Cluster], here: str, rt: ResourceType, ns: str,
                  name: str) -> tuple[Cluster, Entry] | None:
    for cname in sorted(clusters):
        if cname == here:
            continue
        e = clusters[cname].store.find(rt, ns, name)
        if e is not None and _runs_here(rt, e.obj):
            return clusters[cname], e
    return None


def _job_pods(cluster: Cluster, rt: ResourceType, e: Entry) -> list[Entry]:
    uid = e.obj["metadata"]["uid"]
    if rt is JOBS or rt in TRAINING_JOBS:
        return pods_of_job(cluster.store, uid)
    return [
        p for job in owned(cluster.store, uid, JOBS) for p in pods_of_job(cluster.store, job.obj["metadata"]["uid"])
    ]


def finish(clusters: Mapping[str, Cluster], cname: str, ns: str, name: str, succeeded: bool) -> dict[str, Any]:
    cluster = clusters[cname]
    rt, e = resolve(cluster, ns, name)
    obj_name = e.obj["metadata"]["name"]
    if rt is WORKLOADS:
        _finish_workload(cluster, ns, obj_name, succeeded)
        return {"cluster": cname, "kind": "Workload", "namespace": ns, "name": obj_name, "pods": 0}
    if not _runs_here(rt, e.obj):
        found = _running_copy(clusters, cname, rt, ns, obj_name)
        if found is None:
            manager = e.obj.get("spec", {}).get("managedBy")
            raise HookError(409, f"cluster {cname}: {rt.kind} {ns}/{obj_name} is managed by {manager} and no "
                                 f"cluster runs a copy of it yet")
        cluster, e = found
    cluster.outcomes[e.obj["metadata"]["uid"]] = succeeded
    pods = [p for p in _job_pods(cluster, rt, e) if not is_terminal(p.obj)]
    for p in pods:
        cluster.kubelet.poke((ns, p.obj["metadata"]["name"]))
    if rt is JOBS:
        cluster.jobs.poke((ns, obj_name))
    elif rt in TRAINING_JOBS:
        cluster.training.queue.add((rt.kind, ns, obj_name))
    else:
        for job in owned(cluster.store, e.obj["metadata"]["uid"], JOBS):
            cluster.jobs.poke((ns, job.obj["metadata"]["name"]))
    return {"cluster": cluster.name, "kind": rt.kind, "namespace": ns, "name": obj_name, "pods": len(pods)}


def _finish_workload(cluster: Cluster, ns: str, name: str, succeeded: bool) -> None:
    now = now_rfc3339()

    def done(wl: dict[str, Any]) -> None:
        status = wl.setdefault("status", {})
        reason, msg = ("Succeeded", "Job finished successfully") if succeeded else ("Failed", "Job failed")
        set_condition(status, "Finished", "True", reason, msg, now)
        for c in status["conditions"]:
            if c["type"] == "Finished":
                c["observedGeneration"] = wl["metadata"].get("generation", 1)

    cluster.store.modify(WORKLOADS, ns, name, done, status_only=True)


def set_readiness(clusters: Mapping[str, Cluster], cname: str, ns: str, name: str, *, ready: bool | None,
                  never_ready: bool) -> dict[str, Any]:
    if never_ready:
        mode: str | None = NEVER_READY
    elif ready is None:
        raise HookError(400, 'pods: give "ready": true|false or "neverReady": true')
    else:
        mode = None if ready else NOT_READY
    cluster = clusters[cname]
    targets = [cluster]
    try:
        rt, e = resolve(cluster, ns, name)
        if rt is not WORKLOADS and not _runs_here(rt, e.obj):
            targets = [clusters[c] for c in sorted(clusters)]  # its pods run on whichever worker gets it
    except HookError:
        pass  # nothing of that name yet: the override waits for future pods
    affected = 0
    for c in targets:
        if mode is None:
            c.readiness.pop((ns, name), None)
        else:
            c.readiness[(ns, name)] = mode
        for p in c.store.list(PODS, ns):
            if not is_terminal(p.obj):
                c.kubelet.poke((ns, p.obj["metadata"]["name"]))
                if c.readiness_override(p.obj) == mode or (mode is None and name in pod_names(c.store, p.obj)):
                    affected += 1
    return {"cluster": cname, "namespace": ns, "name": name, "mode": mode or "ready", "pods": affected}

