"""v1beta2 Kueue objects converted back to v1beta1, on plain mappings: what the CRDs' conversion webhook
answers when a client reads a v1beta1 object that is stored as v1beta2 (kq.api.convert goes the
other way). Follows Kueue's conversion functions (apis/kueue/v1beta1/*_conversion.go), reversed:

- ClusterQueue: spec.cohortName -> spec.cohort; flavorFungibility "MayStopSearch" -> whenCanBorrow
  "Borrow", whenCanPreempt "Preempt" (admissionChecksStrategy exists in both versions).
- LocalQueue: status.flavorsUsage -> status.flavorUsage.
- MultiKueueCluster: spec.clusterSource.kubeConfig / .clusterProfileRef -> spec.kubeConfig / spec.clusterProfileRef.
- Workload: spec.priorityClassRef -> spec.priorityClassName + spec.priorityClassSource;
  status.accumulatedPastExecutionTimeSeconds -> accumulatedPastExexcutionTimeSeconds (sic);
  topologyAssignment {levels, slices} -> {levels, domains}.
- every other kind: unchanged but for apiVersion.

A round trip v1beta1 -> v1beta2 -> v1beta1 gives the object back for every field both versions have.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from kq.api.constants import KUEUE_API_VERSION, KUEUE_GROUP
from kq.api.convert import LEGACY_KINDS, ConversionError, convert_to_v1beta2
from kq.api.topology import topology_domains
from kq.api.workload import TopologyAssignment

__all__ = ["V1BETA1", "conversion_review", "convert_object", "convert_to_v1beta1"]

V1BETA1 = f"{KUEUE_GROUP}/v1beta1"
_PRIORITY_SOURCES = {"kueue.x-k8s.io": "kueue.x-k8s.io/workloadpriorityclass",
                     "scheduling.k8s.io": "scheduling.k8s.io/priorityclass"}


def _dict(parent: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = parent.get(key)
    return value if isinstance(value, dict) else None


def _cluster_queue(doc: dict[str, Any]) -> None:
    spec = _dict(doc, "spec")
    if spec is None:
        return
    if "cohortName" in spec:
        spec["cohort"] = spec.pop("cohortName")
    ff = _dict(spec, "flavorFungibility")
    if ff is not None:
        if ff.get("whenCanBorrow") == "MayStopSearch":
            ff["whenCanBorrow"] = "Borrow"
        if ff.get("whenCanPreempt") == "MayStopSearch":
            ff["whenCanPreempt"] = "Preempt"


def _local_queue(doc: dict[str, Any]) -> None:
    status = _dict(doc, "status")
    if status is not None and "flavorsUsage" in status:
        status["flavorUsage"] = status.pop("flavorsUsage")


def _multikueue_cluster(doc: dict[str, Any]) -> None:
    spec = _dict(doc, "spec")
    source = _dict(spec, "clusterSource") if spec is not None else None
    if spec is None or source is None:
        return
    del spec["clusterSource"]
    for key in ("kubeConfig", "clusterProfileRef"):
        if key in source:
            spec[key] = source[key]


def _workload(doc: dict[str, Any]) -> None:
    spec = _dict(doc, "spec")
    ref = _dict(spec, "priorityClassRef") if spec is not None else None
    if spec is not None and ref is not None:
        source = _PRIORITY_SOURCES.get(str(ref.get("group", "")))
        if source is None:
            raise ConversionError("spec.priorityClassRef.group", f"{ref.get('group')!r} has no v1beta1 form")
        del spec["priorityClassRef"]
        spec["priorityClassName"] = ref.get("name", "")
        spec["priorityClassSource"] = source
    status = _dict(doc, "status")
    if status is None:
        return
    if "accumulatedPastExecutionTimeSeconds" in status:
        status["accumulatedPastExexcutionTimeSeconds"] = status.pop("accumulatedPastExecutionTimeSeconds")
    admission = _dict(status, "admission")
    for i, psa in enumerate((admission or {}).get("podSetAssignments") or []):
        ta = psa.get("topologyAssignment") if isinstance(psa, dict) else None
        if isinstance(ta, dict) and "slices" in ta:
            try:
                typed = msgspec.convert(ta, TopologyAssignment)
            except msgspec.ValidationError as e:
                raise ConversionError(f"status.admission.podSetAssignments[{i}].topologyAssignment", str(e)) from None
            psa["topologyAssignment"] = {"levels": list(typed.levels), "domains": [
                {"values": list(d.values), "count": d.count} for d in topology_domains(typed)]}


_CONVERTERS = {
    "ClusterQueue": _cluster_queue,
    "LocalQueue": _local_queue,
    "MultiKueueCluster": _multikueue_cluster,
    "Workload": _workload,
}


def convert_to_v1beta1(doc: dict[str, Any]) -> dict[str, Any]:
    """A v1beta1 copy of a v1beta2 Kueue object (the input is left untouched)."""
    kind = doc.get("kind")
    if doc.get("apiVersion") != KUEUE_API_VERSION or not isinstance(kind, str) or kind not in LEGACY_KINDS[V1BETA1]:
        raise ConversionError("apiVersion", f"no conversion from {doc.get('apiVersion')}/{kind} to {V1BETA1}")
    out = copy.deepcopy(doc)
    out["apiVersion"] = V1BETA1
    convert = _CONVERTERS.get(kind)
    if convert is not None:
        convert(out)
    return out


def convert_object(doc: dict[str, Any], desired: str) -> dict[str, Any]:
    """Either direction, as a CRD conversion webhook is asked: to `desired` (v1beta1 or v1beta2)."""
    current = doc.get("apiVersion")
    if current == desired:
        return copy.deepcopy(doc)
    if desired == KUEUE_API_VERSION:
        return convert_to_v1beta2(doc)
    if desired == V1BETA1:
        return convert_to_v1beta1(doc)
    raise ConversionError("desiredAPIVersion", f"{desired!r} is not {V1BETA1} or {KUEUE_API_VERSION}")


REVIEW_API_VERSION = "apiextensions.k8s.io/v1"


def conversion_review(review: dict[str, Any]) -> dict[str, Any]:
    """A ConversionReview answered: every object converted to request.desiredAPIVersion, or a Failure
    naming the field (objects written as v1beta1 are checked as their v1beta2 form, as `kq apply` checks)."""
    from kq.api.load import InputError, load_object  # load imports convert; only the webhook needs both

    request = review.get("request")
    if not isinstance(request, dict):
        raise ConversionError("request", "a ConversionReview needs a request")
    desired = request.get("desiredAPIVersion")
    objects = request.get("objects") or []
    converted: list[dict[str, Any]] = []
    result: dict[str, Any] = {"status": "Success"}
    try:
        for obj in objects:
            if not isinstance(obj, dict):
                raise ConversionError("request.objects", "expected objects")
            out = convert_object(obj, str(desired))
            if desired == KUEUE_API_VERSION and obj.get("apiVersion") != desired:
                load_object(out, f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name', '')}")
            converted.append(out)
    except (ConversionError, InputError) as e:
        converted, result = [], {"status": "Failure", "message": str(e)}
    return {"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview",
            "response": {"uid": request.get("uid", ""), "convertedObjects": converted, "result": result}}
