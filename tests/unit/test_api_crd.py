"""The CRDs in deploy/crds/kueue.yaml come from kq's Structs, are current, structural, and accept real objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
import yaml

from kq.api import KINDS, encode_object, load_documents
from kq.api.crd import QUANTITY_PATTERN, all_crds, render_crds

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "deploy" / "crds" / "kueue.yaml"

EXAMPLES = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {node-type: spot}
  nodeTaints: [{key: spot, value: "true", effect: NoSchedule}]
  tolerations: [{key: spot, operator: Exists, effect: NoSchedule}]
  topologyName: default
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {matchLabels: {team: a}}
  cohortName: team
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: spot
      resources:
      - {name: cpu, nominalQuota: 9, borrowingLimit: "1", lendingLimit: 500m}
      - {name: memory, nominalQuota: 36Gi}
  preemption: {reclaimWithinCohort: Any, borrowWithinCohort: {policy: LowerPriority}, withinClusterQueue: LowerPriority}
  fairSharing: {weight: "2"}
  admissionChecksStrategy: {admissionChecks: [{name: mk, onFlavors: [spot]}]}
status:
  conditions: [{type: Active, status: "True", reason: Ready, message: ok, lastTransitionTime: "2025-05-01T10:00:00Z"}]
  flavorsUsage: [{name: spot, resources: [{name: cpu, total: "3", borrowed: "0"}]}]
  pendingWorkloads: 1
  admittedWorkloads: 2
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
status: {pendingWorkloads: 0, flavorsUsage: [{name: spot, resources: [{name: cpu, total: 1500m}]}]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: team}
spec:
  parentName: org
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: spot, resources: [{name: cpu, nominalQuota: "4"}]}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: default}
spec: {levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: mk}
spec: {controllerName: kueue.x-k8s.io/multikueue, parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: mkc}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: mkc}
spec: {clusters: [worker-1, worker-2]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: worker-1}
spec: {clusterSource: {kubeConfig: {location: worker-1-kubeconfig}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
description: high priority
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: w, namespace: ns}
spec:
  queueName: lq
  priority: 1000
  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}
  podSets:
  - name: main
    count: 2
    minCount: 1
    topologyRequest: {preferred: rack}
    template:
      spec:
        restartPolicy: Never
        containers:
        - {name: c, image: busybox, command: [sleep, "1"], resources: {requests: {cpu: 1, memory: 1Gi}},
           securityContext: {runAsNonRoot: true}}
status:
  conditions: [{type: QuotaReserved, status: "True", reason: QuotaReserved, message: ok, lastTransitionTime: "2025-05-01T10:00:00Z"}]
  admission:
    clusterQueue: cq
    podSetAssignments:
    - name: main
      count: 2
      flavors: {cpu: spot}
      resourceUsage: {cpu: "2"}
      topologyAssignment:
        levels: [rack]
        slices: [{domainCount: 1, valuesPerLevel: [{universal: rack-1}], podCounts: {universal: 2}}]
  requeueState: {count: 1}
  schedulingStats: {evictions: [{reason: Preempted, underlyingCause: InClusterQueue, count: 1}]}
"""


def _jsonschema(node: Any) -> Any:
    """OpenAPI v3 `nullable` as JSON Schema understands it."""
    if isinstance(node, dict):
        out = {k: _jsonschema(v) for k, v in node.items() if k != "nullable"}
        if node.get("nullable") and "type" in node:
            out["type"] = [node["type"], "null"]
        return out
    if isinstance(node, list):
        return [_jsonschema(v) for v in node]
    return node


def _validators() -> dict[str, jsonschema.Draft7Validator]:
    out = {}
    for crd in all_crds():
        schema = _jsonschema(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
        jsonschema.Draft7Validator.check_schema(schema)
        out[crd["spec"]["names"]["kind"]] = jsonschema.Draft7Validator(schema)
    return out


VALIDATORS = _validators()
LOADED = load_documents(EXAMPLES, "examples.yaml")


def test_committed_crds_are_current():
    assert COMMITTED.read_text() == render_crds(), "run: python -m kq.api.crd --write"


def test_every_kueue_kind_has_a_crd():
    assert set(VALIDATORS) == {o.kind_info.kind for o in LOADED}
    for crd in all_crds():
        spec = crd["spec"]
        assert crd["metadata"]["name"] == f"{spec['names']['plural']}.kueue.x-k8s.io"
        version, old = spec["versions"]
        assert version["name"] == "v1beta2" and version["served"] and version["storage"]
        assert old["name"] == "v1beta1" and old["served"] and not old["storage"]  # as Kueue serves them
        assert old.get("subresources") == version.get("subresources")
        hook = spec["conversion"]["webhook"]
        assert spec["conversion"]["strategy"] == "Webhook" and hook["conversionReviewVersions"] == ["v1"]
        assert hook["clientConfig"]["service"]["path"] == "/convert"
        assert crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "kq-system/kq-conversion-webhook"
        kind = spec["names"]["kind"]
        has_status = kind not in ("ResourceFlavor", "Topology", "MultiKueueConfig", "WorkloadPriorityClass")
        assert ("subresources" in version) is has_status, kind
        assert spec["scope"] == ("Namespaced" if kind in ("LocalQueue", "Workload") else "Cluster")


def _schema_problems(node: dict[str, Any], path: str) -> list[str]:
    """What apiextensions.k8s.io/v1 would refuse as a non-structural schema."""
    problems = [f"{path}: {k}" for k in ("$ref", "$defs", "title", "oneOf", "allOf") if k in node]
    if "anyOf" in node:  # only Kubernetes' int-or-string quantity
        if not (node.get("x-kubernetes-int-or-string") and node.get("pattern") == QUANTITY_PATTERN):
            problems.append(f"{path}: anyOf that is not a quantity")
    elif "type" not in node:
        problems.append(f"{path}: no type")
    if node.get("additionalProperties") is False or ("additionalProperties" in node and "properties" in node):
        problems.append(f"{path}: additionalProperties")
    for name, sub in node.get("properties", {}).items():
        problems += _schema_problems(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        problems += _schema_problems(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        problems += _schema_problems(node["additionalProperties"], f"{path}{{}}")
    return problems


@pytest.mark.parametrize("crd", all_crds(), ids=lambda c: c["spec"]["names"]["kind"])
def test_schemas_are_structural(crd):
    for version in crd["spec"]["versions"]:
        assert _schema_problems(version["schema"]["openAPIV3Schema"], version["name"]) == []


@pytest.mark.parametrize("obj", LOADED, ids=lambda o: o.kind_info.kind)
def test_examples_validate(obj):
    validator = VALIDATORS[obj.kind_info.kind]
    for doc in (obj.body, json.loads(encode_object(obj.obj))):
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(doc)]
        assert not errors, errors


REJECTED: list[tuple[str, list[str | int], Any]] = [
    ("ClusterQueue", ["spec", "queueingStrategy"], "Strict"),
    ("ClusterQueue", ["spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"], "abc"),
    ("Workload", ["spec", "podSets", 0, "count"], -1),
    ("Workload", ["spec", "podSets", 0, "template", "spec", "containers", 0, "resources", "requests", "cpu"], "1ii"),
    ("Topology", ["spec", "levels"], []),
    ("MultiKueueConfig", ["spec", "clusters"], []),
]


@pytest.mark.parametrize(("kind", "path", "value"), REJECTED, ids=[f"{k}-{p[-1]}" for k, p, _ in REJECTED])
def test_schemas_reject_bad_values(kind, path, value):
    doc = json.loads(json.dumps(next(o.body for o in LOADED if o.kind_info.kind == kind)))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert list(VALIDATORS[kind].iter_errors(doc))


def test_pod_templates_keep_unmodelled_fields():
    schema = next(c for c in all_crds() if c["spec"]["names"]["kind"] == "Workload")
    props = schema["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    container = props["spec"]["properties"]["podSets"]["items"]["properties"]["template"]["properties"]["spec"][
        "properties"
    ]["containers"]["items"]
    assert container["x-kubernetes-preserve-unknown-fields"] is True
    docs = [d for d in yaml.safe_load_all(COMMITTED.read_text()) if d]
    assert [d["kind"] for d in docs] == ["CustomResourceDefinition"] * len(all_crds())


@pytest.mark.parametrize("crd", all_crds(), ids=lambda c: c["spec"]["names"]["kind"])
def test_printer_columns_name_fields_the_schema_has(crd):
    """`kubectl get cq` reads well: every Kueue kind has columns, and each column's path is a real field
    of the type the column says (a typo would print an empty column forever)."""
    import re

    version, old = crd["spec"]["versions"]
    columns = version.get("additionalPrinterColumns")
    assert columns, "no printer columns"
    assert [c["name"] for c in old["additionalPrinterColumns"]] == [c["name"] for c in columns]  # v1beta1 too
    schema = version["schema"]["openAPIV3Schema"]
    for col in columns:
        if col["name"] == "Age":  # metadata is the API server's, not in the schema
            assert col["jsonPath"] == ".metadata.creationTimestamp"
            continue
        node = schema
        for name, filt in re.findall(r"\.([A-Za-z]+)(\[\?\(.*?\)\])?", col["jsonPath"]):
            assert name in node.get("properties", {}), f"{col['jsonPath']}: no {name!r}"
            node = node["properties"][name]
            if filt:  # a filter picks list items: descend into them
                assert node["type"] == "array", col
                node = node["items"]
        want = {"string": {"string"}, "integer": {"integer"}}[col["type"]]
        assert node.get("type") in want, (col, node)


def _undescribed(node: dict[str, Any], path: str, depth: int) -> list[str]:
    out = []
    for name, sub in node.get("properties", {}).items():
        where = f"{path}.{name}"
        if not sub.get("description"):
            out.append(where)
        if depth < 3:
            out += _undescribed(sub.get("items", sub), where, depth + 1)
    return out


@pytest.mark.parametrize("crd", all_crds(), ids=lambda c: c["spec"]["names"]["kind"])
def test_kubectl_explain_describes_every_field(crd):
    """The kind, and every field of spec, status and the top level three levels down, say what they are."""
    from kq.api.crd_docs import FIELD_DOCS

    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema.get("description"), "the kind itself"
    top = {k: v for k, v in schema["properties"].items() if k not in ("apiVersion", "kind", "metadata")}
    assert _undescribed({"properties": top}, crd["spec"]["names"]["kind"], 0) == []
    known = {(n, p) for i in KINDS for n, d in msgspec.json.schema_components([i.type])[1].items()
             for p in d.get("properties", {})}
    assert set(FIELD_DOCS) <= known, set(FIELD_DOCS) - known  # no entry for a field that does not exist
