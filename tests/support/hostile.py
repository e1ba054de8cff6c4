"""Hostile objects for property-based fuzzing (hypothesis): every kind kq reads, made wrong.

Each strategy starts from a valid object of its kind and applies one or more mutations at
random places: malformed quantities, huge or negative numbers, unknown fields, wrong types,
names with dots, upper case or unicode, references to missing objects, 1 MiB labels. The
fuzz tests feed them to `kq apply` (kq.api.load_documents) and straight into kubesim.
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from typing import Any

from hypothesis import strategies as st

# Generated cases per kind, reported at the end of the run (tests/conftest.py).
CASES: Counter[str] = Counter()

# KQ_FUZZ_EXAMPLES=2000 for a long run by hand; `make test` keeps the default.
EXAMPLES = int(os.environ.get("KQ_FUZZ_EXAMPLES", "60"))

V = "kueue.x-k8s.io/v1beta2"
QUEUE = "kueue.x-k8s.io/queue-name"
MIB = 1 << 20


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    return {"name": name, **({"namespace": namespace} if namespace else {})}


BASES: dict[str, dict[str, Any]] = {
    "ResourceFlavor": {"apiVersion": V, "kind": "ResourceFlavor", "metadata": _meta("rf"),
                       "spec": {"nodeLabels": {"pool": "a"}}},
    "ClusterQueue": {"apiVersion": V, "kind": "ClusterQueue", "metadata": _meta("cq"), "spec": {
        "cohortName": "co", "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "rf", "resources": [
            {"name": "cpu", "nominalQuota": "4", "borrowingLimit": "2"},
            {"name": "memory", "nominalQuota": "8Gi"}]}]}],
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}}},
    "LocalQueue": {"apiVersion": V, "kind": "LocalQueue", "metadata": _meta("lq", "default"),
                   "spec": {"clusterQueue": "cq"}},
    "Cohort": {"apiVersion": V, "kind": "Cohort", "metadata": _meta("co"), "spec": {
        "parentName": "root", "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": "2"}]}]}]}},
    "WorkloadPriorityClass": {"apiVersion": V, "kind": "WorkloadPriorityClass", "metadata": _meta("high"),
                              "value": 1000, "description": "high"},
    "AdmissionCheck": {"apiVersion": V, "kind": "AdmissionCheck", "metadata": _meta("ac"),
                       "spec": {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": {
                           "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mk"}}},
    "MultiKueueConfig": {"apiVersion": V, "kind": "MultiKueueConfig", "metadata": _meta("mk"),
                         "spec": {"clusters": ["worker-1"]}},
    "MultiKueueCluster": {"apiVersion": V, "kind": "MultiKueueCluster", "metadata": _meta("worker-1"),
                          "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                                    "location": "worker-1-kubeconfig"}}}},
    "Topology": {"apiVersion": V, "kind": "Topology", "metadata": _meta("topo"),
                 "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}},
    "Workload": {"apiVersion": V, "kind": "Workload", "metadata": _meta("wl", "default"), "spec": {
        "queueName": "lq", "priority": 0, "podSets": [{"name": "main", "count": 2, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}]}},
    "Job": {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {**_meta("job", "default"), "labels": {QUEUE: "lq"}},
            "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m"}}}]}}}},
}
KINDS = tuple(BASES)

BAD_QUANTITIES = ("1.5.3", "12Qi", "-", "", " 4", "4 ", "1e999999", "9" * 40 + "Ei", "-4", "0x10", "NaN", "inf",
                  "1/2", "\uff11", "4cpu", "1e", ".", "+-1")
HUGE_NUMBERS = (2**63, 2**64 + 1, -(2**63) - 1, 10**30, -1, 1e308, float("inf"), 0.5, True)
BAD_NAMES = ("a.b", "A", "ünïcødé", "a_b", "-a", "a-", "", "a" * 254, "a/b", "a b", "x" * 64, "..", "名前")
JUNK: tuple[Any, ...] = (None, [], {}, "x", 0, -1, 2**70, [1, 2], {"a": 1}, True, 1.5, "∞" * 3)


def _paths(obj: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in the object (dict keys and list indices), the object itself first."""
    out = [at]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*at, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*at, i))
    return out


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    _get(obj, path[:-1])[path[-1]] = value


def _junk(draw: st.DrawFn) -> Any:
    return copy.deepcopy(draw(st.sampled_from(JUNK)))  # never the same {} or [] in two places


BODY_MUTATIONS = ("quantity", "number", "unknown", "junk", "drop", "reference")
META_MUTATIONS = ("name", "label", "annotation")


@st.composite
def _mutate(draw: st.DrawFn, base: dict[str, Any], body_only: bool) -> dict[str, Any]:
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(obj) if not body_only or (p and p[0] not in ("apiVersion", "kind", "metadata"))]
        if body_only:
            paths.insert(0, ())
        leaves = [p for p in paths if p and not isinstance(_get(obj, p), (dict, list))]
        maps = [p for p in paths if isinstance(_get(obj, p), dict)]
        how = draw(st.sampled_from(BODY_MUTATIONS if body_only else BODY_MUTATIONS + META_MUTATIONS))
        if how == "quantity" and leaves:
            _set(obj, draw(st.sampled_from(leaves)), draw(st.sampled_from(BAD_QUANTITIES)))
        elif how == "number" and leaves:
            _set(obj, draw(st.sampled_from(leaves)), draw(st.sampled_from(HUGE_NUMBERS)))
        elif how == "unknown":
            where = draw(st.sampled_from(maps))
            _get(obj, where)[draw(st.sampled_from(("sepc", "extra", "nominalQuotaa", "ü")))] = _junk(draw)
        elif how == "junk" and len(paths) > 1:
            _set(obj, draw(st.sampled_from(paths[1:])), _junk(draw))
        elif how == "name":
            obj.setdefault("metadata", {})
            if isinstance(obj["metadata"], dict):
                obj["metadata"]["name"] = draw(st.sampled_from(BAD_NAMES) | st.text(min_size=1, max_size=20))
        elif how in ("label", "annotation"):
            if isinstance(obj.get("metadata"), dict):
                field = "labels" if how == "label" else "annotations"
                big = draw(st.sampled_from(("x" * MIB, "ü" * 70, "ok")))
                key = draw(st.sampled_from(("a", "kueue.x-k8s.io/queue-name", "Bad Key", "x" * 300, "a/b/c")))
                current = obj["metadata"].get(field)
                obj["metadata"][field] = {**(current if isinstance(current, dict) else {}), key: big}
        elif how == "drop" and len(paths) > 1:
            where = draw(st.sampled_from(paths[1:]))
            parent = _get(obj, where[:-1])
            if isinstance(parent, dict):
                del parent[where[-1]]
            else:
                parent.pop(where[-1])
        elif how == "reference":
            refs = [p for p in leaves if p[-1] in ("clusterQueue", "cohortName", "parentName", "queueName", "name",
                                                   "priorityClassName", QUEUE)]
            if refs:
                _set(obj, draw(st.sampled_from(refs)), draw(st.sampled_from(("missing", "nope.nope", "cq"))))
    return obj


def hostile(kind: str, *, body_only: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """body_only: leave apiVersion, kind and metadata valid (what an API server lets through)."""
    return _mutate(BASES[kind], body_only)


def cohort_cycle(names: tuple[str, ...]) -> list[dict[str, Any]]:
    """Cohorts whose parents form a cycle: a -> b -> ... -> a."""
    return [{"apiVersion": V, "kind": "Cohort", "metadata": _meta(n),
             "spec": {"parentName": names[(i + 1) % len(names)]}} for i, n in enumerate(names)]
