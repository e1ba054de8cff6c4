"""Per-kind defaulting and validation: what the API server's strategies and Kueue's webhooks do.

- Namespace: spec.finalizers [kubernetes], status.phase Active.
- Pod: spec defaults (restartPolicy, schedulerName, grace period, priority from its
  PriorityClass), container requests default to limits, status Pending with a QoS class;
  updates: a bound pod's spec is immutable (images, activeDeadlineSeconds and added
  tolerations aside); before binding, scheduling gates can only be removed and, while gated,
  nodeSelector can only gain keys and affinity may change (pod scheduling readiness).
- Job: batch/v1 defaults (parallelism, completions, backoffLimit, completionMode, suspend,
  selector and controller-uid/job-name template labels); restartPolicy Never/OnFailure.
  Kueue's webhook: a Job labelled kueue.x-k8s.io/queue-name is created suspended.
  Updates: selector and completions are immutable; the pod template is immutable except
  labels, annotations, nodeSelector, tolerations, affinity and schedulingGates while the Job
  is suspended and has not started (status.startTime unset), as Kueue relies on.
- JobSet: replicas default 1, pod restartPolicy default OnFailure (JobSet's webhook); a
  labelled JobSet is created suspended (Kueue's webhook).
- Pod (Kueue's pod webhook): a pod labelled with a queue name, not bound and not run by a
  Job or JobSet (their own integrations queue those), gets the `kueue.x-k8s.io/admission`
  scheduling gate and the `kueue.x-k8s.io/managed` label.
- Deployment / StatefulSet (Kueue's webhooks): the queue name goes onto the pod template;
  a StatefulSet's pods also form one serving pod group of `replicas` pods (fast admission).
- Kubeflow training jobs, MPIJob, RayJob, RayCluster, the default LocalQueue and
  manageJobsWithoutQueueName: kubesim/kueue_webhooks.py.
- LeaderWorkerSet (Kueue's webhook): the queue name goes onto its templates; each group
  (leader and workers) becomes one serving pod group of `size` pods.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kq.quantity import QuantityError, to_milli
from kubesim.errors import ApiError, invalid
from kubesim.kueue_webhooks import (
    NAME_LABEL,
    TRAINING_FIELDS,
    KueueOptions,
    apply_queue_defaults,
    default_appwrapper,
    default_managed_by,
    default_ray,
    default_training_job,
    default_trainjob,
)
from kubesim.resources import ResourceType, by_key

if TYPE_CHECKING:
    from kubesim.store import Store

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "affinity", "schedulingGates")
_PRIORITY_CLASSES = by_key("priorityclasses.scheduling.k8s.io")


class ClusterAdmission:
    def __init__(self, kueue: KueueOptions | None = None) -> None:
        self.kueue = kueue or KueueOptions()

    def on_create(self, store: Store, rt: ResourceType, obj: dict[str, Any]) -> None:
        key = rt.key
        # Kueue's webhooks first: the default LocalQueue, and whether it manages an unlabelled object.
        managed = apply_queue_defaults(store, self.kueue, rt, obj)
        default_managed_by(store, rt, obj)
        if key == "namespaces":
            obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
            obj["status"] = {"phase": "Active"}
            obj["metadata"].setdefault("labels", {})[NAME_LABEL] = obj["metadata"]["name"]
        elif key == "pods":
            _default_pod(store, rt, obj, managed)
        elif key == "jobs.batch":
            _default_job(rt, obj)
            if managed:
                obj["spec"]["suspend"] = True
        elif key == "jobsets.jobset.x-k8s.io":
            _default_jobset(rt, obj)
            if managed:
                obj["spec"]["suspend"] = True
        elif rt.kind in TRAINING_FIELDS and rt.group == "kubeflow.org":
            default_training_job(rt, obj, managed)
        elif rt.group == "ray.io":
            default_ray(rt, obj, managed)
        elif key == "trainjobs.trainer.kubeflow.org":
            default_trainjob(rt, obj, managed)
        elif key == "appwrappers.workload.codeflare.dev":
            default_appwrapper(rt, obj, managed)
        elif key in ("deployments.apps", "statefulsets.apps"):
            _default_serving(rt, obj)
        elif key == "leaderworkersets.leaderworkerset.x-k8s.io":
            _default_lws(rt, obj)

    def on_update(self, store: Store, rt: ResourceType, old: Mapping[str, Any], new: dict[str, Any]) -> None:
        key = rt.key
        if key == "namespaces":
            new["spec"] = old.get("spec", {})  # spec.finalizers change only through the namespace controller
        elif key == "pods":
            _validate_pod_update(rt, old, new)
        elif key == "jobs.batch":
            _validate_job_update(rt, old, new)


# --- pods --------------------------------------------------------------------------------------


def _default_pod(store: Store, rt: ResourceType, pod: dict[str, Any], managed: bool = False) -> None:
    name = pod["metadata"]["name"]
    spec = pod.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list) or not spec["containers"]:
        raise invalid(rt, name, "spec.containers", [], "Required value")
    for i, c in enumerate(spec["containers"] + (spec.get("initContainers") or [])):
        if not isinstance(c, dict) or not c.get("name"):
            raise invalid(rt, name, f"spec.containers[{i}].name", c.get("name") if isinstance(c, dict) else c,
                          "Required value")
        res = c.get("resources")
        if isinstance(res, dict) and isinstance(res.get("limits"), dict):
            requests = res.setdefault("requests", {})
            for r, q in res["limits"].items():
                requests.setdefault(r, q)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec["priority"] = _priority(store, rt, name, spec.get("priorityClassName"))
    _gate_queued_pod(pod, managed)
    pod["status"] = {"phase": "Pending", "qosClass": _qos(spec["containers"])}
    if spec.get("schedulingGates"):
        pod["status"]["conditions"] = [{
            "type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
            "lastTransitionTime": pod["metadata"]["creationTimestamp"],
        }]


def _priority(store: Store, rt: ResourceType, name: str, class_name: str | None) -> int:
    if class_name:
        e = store.find(_PRIORITY_CLASSES, "", class_name)
        if e is None:
            if class_name in ("system-cluster-critical", "system-node-critical"):
                return 2000000000 if class_name == "system-cluster-critical" else 2000001000
            raise ApiError(403, f'pods "{name}" is forbidden: no PriorityClass with name {class_name} was found')
        return int(e.obj.get("value", 0))
    for e in store.iter_all(_PRIORITY_CLASSES):
        if e.obj.get("globalDefault"):
            return int(e.obj.get("value", 0))
    return 0


def _qos(containers: list[dict[str, Any]]) -> str:
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or req.get(r, lim.get(r)) != lim.get(r):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _strip(spec: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if k not in fields}
    for group in ("containers", "initContainers"):
        if isinstance(out.get(group), list):
            out[group] = [{k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c
                          for c in out[group]]
    return out


def _validate_pod_update(rt: ResourceType, old: Mapping[str, Any], new: dict[str, Any]) -> None:
    name = old["metadata"]["name"]
    o, n = old.get("spec", {}), new.get("spec", {})
    if o == n:
        return
    mutable = ("activeDeadlineSeconds", "tolerations", "nodeName", *_SCHEDULING_DIRECTIVES)
    if _strip(o, mutable) != _strip(n, mutable):
        raise invalid(rt, name, "spec", "", "Forbidden: pod updates may not change fields other than "
                      "`spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, "
                      "`spec.tolerations` (only additions to existing tolerations), `spec.schedulingGates` "
                      "(only removals) or scheduling directives of a gated pod")
    old_tol, new_tol = o.get("tolerations") or [], n.get("tolerations") or []
    if any(t not in new_tol for t in old_tol):
        raise invalid(
            rt,
            name,
            "spec.tolerations",
            new_tol,
            "existing toleration can not be modified except its tolerationSeconds",
        )
    if o.get("nodeName") and n.get("nodeName") != o.get("nodeName"):
        raise invalid(rt, name, "spec.nodeName", n.get("nodeName"), "field is immutable")
    old_gates = [g.get("name") for g in o.get("schedulingGates") or []]
    new_gates = [g.get("name") for g in n.get("schedulingGates") or []]
    added = [g for g in new_gates if g not in old_gates]
    if added:
        raise invalid(
            rt, name, "spec.schedulingGates", added[0], "only deletion is allowed, but found new scheduling gate"
        )
    gated = bool(old_gates)
    old_sel, new_sel = o.get("nodeSelector") or {}, n.get("nodeSelector") or {}
    if old_sel != new_sel and (not gated or any(new_sel.get(k) != v for k, v in old_sel.items())):
        raise invalid(
            rt,
            name,
            "spec.nodeSelector",
            new_sel,
            "only additions to nodeSelector are allowed, and only while the pod has scheduling gates",
        )
    if o.get("affinity") != n.get("affinity") and not gated:
        raise invalid(rt, name, "spec.affinity", "", "field is immutable once the pod has no scheduling gates")


# --- jobs --------------------------------------------------------------------------------------


_JOB_COUNTS = ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished",
               "backoffLimitPerIndex", "maxFailedIndexes")
_INT32_MAX = 2**31 - 1


def _validate_job_fields(rt: ResourceType, name: str, spec: Mapping[str, Any], tspec: Mapping[str, Any]) -> None:
    """What the API server's schema and Job validation refuse before any controller sees the Job:
    counts that are not non-negative int32s, an unknown completionMode, a container list that is
    not one, requests that are not quantities."""
    for field in _JOB_COUNTS:
        v = spec.get(field)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _INT32_MAX):
            raise invalid(rt, name, f"spec.{field}", v, f"must be an integer between 0 and {_INT32_MAX}")
    if spec.get("suspend") is not None and not isinstance(spec.get("suspend"), bool):
        raise invalid(rt, name, "spec.suspend", spec.get("suspend"), "must be a boolean")
    if spec.get("completionMode", "NonIndexed") not in ("NonIndexed", "Indexed"):
        raise invalid(rt, name, "spec.completionMode", spec.get("completionMode"),
                      'supported values: "NonIndexed", "Indexed"')
    containers = tspec.get("containers")
    if not isinstance(containers, list) or not all(isinstance(c, dict) for c in containers):
        raise invalid(rt, name, "spec.template.spec.containers", containers, "must be a list of containers")
    for i, c in enumerate(containers):
        resources = c.get("resources", {})
        for part in ("requests", "limits"):
            values = resources.get(part, {}) if isinstance(resources, dict) else None
            if not isinstance(values, dict):
                raise invalid(rt, name, f"spec.template.spec.containers[{i}].resources", resources, "must be a mapping")
            for res, q in values.items():
                try:
                    to_milli(q)
                except (QuantityError, TypeError, ValueError):
                    raise invalid(rt, name, f"spec.template.spec.containers[{i}].resources.{part}[{res}]", q,
                                  "must be a quantity") from None


def _default_job(rt: ResourceType, job: dict[str, Any]) -> None:
    meta = job["metadata"]
    name, uid = meta["name"], meta["uid"]
    spec = job.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
        raise invalid(rt, name, "spec.template", None, "Required value")
    tmpl = spec["template"]
    tspec = tmpl.get("spec")
    if not isinstance(tspec, dict) or not tspec.get("containers"):
        raise invalid(rt, name, "spec.template.spec.containers", [], "Required value")
    if tspec.get("restartPolicy") not in ("Never", "OnFailure"):
        raise invalid(rt, name, "spec.template.spec.restartPolicy", tspec.get("restartPolicy"),
                      'Required value: valid values: "OnFailure", "Never"')
    _validate_job_fields(rt, name, spec, tspec)
    if spec.get("parallelism") is None and spec.get("completions") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    if spec["completionMode"] == "Indexed" and spec.get("completions") is None:
        raise invalid(rt, name, "spec.completions", None, "when completion mode is Indexed: Required value")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    if not spec.get("manualSelector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = tmpl.setdefault("metadata", {}).setdefault("labels", {})
    labels.update({
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    })
    if (meta.get("labels") or {}).get(QUEUE_LABEL):
        spec["suspend"] = True  # Kueue's job webhook: queued jobs start suspended


def _validate_job_update(rt: ResourceType, old: Mapping[str, Any], new: dict[str, Any]) -> None:
    name = old["metadata"]["name"]
    o, n = old.get("spec", {}), new.get("spec", {})
    if n.get("selector") != o.get("selector"):
        raise invalid(rt, name, "spec.selector", n.get("selector"), "field is immutable")
    if n.get("completions") != o.get("completions") and not (
        o.get("completionMode") == "Indexed" and n.get("completions") == n.get("parallelism")
    ):
        raise invalid(rt, name, "spec.completions", n.get("completions"), "field is immutable")
    if n.get("completionMode") != o.get("completionMode"):
        raise invalid(rt, name, "spec.completionMode", n.get("completionMode"), "field is immutable")
    ot, nt = o.get("template", {}), n.get("template", {})
    if ot == nt:
        return
    suspended_not_started = bool(o.get("suspend")) and not (old.get("status") or {}).get("startTime")
    if suspended_not_started:
        ot_s, nt_s = _template_core(ot), _template_core(nt)
        if ot_s == nt_s:
            return
    raise invalid(rt, name, "spec.template", "", "field is immutable")


def _template_core(t: Mapping[str, Any]) -> dict[str, Any]:
    """A pod template without the parts a suspended, never-started Job may change."""
    meta = {k: v for k, v in (t.get("metadata") or {}).items() if k not in ("labels", "annotations")}
    spec = {k: v for k, v in (t.get("spec") or {}).items() if k not in _SCHEDULING_DIRECTIVES}
    return {**{k: v for k, v in t.items() if k not in ("metadata", "spec")}, "metadata": meta, "spec": spec}


# --- jobsets -----------------------------------------------------------------------------------


def _default_jobset(rt: ResourceType, js: dict[str, Any]) -> None:
    name = js["metadata"]["name"]
    spec = js.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("replicatedJobs"), list) or not spec["replicatedJobs"]:
        raise invalid(rt, name, "spec.replicatedJobs", None, "Required value")
    for i, rj in enumerate(spec["replicatedJobs"]):
        if not isinstance(rj, dict) or not rj.get("name") or not isinstance(rj.get("template"), dict):
            raise invalid(rt, name, f"spec.replicatedJobs[{i}]", None, "name and template are required")
        rj.setdefault("replicas", 1)
        # The JobSet webhook: a pod template without a restartPolicy gets OnFailure.
        pod_spec = ((rj["template"].get("spec") or {}).get("template") or {}).get("spec")
        if isinstance(pod_spec, dict):
            pod_spec.setdefault("restartPolicy", "OnFailure")
    spec.setdefault("suspend", False)
    if (js["metadata"].get("labels") or {}).get(QUEUE_LABEL):
        spec["suspend"] = True  # Kueue's JobSet webhook


# --- Kueue's pod, Deployment and StatefulSet webhooks -----------------------------------------

ADMISSION_GATE = "kueue.x-k8s.io/admission"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
GROUP_FAST_ADMISSION_ANNOTATION = "kueue.x-k8s.io/pod-group-fast-admission"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
GROUP_SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving"
_OWN_INTEGRATION = ("Job", "JobSet", "RayJob", "RayCluster", "TrainJob", "AppWrapper", *TRAINING_FIELDS)


def _gate_queued_pod(pod: dict[str, Any], managed: bool = False) -> None:
    meta = pod["metadata"]
    if not (managed or (meta.get("labels") or {}).get(QUEUE_LABEL)) or pod["spec"].get("nodeName"):
        return
    if any(r.get("controller") and r.get("kind") in _OWN_INTEGRATION for r in meta.get("ownerReferences") or ()):
        return
    gates = pod["spec"].setdefault("schedulingGates", [])
    if not any(g.get("name") == ADMISSION_GATE for g in gates):
        gates.append({"name": ADMISSION_GATE})
    meta.setdefault("labels", {})[MANAGED_LABEL] = "true"
    lws = meta["labels"].get(LWS_NAME_LABEL)
    if lws:  # Kueue's LeaderWorkerSet integration: each group of leader and workers is one serving pod group
        index = meta["labels"].get(LWS_GROUP_INDEX_LABEL) or meta["labels"].get("apps.kubernetes.io/pod-index", "0")
        meta["labels"][LWS_GROUP_INDEX_LABEL] = index
        meta["labels"][GROUP_NAME_LABEL] = f"leaderworkerset-{lws}-{index}"
        annotations = meta.setdefault("annotations", {})
        annotations[GROUP_TOTAL_COUNT_ANNOTATION] = annotations.get(LWS_SIZE_ANNOTATION, "1")
        annotations[GROUP_SERVING_ANNOTATION] = "true"


def _default_serving(rt: ResourceType, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
        raise invalid(rt, meta["name"], "spec.template", None, "Required value")
    spec.setdefault("replicas", 1)
    queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
    if not queue:
        return
    tmeta = spec["template"].setdefault("metadata", {})
    labels = tmeta.setdefault("labels", {})
    labels[QUEUE_LABEL] = queue
    if priority := (meta.get("labels") or {}).get(PRIORITY_LABEL):
        labels[PRIORITY_LABEL] = priority
    if rt.kind == "StatefulSet":
        digest = hashlib.sha1(f"StatefulSet\napps\n{meta['name']}\n{meta['uid']}".encode()).hexdigest()[:5]
        labels[GROUP_NAME_LABEL] = f"statefulset-{meta['name']}-{digest}"
        annotations = tmeta.setdefault("annotations", {})
        annotations[GROUP_TOTAL_COUNT_ANNOTATION] = str(spec["replicas"])
        annotations[GROUP_SERVING_ANNOTATION] = "true"
        annotations[GROUP_FAST_ADMISSION_ANNOTATION] = "true"  # OrderedReady: admitted on the first pod


def _default_lws(rt: ResourceType, obj: dict[str, Any]) -> None:
    """LWS defaults (replicas 1, size 1) and Kueue's LWS webhook: the queue and priority labels
    onto the leader and worker templates."""
    meta = obj["metadata"]
    spec = obj.get("spec")
    lwt = spec.get("leaderWorkerTemplate") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(lwt, dict) or not isinstance(lwt.get("workerTemplate"), dict):
        raise invalid(rt, meta["name"], "spec.leaderWorkerTemplate.workerTemplate", None, "Required value")
    spec.setdefault("replicas", 1)
    lwt.setdefault("size", 1)
    labels = meta.get("labels") or {}
    carried = {k: labels[k] for k in (QUEUE_LABEL, PRIORITY_LABEL) if labels.get(k)}
    if not carried:
        return
    for t in ("leaderTemplate", "workerTemplate"):
        if isinstance(lwt.get(t), dict):
            tl = lwt[t].setdefault("metadata", {}).setdefault("labels", {})
            tl.update(carried)
