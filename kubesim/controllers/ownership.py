"""Who owns whom: pods -> Job -> JobSet, and the Workloads Kueue's integrations own by Job/JobSet.

Used by the job controllers, the kubelet and the control hooks. Everything goes through the
store's owner-uid index, never a scan.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesim.resources import JOBS, JOBSETS, PODS, WORKLOADS, ResourceType
from kubesim.store import Entry, Store

TERMINAL = ("Succeeded", "Failed")
PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"


def controller_ref(obj: Mapping[str, Any], kind: str | None = None) -> Mapping[str, Any] | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or ():
        if ref.get("controller") and (kind is None or ref.get("kind") == kind):
            return ref
    return None


def owned(store: Store, owner_uid: str, rt: ResourceType) -> list[Entry]:
    """Objects of kind `rt` with an ownerReference to `owner_uid`."""
    out = []
    for rkey, ns, name in store.dependents(owner_uid):
        if rkey == rt.key:
            e = store.find(rt, ns, name)
            if e is not None:
                out.append(e)
    return out


def owner(store: Store, obj: Mapping[str, Any], rt: ResourceType) -> Entry | None:
    ref = controller_ref(obj, rt.kind)
    if ref is None:
        return None
    found = store.by_uid(ref["uid"])
    return found[1] if found is not None and found[0] is rt else None


def pods_of_job(store: Store, job_uid: str) -> list[Entry]:
    return [e for e in owned(store, job_uid, PODS) if (controller_ref(e.obj) or {}).get("uid") == job_uid]


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") in TERMINAL


# Pods run by these kinds directly (a finish hook on one ends its pods).
POD_RUNNERS = ("Job", "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob")
# Kinds whose Jobs run their work (a finish hook on one ends its Jobs' pods).
JOB_RUNNERS = ("JobSet", "RayJob")


def runner_uids(store: Store, pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The uids of what runs this pod: its Job (or training job) and the Job's JobSet or RayJob (those present)."""
    ref = controller_ref(pod)
    if ref is None or ref.get("kind") not in POD_RUNNERS:
        return ()
    if ref["kind"] != "Job":
        return (ref["uid"],)
    job = store.find(JOBS, pod["metadata"]["namespace"], ref["name"])
    if job is None or job.obj["metadata"]["uid"] != ref["uid"]:
        return (ref["uid"],)
    parent = controller_ref(job.obj)
    if parent is not None and parent.get("kind") in JOB_RUNNERS and store.by_uid(parent["uid"]) is not None:
        return (ref["uid"], parent["uid"])
    return (ref["uid"],)


def pod_names(store: Store, pod: Mapping[str, Any]) -> set[str]:
    """Every name a control hook may use for this pod: the pod, its Job, JobSet and their Workloads."""
    names = {pod["metadata"]["name"]}
    other = controller_ref(pod)
    if other is not None and other.get("kind") != "Job":  # a training job's, a RayCluster's: it and its Workloads
        names.add(other["name"])
        names.update(w.obj["metadata"]["name"] for w in owned(store, other["uid"], WORKLOADS))
    ref = controller_ref(pod, "Job")
    if ref is None:
        names.update(w.obj["metadata"]["name"] for w in owned(store, pod["metadata"]["uid"], WORKLOADS))
        return names
    names.add(ref["name"])
    runners = [ref["uid"]]
    job = store.find(JOBS, pod["metadata"]["namespace"], ref["name"])
    if job is not None:
        prebuilt = (job.obj["metadata"].get("labels") or {}).get(PREBUILT_LABEL)
        if prebuilt:
            names.add(prebuilt)
        js = owner(store, job.obj, JOBSETS)
        if js is not None:
            names.add(js.obj["metadata"]["name"])
            prebuilt = (js.obj["metadata"].get("labels") or {}).get(PREBUILT_LABEL)
            if prebuilt:
                names.add(prebuilt)
            runners.append(js.obj["metadata"]["uid"])
    for uid in runners:
        names.update(w.obj["metadata"]["name"] for w in owned(store, uid, WORKLOADS))
    return names
