"""Older Kueue API versions (v1beta1, v1alpha1) converted to v1beta2, on plain mappings.

Follows Kueue's conversion functions (apis/kueue/v1beta1/*_conversion.go):
- ClusterQueue: spec.cohort -> spec.cohortName; spec.admissionChecks [names] ->
  spec.admissionChecksStrategy.admissionChecks [{name}]; flavorFungibility
  whenCanBorrow "Borrow" and whenCanPreempt "Preempt" -> "MayStopSearch";
  status.pendingWorkloadsStatus and status.fairSharing.admissionFairSharingStatus dropped.
- LocalQueue: status.flavorUsage -> status.flavorsUsage; status.flavors dropped.
- Cohort: v1alpha1 spec.parent -> spec.parentName; status.fairSharing.admissionFairSharingStatus dropped.
- MultiKueueCluster: spec.kubeConfig / spec.clusterProfileRef -> spec.clusterSource.*.
- AdmissionCheck: spec.retryDelayMinutes dropped (gone in v1beta2).
- Workload: spec.priorityClassName + spec.priorityClassSource -> spec.priorityClassRef;
  status.accumulatedPastExexcutionTimeSeconds (sic) -> accumulatedPastExecutionTimeSeconds;
  topologyAssignment {levels, domains} -> {levels, slices}.
- ResourceFlavor, Topology, MultiKueueConfig, WorkloadPriorityClass: unchanged.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from kq.api.constants import KUEUE_API_VERSION, KUEUE_GROUP
from kq.api.topology import TopologyDomain, compact_topology_assignment
from kq.api.workload import TopologyAssignment

__all__ = ["ConversionError", "LEGACY_KINDS", "is_legacy", "convert_to_v1beta2"]

LEGACY_KINDS: dict[str, frozenset[str]] = {
    f"{KUEUE_GROUP}/v1beta1": frozenset(
        {
            "ResourceFlavor",
            "ClusterQueue",
            "LocalQueue",
            "Cohort",
            "Topology",
            "AdmissionCheck",
            "MultiKueueConfig",
            "MultiKueueCluster",
            "WorkloadPriorityClass",
            "Workload",
        }
    ),
    f"{KUEUE_GROUP}/v1alpha1": frozenset({"Cohort", "Topology", "MultiKueueConfig", "MultiKueueCluster"}),
}

_WORKLOAD_PRIORITY_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
_POD_PRIORITY_SOURCE = "scheduling.k8s.io/priorityclass"


class ConversionError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def is_legacy(api_version: str, kind: str) -> bool:
    return kind in LEGACY_KINDS.get(api_version, frozenset())


def _mapping(parent: dict[str, Any], key: str, path: str) -> dict[str, Any] | None:
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConversionError(f"{path}.{key}" if path else key, "expected a mapping")
    return value


def _rename(obj: dict[str, Any], old: str, new: str, path: str) -> None:
    if old not in obj:
        return
    if new in obj:
        raise ConversionError(f"{path}.{old}", f"cannot be set together with {new}")
    obj[new] = obj.pop(old)


def _drop_admission_fair_sharing(status: dict[str, Any] | None) -> None:
    if status and isinstance(status.get("fairSharing"), dict):
        status["fairSharing"].pop("admissionFairSharingStatus", None)


def _cluster_queue(doc: dict[str, Any]) -> None:
    spec = _mapping(doc, "spec", "")
    if spec is not None:
        _rename(spec, "cohort", "cohortName", "spec")
        checks = spec.pop("admissionChecks", None)
        if checks:
            if spec.get("admissionChecksStrategy"):
                raise ConversionError("spec.admissionChecks", "cannot be set together with admissionChecksStrategy")
            if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
                raise ConversionError("spec.admissionChecks", "expected a list of AdmissionCheck names")
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
        ff = _mapping(spec, "flavorFungibility", "spec")
        if ff is not None:
            if ff.get("whenCanBorrow") == "Borrow":
                ff["whenCanBorrow"] = "MayStopSearch"
            if ff.get("whenCanPreempt") == "Preempt":
                ff["whenCanPreempt"] = "MayStopSearch"
    status = _mapping(doc, "status", "")
    if status is not None:
        status.pop("pendingWorkloadsStatus", None)
        _drop_admission_fair_sharing(status)


def _local_queue(doc: dict[str, Any]) -> None:
    status = _mapping(doc, "status", "")
    if status is not None:
        _rename(status, "flavorUsage", "flavorsUsage", "status")
        status.pop("flavors", None)


def _cohort(doc: dict[str, Any]) -> None:
    spec = _mapping(doc, "spec", "")
    if spec is not None:
        _rename(spec, "parent", "parentName", "spec")
    _drop_admission_fair_sharing(_mapping(doc, "status", ""))


def _multikueue_cluster(doc: dict[str, Any]) -> None:
    spec = _mapping(doc, "spec", "")
    if spec is None:
        return
    source: dict[str, Any] = {}
    kube = spec.pop("kubeConfig", None)
    if kube is not None:
        if not isinstance(kube, dict):
            raise ConversionError("spec.kubeConfig", "expected a mapping")
        if kube.get("location"):
            source["kubeConfig"] = kube
    profile = spec.pop("clusterProfileRef", None)
    if profile is not None:
        source["clusterProfileRef"] = profile
    if source:
        if "clusterSource" in spec:
            raise ConversionError("spec.kubeConfig", "cannot be set together with clusterSource")
        spec["clusterSource"] = source


def _admission_check(doc: dict[str, Any]) -> None:
    spec = _mapping(doc, "spec", "")
    if spec is not None:
        spec.pop("retryDelayMinutes", None)


def _topology_assignment(ta: dict[str, Any], path: str) -> dict[str, Any]:
    if "slices" in ta:
        return ta
    levels = ta.get("levels") or []
    domains = []
    for i, d in enumerate(ta.get("domains") or []):
        if not isinstance(d, dict) or not isinstance(d.get("values"), list) or not isinstance(d.get("count"), int):
            raise ConversionError(f"{path}.domains[{i}]", "expected {values: [...], count: N}")
        domains.append(TopologyDomain(tuple(d["values"]), d["count"]))
    try:
        compact: TopologyAssignment = compact_topology_assignment(tuple(levels), domains)
    except ValueError as e:
        raise ConversionError(path, str(e)) from None
    out: dict[str, Any] = msgspec.to_builtins(compact)
    return out


def _workload(doc: dict[str, Any]) -> None:
    spec = _mapping(doc, "spec", "")
    if spec is not None:
        name = spec.pop("priorityClassName", None)
        source = spec.pop("priorityClassSource", None) or ""
        if name:
            if source == _WORKLOAD_PRIORITY_SOURCE:
                spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": name}
            elif source == _POD_PRIORITY_SOURCE:
                spec["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}
            else:
                raise ConversionError(
                    "spec.priorityClassSource",
                    f"must be {_WORKLOAD_PRIORITY_SOURCE!r} or {_POD_PRIORITY_SOURCE!r} when priorityClassName is set",
                )
    status = _mapping(doc, "status", "")
    if status is None:
        return
    _rename(status, "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds", "status")
    admission = _mapping(status, "admission", "status")
    if admission is None:
        return
    for i, psa in enumerate(admission.get("podSetAssignments") or []):
        if isinstance(psa, dict) and isinstance(psa.get("topologyAssignment"), dict):
            path = f"status.admission.podSetAssignments[{i}].topologyAssignment"
            psa["topologyAssignment"] = _topology_assignment(psa["topologyAssignment"], path)


_CONVERTERS = {
    "ClusterQueue": _cluster_queue,
    "LocalQueue": _local_queue,
    "Cohort": _cohort,
    "MultiKueueCluster": _multikueue_cluster,
    "AdmissionCheck": _admission_check,
    "Workload": _workload,
}


def convert_to_v1beta2(doc: dict[str, Any]) -> dict[str, Any]:
    """A v1beta2 copy of a legacy Kueue object (the input is left untouched)."""
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not is_legacy(api_version, kind):
        raise ConversionError("apiVersion", f"no conversion from {api_version}/{kind}")
    out = copy.deepcopy(doc)
    out["apiVersion"] = KUEUE_API_VERSION
    convert = _CONVERTERS.get(kind)
    if convert is not None:
        convert(out)
    return out
