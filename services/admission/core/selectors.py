"""Label selectors, taints and node affinity, evaluated purely (Kubernetes semantics)."""

from __future__ import annotations

from collections.abc import Mapping

from .model import LabelSelector, NodeSelectorTerm, PodSet, ResourceFlavor, Taint, Toleration


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector: None matches nothing, an empty selector matches everything."""
    if selector is None:
        return False
    for k, v in selector.match_labels.items():
        if labels.get(k) != v:
            return False
    for req in selector.match_expressions:
        present = req.key in labels
        if req.operator == "In":
            if not present or labels[req.key] not in req.values:
                return False
        elif req.operator == "NotIn":
            if present and labels[req.key] in req.values:
                return False
        elif req.operator == "Exists":
            if not present:
                return False
        elif not (req.operator == "DoesNotExist" and not present):
            return False
    return True


def _tolerates(tol: Toleration, taint: Taint) -> bool:
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if tol.operator == "Exists":
        return True
    return tol.value == taint.value  # Equal, the default (core/v1 Toleration.ToleratesTaint)


def taint_string(t: Taint) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def untolerated_taint(flavor: ResourceFlavor, pod_set: PodSet) -> Taint | None:
    """The first NoSchedule/NoExecute taint of the flavor nothing tolerates (pod's or flavor's)."""
    if not flavor.node_taints:
        return None
    tolerations = pod_set.tolerations + flavor.tolerations
    for taint in flavor.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _requirement_matches(op: str, key: str, values: tuple[str, ...], labels: Mapping[str, str]) -> bool:
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def flavor_matches_affinity(flavor: ResourceFlavor, pod_set: PodSet) -> bool:
    """Node selector and required node affinity of the pod set, restricted to the flavor's label keys.

    Keys the flavor does not define are ignored (another flavor or the node decides them); a term
    left empty by that filtering matches any flavor, as in Kueue's flavorassigner.flavorSelector.
    """
    if not pod_set.node_selector and not pod_set.required_affinity:
        return True
    labels = flavor.node_labels
    keys = labels.keys()
    for k, v in pod_set.node_selector.items():
        if k in keys and labels[k] != v:
            return False
    terms: list[NodeSelectorTerm] = []
    for term in pod_set.required_affinity:
        exprs = tuple(e for e in term.match_expressions if e.key in keys)
        if not exprs:
            return True
        terms.append(NodeSelectorTerm(match_expressions=exprs))
    if not terms:
        return True
    return any(
        all(_requirement_matches(e.operator, e.key, e.values, labels) for e in t.match_expressions) for t in terms
    )
