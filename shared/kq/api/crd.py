"""CustomResourceDefinitions for the Kueue kinds, generated from kq's own Structs.

msgspec's JSON Schema of each Struct is made structural (what apiextensions.k8s.io/v1
requires): $refs inlined, Optional[...] unwrapped, quantities in Kubernetes'
int-or-string form, enums typed, lenient core types (pod templates) marked
x-kubernetes-preserve-unknown-fields so the API server keeps what kq does not model.

    python -m kq.api.crd            # print every CRD as one YAML stream
    python -m kq.api.crd --write    # and write it to deploy/crds/kueue.yaml
"""

from __future__ import annotations

from typing import Any

import msgspec
import yaml

from kq.api.constants import KUEUE_GROUP
from kq.api.convert import LEGACY_KINDS
from kq.api.crd_docs import FIELD_DOCS, TYPE_DOCS
from kq.api.meta import QUANTITY_MARK
from kq.api.registry import KINDS, KindInfo

__all__ = ["PRINTER_COLUMNS", "QUANTITY_PATTERN", "openapi_schema", "crd_for", "all_crds", "render_crds"]

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_ZERO_DEFAULTS: tuple[Any, ...] = (None, "", 0, False, {}, [])


def _column(name: str, type_: str, path: str, description: str, priority: int = 0) -> dict[str, Any]:
    col: dict[str, Any] = {"name": name, "type": type_, "jsonPath": path, "description": description}
    if priority:
        col["priority"] = priority  # shown by `kubectl get -o wide` only
    return col


_AGE = _column("Age", "date", ".metadata.creationTimestamp", "Time this object was created")
# What `kubectl get` prints for each Kueue kind: Kueue's own printer columns.
PRINTER_COLUMNS: dict[str, tuple[dict[str, Any], ...]] = {
    "ResourceFlavor": (_AGE,),
    "ClusterQueue": (
        _column("Cohort", "string", ".spec.cohortName", "The cohort this ClusterQueue belongs to"),
        _column("Strategy", "string", ".spec.queueingStrategy", "The queueing strategy used to prioritize workloads",
                priority=1),
        _column("Pending Workloads", "integer", ".status.pendingWorkloads", "Number of pending workloads"),
        _column("Admitted Workloads", "integer", ".status.admittedWorkloads", "Number of admitted workloads that "
                "haven't finished yet", priority=1),
    ),
    "LocalQueue": (
        _column("ClusterQueue", "string", ".spec.clusterQueue", "Backing ClusterQueue"),
        _column("Pending Workloads", "integer", ".status.pendingWorkloads", "Number of pending workloads"),
        _column("Admitted Workloads", "integer", ".status.admittedWorkloads", "Number of admitted workloads that "
                "haven't finished yet"),
    ),
    "Cohort": (_column("Parent", "string", ".spec.parentName", "The parent cohort"), _AGE),
    "Topology": (_AGE,),
    "AdmissionCheck": (_column("Controller", "string", ".spec.controllerName", "The controller of this check"),
                       _AGE),
    "MultiKueueConfig": (_AGE,),
    "MultiKueueCluster": (
        _column("Connected", "string", ".status.conditions[?(@.type==\"Active\")].status",
                "Whether the worker cluster is reachable"),
        _AGE,
    ),
    "WorkloadPriorityClass": (_column("Value", "integer", ".value", "The priority"), _AGE),
    "Workload": (
        _column("Queue", "string", ".spec.queueName", "Name of the queue this workload was submitted to"),
        _column("Reserved in", "string", ".status.admission.clusterQueue",
                "Name of the ClusterQueue where the workload is reserving quota"),
        _column("Admitted", "string", ".status.conditions[?(@.type==\"Admitted\")].status",
                "Admission status"),
        _column("Finished", "string", ".status.conditions[?(@.type==\"Finished\")].status",
                "Workload finished"),
        _AGE,
    ),
}


def _quantity(description: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    if description:
        out["description"] = description
    out["pattern"] = QUANTITY_PATTERN
    out["x-kubernetes-int-or-string"] = True
    return out


class _Structural:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = {**self.defs[node["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}}
        return node

    def convert(self, node: dict[str, Any]) -> dict[str, Any]:
        node = self.resolve(node)
        if node.get(QUANTITY_MARK):
            return self._default(_quantity(node.get("description")), node)
        if "anyOf" in node:
            alts = [a for a in node["anyOf"] if a != {"type": "null"}]
            if len(alts) != 1:
                raise ValueError(f"cannot make a structural schema of anyOf {node['anyOf']}")
            inner = self.convert(alts[0])
            extra = {k: v for k, v in node.items() if k not in ("anyOf", "default", "title")}
            merged = {**inner, **extra}
            if len(alts) != len(node["anyOf"]):
                merged["nullable"] = True
            return self._default(merged, node)
        out: dict[str, Any] = {}
        if "description" in node:
            out["description"] = node["description"]
        elif node.get("title") in TYPE_DOCS:
            out["description"] = TYPE_DOCS[node["title"]]
        if "enum" in node:
            values = node["enum"]
            out["type"] = "string" if all(isinstance(v, str) for v in values) else "integer"
            out["enum"] = list(values)
        elif "type" in node:
            out["type"] = node["type"]
        for key in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "minProperties",
                    "maxProperties", "pattern", "format"):
            if key in node:
                out[key] = node[key]
        if node.get("type") == "array":
            out["items"] = self.convert(node.get("items", {}))
        if node.get("type") == "object":
            props = node.get("properties")
            if props is not None:
                out["properties"] = {name: self.field(node.get("title"), name, sub) for name, sub in props.items()}
                if node.get("required"):
                    out["required"] = list(node["required"])
                if node.get("additionalProperties") is not False:  # a lenient (core) Struct
                    out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(node.get("additionalProperties"), dict) and node["additionalProperties"]:
                out["additionalProperties"] = self.convert(node["additionalProperties"])
            else:  # a raw sub-object: keep whatever it holds
                out["x-kubernetes-preserve-unknown-fields"] = True
        return self._default(out, node)

    def field(self, owner: str | None, name: str, sub: dict[str, Any]) -> dict[str, Any]:
        """One property, described as `kubectl explain` shows it (kq.api.crd_docs wins over the type's doc)."""
        schema = self.convert(sub)
        doc = FIELD_DOCS.get((owner or "", name))
        if doc:
            schema = {"description": doc, **{k: v for k, v in schema.items() if k != "description"}}
        return schema

    @staticmethod
    def _default(out: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
        # Zero values are what an absent field already means; only real defaults are worth stating.
        if "default" not in node:
            return out
        value = msgspec.json.decode(msgspec.json.encode(node["default"]))  # tuples, Structs -> JSON values
        if not any(value == z and type(value) is type(z) for z in _ZERO_DEFAULTS):
            out["default"] = value
        return out


def openapi_schema(struct_type: type) -> dict[str, Any]:
    """The structural openAPIV3Schema of one top-level kind."""
    (root,), defs = msgspec.json.schema_components([struct_type], ref_template="#/$defs/{name}")
    conv = _Structural(defs)
    top = conv.resolve(root)
    props: dict[str, Any] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
    }
    for name, sub in top["properties"].items():
        if name in ("apiVersion", "kind", "metadata"):
            continue
        schema = conv.field(top.get("title"), name, sub)
        schema.pop("default", None)  # spec/status: no whole-object defaults at the top
        props[name] = schema
    out: dict[str, Any] = {"type": "object"}
    if top.get("description") or top.get("title") in TYPE_DOCS:
        out["description"] = top.get("description") or TYPE_DOCS[top["title"]]
    out["properties"] = props
    required = [r for r in top.get("required", []) if r not in ("apiVersion", "kind", "metadata")]
    if required:
        out["required"] = required
    return out


# v1beta1 is served beside v1beta2 as Kueue serves it, stored as v1beta2: the API server asks kq's
# conversion webhook (`kq conversion-webhook`, deploy/kq/conversion-webhook.yaml; kq.api.convert_back)
# for either direction, and that webhook checks every v1beta1 write as its v1beta2 form, so the v1beta1
# schema itself only needs to be structural. cert-manager injects the webhook's CA.
CONVERSION_SERVICE = {"namespace": "kq-system", "name": "kq-conversion-webhook", "path": "/convert", "port": 443}
CA_INJECTION = {"cert-manager.io/inject-ca-from": "kq-system/kq-conversion-webhook"}
V1BETA1_RENAMED_PATHS = {".spec.cohortName": ".spec.cohort"}  # printer columns over renamed fields


def _v1beta1_version(v1beta2: dict[str, Any]) -> dict[str, Any]:
    object_ = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schema = {"type": "object", "description": f"{v1beta2['schema']['openAPIV3Schema'].get('description', '')} "
              "(v1beta1: converted to and validated as v1beta2 by kq's conversion webhook)".strip(),
              "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                             "metadata": {"type": "object"}, "spec": object_, "status": object_},
              "x-kubernetes-preserve-unknown-fields": True}
    version: dict[str, Any] = {"name": "v1beta1", "served": True, "storage": False,
                               "schema": {"openAPIV3Schema": schema}}
    for key in ("subresources", "additionalPrinterColumns"):
        if key in v1beta2:
            version[key] = v1beta2[key]
    if "additionalPrinterColumns" in version:
        version["additionalPrinterColumns"] = [
            {**c, "jsonPath": V1BETA1_RENAMED_PATHS.get(c["jsonPath"], c["jsonPath"])}
            for c in version["additionalPrinterColumns"]]
    return version


def crd_for(info: KindInfo) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": info.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": openapi_schema(info.type)},
    }
    if info.has_status:
        version["subresources"] = {"status": {}}
    if info.kind in PRINTER_COLUMNS:
        version["additionalPrinterColumns"] = list(PRINTER_COLUMNS[info.kind])
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": f"{info.kind}List",
        "plural": info.plural,
        "singular": info.token,
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    spec: dict[str, Any] = {
        "group": info.group,
        "names": names,
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "versions": [version],
    }
    metadata: dict[str, Any] = {"name": f"{info.plural}.{info.group}"}
    if info.kind in LEGACY_KINDS[f"{info.group}/v1beta1"]:
        spec["versions"].append(_v1beta1_version(version))
        spec["conversion"] = {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"], "clientConfig": {"service": dict(CONVERSION_SERVICE)}}}
        metadata["annotations"] = dict(CA_INJECTION)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": spec,
    }


def all_crds() -> list[dict[str, Any]]:
    return [crd_for(i) for i in KINDS if i.group == KUEUE_GROUP]


def render_crds() -> str:
    header = "# Generated by `python -m kq.api.crd --write` from shared/kq/api; do not edit.\n"
    return header + yaml.safe_dump_all(all_crds(), sort_keys=False, explicit_start=True, width=120)


if __name__ == "__main__":  # the shell: print, and write the committed copy on request
    import sys
    from pathlib import Path

    text = render_crds()
    sys.stdout.write(text)
    if "--write" in sys.argv[1:]:
        target = Path(__file__).resolve().parents[3] / "deploy" / "crds" / "kueue.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target}", file=sys.stderr)
