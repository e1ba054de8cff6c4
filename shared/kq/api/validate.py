"""Semantic checks on typed objects: what Kueue's webhooks and CRD rules reject, with the field path.

Pure functions returning FieldErrors; quantities themselves (syntax, sign) are
checked earlier by kq.api.fields while the input is still a mapping.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kq.api import core, kueue
from kq.api.fields import FieldError
from kq.api.meta import LabelSelector, ObjectMeta, SelectorError, selector_matches
from kq.quantity import parse_quantity

__all__ = ["validate_object", "validate_metadata"]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NANO = parse_quantity("1n")
_HOSTNAME = "kubernetes.io/hostname"


def validate_metadata(meta: ObjectMeta, namespaced: bool, kind: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if not meta.name and not meta.generate_name:
        errors.append(FieldError("metadata.name", "required (or metadata.generateName)"))
    if meta.name and (len(meta.name) > 253 or not _DNS_SUBDOMAIN.match(meta.name)):
        errors.append(
            FieldError("metadata.name", f'"{meta.name}" is not a valid name (lower-case RFC 1123 subdomain)')
        )
    if meta.namespace:
        if not namespaced:
            errors.append(FieldError("metadata.namespace", f"{kind} is cluster-scoped and takes no namespace"))
        elif len(meta.namespace) > 63 or not _DNS_LABEL.match(meta.namespace):
            errors.append(FieldError("metadata.namespace", f'"{meta.namespace}" is not a valid namespace name'))
    return errors + _labels_and_annotations(meta)


_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_ANNOTATIONS_MAX_BYTES = 256 * 1024  # the API server's limit on all annotations of an object together


def _key_error(key: str) -> str | None:
    prefix, _, local = key.rpartition("/")
    if not local or len(local) > 63 or not _QUALIFIED_NAME.match(local):
        return "name part must be 1-63 alphanumeric characters, '-', '_' or '.', starting and ending alphanumeric"
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return "prefix must be a lower-case DNS subdomain"
    return None


def _labels_and_annotations(meta: ObjectMeta) -> list[FieldError]:
    """What the API server refuses in metadata before any controller sees it (label rules, sizes)."""
    errors: list[FieldError] = []
    for field, entries in (("labels", meta.labels), ("annotations", meta.annotations)):
        for key, value in entries.items():
            if why := _key_error(key):
                errors.append(FieldError(f"metadata.{field}[{key[:80]}]", f"invalid key: {why}"))
            if field == "labels" and (len(value) > 63 or (value and not _QUALIFIED_NAME.match(value))):
                errors.append(FieldError(f"metadata.labels[{key[:80]}]",
                                         f"invalid value ({len(value)} characters): at most 63 alphanumeric "
                                         "characters, '-', '_' or '.', starting and ending alphanumeric"))
    size = sum(len(k.encode()) + len(v.encode()) for k, v in meta.annotations.items())
    if size > _ANNOTATIONS_MAX_BYTES:
        errors.append(FieldError("metadata.annotations", f"too long: {size} bytes, at most {_ANNOTATIONS_MAX_BYTES}"))
    return errors


def _selector(sel: LabelSelector | None, path: str) -> list[FieldError]:
    try:
        selector_matches(sel, {})
    except SelectorError as e:
        return [FieldError(path, str(e))]
    return []


def _resource_groups(
    groups: tuple[kueue.ResourceGroup, ...], has_parent: bool, is_cohort: bool, path: str
) -> list[FieldError]:
    errors: list[FieldError] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    parent_field = "parentName" if is_cohort else "cohortName"
    for i, rg in enumerate(groups):
        gpath = f"{path}[{i}]"
        for j, res in enumerate(rg.covered_resources):
            if res in seen_resources:
                errors.append(FieldError(f"{gpath}.coveredResources[{j}]", f'duplicate resource "{res}"'))
            seen_resources.add(res)
        for j, fq in enumerate(rg.flavors):
            fpath = f"{gpath}.flavors[{j}]"
            if fq.name in seen_flavors:
                errors.append(FieldError(f"{fpath}.name", f'duplicate flavor "{fq.name}"'))
            seen_flavors.add(fq.name)
            names = [r.name for r in fq.resources]
            if len(names) != len(rg.covered_resources):
                errors.append(
                    FieldError(
                        f"{fpath}.resources",
                        f"must list the coveredResources {list(rg.covered_resources)} in order, got {names}",
                    )
                )
            for k, rq in enumerate(fq.resources):
                rpath = f"{fpath}.resources[{k}]"
                if k < len(rg.covered_resources) and rq.name != (want := rg.covered_resources[k]):
                    errors.append(FieldError(f"{rpath}.name", f'must be "{want}" to match coveredResources[{k}]'))
                for field, limit in (("borrowingLimit", rq.borrowing_limit), ("lendingLimit", rq.lending_limit)):
                    if limit is not None and not has_parent:
                        errors.append(FieldError(f"{rpath}.{field}", f"must not be set without spec.{parent_field}"))
                if (
                    not is_cohort
                    and rq.lending_limit is not None
                    and _safe(rq.lending_limit) > _safe(rq.nominal_quota)
                ):
                    errors.append(FieldError(f"{rpath}.lendingLimit", "must be less than or equal to nominalQuota"))
    return errors


def _safe(q: Any) -> Any:
    try:
        return parse_quantity(q)
    except ValueError:  # already reported by the quantity walk
        return 0


def _fair_sharing(fs: kueue.FairSharing | None, path: str) -> list[FieldError]:
    if fs is None:
        return []
    w = _safe(fs.weight)
    if 0 < w <= _NANO:
        return [FieldError(f"{path}.weight", "when not 0, weight must be greater than 1n")]
    return []


def _cluster_queue(cq: kueue.ClusterQueue) -> list[FieldError]:
    spec = cq.spec
    errors = _resource_groups(spec.resource_groups, bool(spec.cohort_name), False, "spec.resourceGroups")
    errors += _selector(spec.namespace_selector, "spec.namespaceSelector")
    errors += _fair_sharing(spec.fair_sharing, "spec.fairSharing")
    if spec.admission_scope is not None and spec.admission_scope.admission_mode == "UsageBasedAdmissionFairSharing":
        errors.append(FieldError("spec.admissionScope.admissionMode", _NO_AFS))
    if spec.concurrent_admission_policy is not None:
        # Kueue ignores it unless its alpha ConcurrentAdmission gate is on; kq has no such feature,
        # so a policy the user means to take effect is refused rather than ignored.
        errors.append(FieldError("spec.concurrentAdmissionPolicy",
                                 "not supported: kq does not implement Kueue's ConcurrentAdmission (alpha)"))
    p = spec.preemption
    if p.reclaim_within_cohort == "Never" and p.borrow_within_cohort.policy != "Never":
        errors.append(
            FieldError("spec.preemption.borrowWithinCohort.policy", "must be Never when reclaimWithinCohort is Never")
        )
    ff = spec.flavor_fungibility
    if ff.preference is not None and (ff.when_can_borrow != "TryNextFlavor" or ff.when_can_preempt != "TryNextFlavor"):
        errors.append(
            FieldError(
                "spec.flavorFungibility.preference",
                "can only be set when whenCanBorrow and whenCanPreempt are both TryNextFlavor",
            )
        )
    if spec.admission_checks_strategy is not None:
        flavors = {f.name for rg in spec.resource_groups for f in rg.flavors}
        for i, rule in enumerate(spec.admission_checks_strategy.admission_checks):
            for j, flavor in enumerate(rule.on_flavors):
                if flavor not in flavors:
                    errors.append(
                        FieldError(
                            f"spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors[{j}]",
                            f'"{flavor}" is not a flavor of this ClusterQueue',
                        )
                    )
    return errors


def _cohort(c: kueue.Cohort) -> list[FieldError]:
    errors = _resource_groups(c.spec.resource_groups, bool(c.spec.parent_name), True, "spec.resourceGroups")
    if c.spec.parent_name and c.spec.parent_name == c.metadata.name:
        errors.append(FieldError("spec.parentName", "a Cohort cannot be its own parent"))
    return errors + _fair_sharing(c.spec.fair_sharing, "spec.fairSharing")


_NO_AFS = "not supported: kq does not implement Kueue's admission fair sharing"


def _local_queue(lq: kueue.LocalQueue) -> list[FieldError]:
    # A LocalQueue's weight is read only by admission fair sharing: refused rather than ignored.
    return [FieldError("spec.fairSharing", _NO_AFS)] if lq.spec.fair_sharing is not None else []


def _topology(t: kueue.Topology) -> list[FieldError]:
    errors: list[FieldError] = []
    labels = [lv.node_label for lv in t.spec.levels]
    for i, label in enumerate(labels):
        if label in labels[:i]:
            errors.append(FieldError(f"spec.levels[{i}].nodeLabel", f'duplicate level "{label}"'))
        if label == _HOSTNAME and i != len(labels) - 1:
            errors.append(FieldError(f"spec.levels[{i}].nodeLabel", f"{_HOSTNAME} can only be the lowest level"))
    return errors


def _topology_request(tr: kueue.PodSetTopologyRequest | None, path: str) -> list[FieldError]:
    """Kueue's CRD rule (one placement mode) and webhook (validateTASSliceSize)."""
    if tr is None:
        return []
    errors: list[FieldError] = []
    modes = [m for m, v in (("required", tr.required), ("preferred", tr.preferred),
                            ("unconstrained", tr.unconstrained or None)) if v is not None]
    if len(modes) > 1:
        errors.append(FieldError(path, f"at most one of required, preferred, unconstrained may be set, "
                                       f"not {' and '.join(modes)}"))
    if tr.pod_set_slice_required_topology is not None and tr.pod_set_slice_size is None:
        errors.append(
            FieldError(f"{path}.podSetSliceSize", "must be set when podSetSliceRequiredTopology is specified")
        )
    if tr.pod_set_slice_required_topology is None and tr.pod_set_slice_size is not None:
        errors.append(FieldError(f"{path}.podSetSliceSize",
                                 "may not be set when podSetSliceRequiredTopology is not specified"))
    return errors


def _pod_template_resources(spec: core.PodSpec, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for field, containers in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for i, c in enumerate(containers):
            for kind, rl in (("requests", c.resources.requests), ("limits", c.resources.limits)):
                if "pods" in rl:
                    errors.append(
                        FieldError(f"{path}.{field}[{i}].resources.{kind}[pods]", "the key is reserved for kueue")
                    )
    return errors


def _workload(wl: kueue.Workload) -> list[FieldError]:
    errors: list[FieldError] = []
    spec = wl.spec
    if not spec.pod_sets:
        errors.append(FieldError("spec.podSets", "must have at least one podSet"))
    names: set[str] = set()
    with_min = 0
    for i, ps in enumerate(spec.pod_sets):
        path = f"spec.podSets[{i}]"
        if ps.name in names:
            errors.append(FieldError(f"{path}.name", f'duplicate podSet "{ps.name}"'))
        names.add(ps.name)
        if ps.min_count is not None:
            with_min += 1
            if ps.min_count > ps.count:
                errors.append(FieldError(f"{path}.minCount", f"must be at most count ({ps.count})"))
        errors += _pod_template_resources(ps.template.spec, f"{path}.template.spec")
        errors += _topology_request(ps.topology_request, f"{path}.topologyRequest")
    if with_min > 1:
        errors.append(FieldError("spec.podSets", f"at most one podSet can use minCount, {with_min} do"))
    if spec.priority_class_ref is not None:
        ref = spec.priority_class_ref
        expected = "PriorityClass" if ref.group == "scheduling.k8s.io" else "WorkloadPriorityClass"
        if ref.kind != expected:
            errors.append(FieldError("spec.priorityClassRef.kind", f"must be {expected} for group {ref.group}"))
        if spec.priority is None:
            errors.append(FieldError("spec.priority", "must be set when priorityClassRef is set"))
    st = wl.status
    if st.cluster_name is not None and st.nominated_cluster_names:
        errors.append(FieldError("status.clusterName", "cannot be set together with nominatedClusterNames"))
    return errors


def _job(job: core.Job) -> list[FieldError]:
    errors: list[FieldError] = []
    for field, value in (("parallelism", job.spec.parallelism), ("completions", job.spec.completions)):
        if value is not None and value < 0:
            errors.append(FieldError(f"spec.{field}", "must be non-negative"))
    return errors


def _jobset(js: core.JobSet) -> list[FieldError]:
    errors: list[FieldError] = []
    names: set[str] = set()
    for i, rj in enumerate(js.spec.replicated_jobs):
        if rj.name in names:
            errors.append(FieldError(f"spec.replicatedJobs[{i}].name", f'duplicate replicatedJob "{rj.name}"'))
        names.add(rj.name)
        if rj.replicas < 0:
            errors.append(FieldError(f"spec.replicatedJobs[{i}].replicas", "must be non-negative"))
    return errors


_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
_GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"


def _pod(pod: core.Pod) -> list[FieldError]:
    """Kueue's pod webhook: a pod group member states the group's size as a positive integer."""
    if not pod.metadata.labels.get(_GROUP_LABEL):
        return []
    path = f"metadata.annotations[{_GROUP_TOTAL}]"
    raw = pod.metadata.annotations.get(_GROUP_TOTAL)
    if raw is None:
        return [FieldError(path, f"required on a pod labelled {_GROUP_LABEL}")]
    if not raw.isdigit() or int(raw) < 1:
        return [FieldError(path, f"must be a positive integer, got {raw!r}")]
    return []


_RULES: dict[type, Callable[[Any], list[FieldError]]] = {
    core.Pod: _pod,
    kueue.ClusterQueue: _cluster_queue,
    kueue.Cohort: _cohort,
    kueue.LocalQueue: _local_queue,
    kueue.Topology: _topology,
    kueue.Workload: _workload,
    core.Job: _job,
    core.JobSet: _jobset,
}


def validate_object(obj: Any) -> list[FieldError]:
    """Kind-specific rules (metadata is checked by validate_metadata)."""
    rule = _RULES.get(type(obj))
    return rule(obj) if rule is not None else []
