"""The objects the dispatcher creates on a worker, built from the manager's raw JSON (pure).

A Workload copy keeps the manager's namespace, name and spec, drops server-owned metadata,
owner references and the job-uid label, and gains the origin label (whose manager it is, for
gc) and the origin uid annotation (which incarnation). The Job copy is the manager's Job with
the prebuilt-workload label (the worker's Kueue adopts the copy instead of building its own),
the origin label, suspended, without spec.managedBy (the worker's Job controller runs it) and
without the selector and controller labels the manager's API server generated. Every other kind
(JobSet, Kubeflow jobs, MPIJob, RayJob, RayCluster, TrainJob, AppWrapper: core/kinds.py) is copied
the same way, with its kind's own place for managedBy and suspend.
"""

from __future__ import annotations

import copy
from typing import Any

from kq.api import constants as k

from .kinds import ADAPTERS_BY_TOKEN
from .model import LEASE_ANNOTATION

_JOB_GENERATED_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name",
                         "batch.kubernetes.io/job-name")
_SERVER_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                "deletionGracePeriodSeconds", "managedFields", "ownerReferences", "finalizers", "selfLink",
                "generateName")


def _meta(meta: dict[str, Any], origin: str, extra_labels: dict[str, str]) -> dict[str, Any]:
    out = {key: copy.deepcopy(v) for key, v in meta.items() if key not in _SERVER_META}
    labels = dict(out.get("labels") or {})
    labels.pop(k.JOB_UID_LABEL, None)
    labels.update(extra_labels)
    labels[k.MULTIKUEUE_ORIGIN_LABEL] = origin
    out["labels"] = labels
    return out


def remote_workload(local: dict[str, Any], origin: str, lease_until: str | None) -> dict[str, Any]:
    """lease_until: the manager's first lease on the copy (renewed once it wins; see model.LEASE_ANNOTATION)."""
    meta = _meta(local.get("metadata") or {}, origin, {})
    annotations = dict(meta.get("annotations") or {})
    annotations[k.MULTIKUEUE_ORIGIN_UID_ANNOTATION] = (local.get("metadata") or {}).get("uid", "")
    if lease_until is not None:
        annotations[LEASE_ANNOTATION] = lease_until
    meta["annotations"] = annotations
    return {"apiVersion": k.KUEUE_API_VERSION, "kind": "Workload", "metadata": meta,
            "spec": copy.deepcopy(local.get("spec") or {})}


def remote_job(local_job: dict[str, Any], workload_name: str, origin: str) -> dict[str, Any]:
    meta = _meta(local_job.get("metadata") or {}, origin, {k.PREBUILT_WORKLOAD_LABEL: workload_name})
    for key in _JOB_GENERATED_LABELS:
        meta["labels"].pop(key, None)
    spec = copy.deepcopy(local_job.get("spec") or {})
    spec.pop("managedBy", None)
    spec["suspend"] = True
    if not spec.get("manualSelector"):
        spec.pop("selector", None)
        tmeta = (spec.get("template") or {}).get("metadata")
        if isinstance(tmeta, dict) and isinstance(tmeta.get("labels"), dict):
            tmeta["labels"] = {key: v for key, v in tmeta["labels"].items() if key not in _JOB_GENERATED_LABELS}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def remote_object(token: str, local: dict[str, Any], workload_name: str, origin: str) -> dict[str, Any]:
    """Any other kind MultiKueue runs (core/kinds.py): the labels, and the kind's own spec edits."""
    meta = _meta(local.get("metadata") or {}, origin, {k.PREBUILT_WORKLOAD_LABEL: workload_name})
    adapter = ADAPTERS_BY_TOKEN[token]
    spec = copy.deepcopy(local.get("spec") or {})
    adapter.edit_spec(spec)
    return {"apiVersion": local.get("apiVersion") or adapter.api_version, "kind": adapter.kind, "metadata": meta,
            "spec": spec}


def remote_copy(kind: str, local: dict[str, Any], workload_name: str, origin: str) -> dict[str, Any]:
    """The worker's copy of the manager's object of kind token `kind` ("job", "jobset", "pytorchjob", ...)."""
    return remote_job(local, workload_name, origin) if kind == "job" else remote_object(kind, local, workload_name,
                                                                                         origin)
