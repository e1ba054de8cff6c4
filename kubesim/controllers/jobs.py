"""The batch/v1 Job controller, the parts Kueue depends on.

Acts only on Jobs whose spec.managedBy is unset or kubernetes.io/job-controller.
Suspended: deletes active pods, status.active 0, Suspended=True, startTime cleared
(so that a queueing controller may change the template before resuming).
Running: keeps min(parallelism, completions remaining) pods (Indexed jobs: one per
missing index), sets startTime, counts succeeded/failed pods once each (pods
terminated because they were deleted do not count as failures), and finishes
with SuccessCriteriaMet+Complete or FailureTarget+Failed (backoffLimit exceeded, or
a control-hook failure). A finished Job creates no more pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from kubesim.controllers.conditions import condition_true, set_condition
from kubesim.controllers.ownership import controller_ref, is_terminal, pods_of_job
from kubesim.controllers.workqueue import WorkQueue, per_key
from kubesim.resources import JOBS, PODS, ResourceType
from kubesim.store import Entry, now_rfc3339
from kubesim.watch import DELETED

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

JOB_CONTROLLER = "kubernetes.io/job-controller"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
_copy = msgspec.json.Decoder().decode
_enc = msgspec.json.Encoder().encode

JobKey = tuple[str, str]


def managed_here(job: Mapping[str, Any]) -> bool:
    return job.get("spec", {}).get("managedBy") in (None, JOB_CONTROLLER)


def finished(job: Mapping[str, Any]) -> bool:
    return condition_true(job, "Complete") or condition_true(job, "Failed")


class JobController:
    def __init__(self, cluster: Cluster) -> None:
        self._c = cluster
        self._store = cluster.store
        self.queue: WorkQueue[JobKey] = WorkQueue("job", per_key(self.reconcile, "job"))
        # job uid -> {pod uid: terminal phase}: each finished pod counts once, even after it is gone.
        self._counted: dict[str, dict[str, str]] = {}
        self._store.subscribe(JOBS, self._on_job)
        self._store.subscribe(PODS, self._on_pod)

    def _on_job(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        if etype == DELETED:
            self._counted.pop(new["metadata"]["uid"], None)
            return
        self.queue.add((new["metadata"]["namespace"], new["metadata"]["name"]))

    def _on_pod(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        ref = controller_ref(new, "Job")
        if ref is not None:
            self.queue.add((new["metadata"]["namespace"], ref["name"]))

    def poke(self, key: JobKey) -> None:
        self.queue.add(key)

    # --- reconcile ---

    def reconcile(self, key: JobKey) -> None:
        ns, name = key
        e = self._store.find(JOBS, ns, name)
        if e is None:
            return
        job = e.obj
        if not managed_here(job) or job["metadata"].get("deletionTimestamp"):
            return
        uid = job["metadata"]["uid"]
        spec = job.get("spec", {})
        pods = pods_of_job(self._store, uid)
        counted = self._counted.setdefault(uid, {})
        for p in pods:
            phase = p.obj.get("status", {}).get("phase")
            pod_uid = p.obj["metadata"]["uid"]
            if phase in ("Succeeded", "Failed") and pod_uid not in counted:
                if phase == "Failed" and p.obj["metadata"].get("deletionTimestamp"):
                    continue  # terminated because it was deleted: not a failure of the job
                counted[pod_uid] = phase
        active = [p for p in pods if not is_terminal(p.obj) and not p.obj["metadata"].get("deletionTimestamp")]
        terminating = sum(1 for p in pods if not is_terminal(p.obj) and p.obj["metadata"].get("deletionTimestamp"))
        succeeded = sum(1 for v in counted.values() if v == "Succeeded")
        failed = sum(1 for v in counted.values() if v == "Failed")
        now = now_rfc3339()
        status: dict[str, Any] = _copy(_enc(job.get("status") or {}))

        if finished(job):
            self._delete_pods(active)
            active = []
        elif self._c.outcome_for_job(job) is False or failed > int(spec.get("backoffLimit", 6)):
            self._delete_pods(active)
            active = []
            msg = "Job has reached the specified backoff limit"
            set_condition(status, "FailureTarget", "True", "BackoffLimitExceeded", msg, now, probe=True)
            set_condition(status, "Failed", "True", "BackoffLimitExceeded", msg, now, probe=True)
        elif self._complete(spec, pods, counted, succeeded, active):
            self._delete_pods(active)
            active = []
            msg = "Reached expected number of succeeded pods"
            set_condition(status, "SuccessCriteriaMet", "True", "CompletionsReached", msg, now, probe=True)
            set_condition(status, "Complete", "True", "CompletionsReached", msg, now, probe=True)
            status["completionTime"] = now
        elif spec.get("suspend"):
            self._delete_pods(active)
            active = []
            set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", now, probe=True)
            status.pop("startTime", None)
        else:
            if condition_true(job, "Suspended"):
                set_condition(status, "Suspended", "False", "JobResumed", "Job resumed", now, probe=True)
            status.setdefault("startTime", now)
            active = self._scale(job, pods, counted, succeeded, active)

        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if condition_true(p.obj, "Ready"))
        status["succeeded"] = succeeded
        status["failed"] = failed
        status["terminating"] = terminating
        if spec.get("completionMode") == "Indexed":
            done = sorted(int(i) for i in self._succeeded_indexes(pods, counted))
            status["completedIndexes"] = _ranges(done)
        for k in ("active", "succeeded", "failed"):
            if not status[k] and k not in (job.get("status") or {}):
                del status[k]
        self._store.modify(JOBS, ns, name, lambda j: j.__setitem__("status", status), status_only=True)

    def _complete(self, spec: Mapping[str, Any], pods: list[Entry], counted: dict[str, str], succeeded: int,
                  active: list[Entry]) -> bool:
        completions = spec.get("completions")
        if completions is None:
            return succeeded > 0 and not active
        if spec.get("completionMode") == "Indexed":
            return len(self._succeeded_indexes(pods, counted)) >= int(completions)
        return succeeded >= int(completions)

    def _succeeded_indexes(self, pods: list[Entry], counted: dict[str, str]) -> set[str]:
        return {
            (p.obj["metadata"].get("annotations") or {}).get(INDEX_KEY, "")
            for p in pods
            if counted.get(p.obj["metadata"]["uid"]) == "Succeeded"
        } - {""}

    def _scale(self, job: Mapping[str, Any], pods: list[Entry], counted: dict[str, str], succeeded: int,
               active: list[Entry]) -> list[Entry]:
        spec = job.get("spec", {})
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        indexed = spec.get("completionMode") == "Indexed"
        if completions is None:
            want = 0 if succeeded > 0 else parallelism
        elif indexed:
            want = min(parallelism, int(completions) - len(self._succeeded_indexes(pods, counted)))
        else:
            want = min(parallelism, int(completions) - succeeded)
        want = max(want, 0)
        if len(active) > want:
            # Remove the least advanced first: pending, then not ready, then the newest.
            order = sorted(active, key=lambda p: (p.obj.get("status", {}).get("phase") == "Running",
                                                  condition_true(p.obj, "Ready"), -p.rv))
            extra = order[: len(active) - want]
            self._delete_pods(extra)
            drop = {id(p) for p in extra}
            return [p for p in active if id(p) not in drop]
        missing = want - len(active)
        if missing <= 0:
            return active
        indexes: list[int | None] = [None] * missing
        if indexed:
            taken = self._succeeded_indexes(pods, counted) | {
                (p.obj["metadata"].get("annotations") or {}).get(INDEX_KEY, "") for p in active
            }
            free = [i for i in range(int(completions)) if str(i) not in taken]
            indexes = list(free[:missing])
        for index in indexes:
            active.append(self._create_pod(job, index))
        return active

    def _create_pod(self, job: Mapping[str, Any], index: int | None) -> Entry:
        meta, spec = job["metadata"], job["spec"]
        tmpl = _copy(_enc(spec.get("template") or {}))
        tmeta = tmpl.get("metadata") or {}
        labels = dict(tmeta.get("labels") or {})
        annotations = dict(tmeta.get("annotations") or {})
        pod_spec = tmpl.get("spec") or {}
        prefix = f"{meta['name']}-"
        if index is not None:
            labels[INDEX_KEY] = str(index)
            annotations[INDEX_KEY] = str(index)
            prefix = f"{meta['name']}-{index}-"
            pod_spec.setdefault("hostname", f"{meta['name']}-{index}")
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": prefix,
                "namespace": meta["namespace"],
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [{
                    "apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"],
                    "controller": True, "blockOwnerDeletion": True,
                }],
            },
            "spec": pod_spec,
        }
        if not annotations:
            del pod["metadata"]["annotations"]
        return self._store.create(PODS, meta["namespace"], pod)

    def _delete_pods(self, pods: list[Entry]) -> None:
        for p in pods:
            m = p.obj["metadata"]
            if not m.get("deletionTimestamp") and self._store.find(PODS, m["namespace"], m["name"]) is not None:
                self._store.delete(PODS, m["namespace"], m["name"], propagation="Background")


def _ranges(indexes: list[int]) -> str:
    """Kubernetes' compressed index list: "0-2,5"."""
    out: list[str] = []
    i = 0
    while i < len(indexes):
        j = i
        while j + 1 < len(indexes) and indexes[j + 1] == indexes[j] + 1:
            j += 1
        out.append(str(indexes[i]) if i == j else f"{indexes[i]}-{indexes[j]}")
        i = j + 1
    return ",".join(out)
