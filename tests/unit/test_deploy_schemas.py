"""Every manifest in deploy/ against Kubernetes' own schemas, offline.

kubernetes-validate ships the OpenAPI schemas of each Kubernetes release as JSON Schema (strict
variants reject unknown fields), so a misspelt field, a wrong type or a missing required field in a
Deployment, a PodDisruptionBudget, RBAC or a CustomResourceDefinition fails here, not at
`kubectl apply`. Objects of kinds Kubernetes does not define (a PodMonitor for the Prometheus
Operator) are checked against their CRD's schema in deploy/ when it is there, else named.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# The oldest release kq supports (MutatingAdmissionPolicy v1beta1 is served from 1.34) and the newest known.
VERSIONS = ("1.34.0", kubernetes_validate.latest_version())


def _all_manifests() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        rel = str(path.relative_to(DEPLOY))
        if path.name == "kustomization.yaml" or rel.startswith("compose/"):
            continue
        out.extend((rel, doc) for doc in yaml.safe_load_all(path.read_text()) if doc is not None)
    return out


MANIFESTS = _all_manifests()
# cert-manager's kinds (deploy/conversion/certificate.yaml) are not Kubernetes': the fields kq uses of
# cert-manager.io/v1, from its API reference, strict like the rest.
_NAME = {"type": "string", "minLength": 1}
CERT_MANAGER: dict[str, dict[str, Any]] = {
    "Issuer": {"type": "object", "additionalProperties": False, "required": ["selfSigned"],
               "properties": {"selfSigned": {"type": "object", "additionalProperties": False,
                                             "properties": {"crlDistributionPoints": {"type": "array"}}}}},
    "Certificate": {"type": "object", "additionalProperties": False, "required": ["secretName", "issuerRef"],
                    "properties": {"secretName": _NAME, "dnsNames": {"type": "array", "items": _NAME, "minItems": 1},
                                   "issuerRef": {"type": "object", "additionalProperties": False,
                                                 "required": ["name"],
                                                 "properties": {"name": _NAME, "kind": {"enum": ["Issuer",
                                                                                                 "ClusterIssuer"]},
                                                                "group": {"type": "string"}}}}},
}


def _validate_cert_manager(doc: dict[str, Any]) -> None:
    import jsonschema

    assert set(doc) <= {"apiVersion", "kind", "metadata", "spec"}, sorted(doc)
    jsonschema.validate(doc["spec"], CERT_MANAGER[doc["kind"]])


@pytest.fixture(autouse=True, scope="module")
def _schemas_read_once() -> Iterator[None]:
    """kubernetes-validate reads and parses its schema files (the definitions are megabytes) on every call."""
    utils = kubernetes_validate.utils
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(utils, "schema_contents", functools.lru_cache(maxsize=None)(utils.schema_contents))
        yield


def _validate(doc: dict[str, Any], version: str) -> None:
    if doc["apiVersion"] == "cert-manager.io/v1":
        _validate_cert_manager(doc)
        return
    kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("source", "doc"), MANIFESTS,
                         ids=[f"{s}:{d['kind']}/{d['metadata']['name']}" for s, d in MANIFESTS])
def test_manifest_is_valid_for_kubernetes(source: str, doc: dict[str, Any], version: str) -> None:
    try:
        _validate(doc, version)
    except kubernetes_validate.SchemaNotFoundError:
        pytest.fail(f"{source}: Kubernetes {version} has no {doc['apiVersion']} {doc['kind']}")
    except kubernetes_validate.ValidationError as e:
        pytest.fail(f"{source}: {doc['kind']}/{doc['metadata']['name']} is not valid for Kubernetes {version}: "
                    f"{e.message} at {'.'.join(map(str, e.path))}")


def _first(kind: str) -> dict[str, Any]:
    return copy.deepcopy(next(d for _, d in MANIFESTS if d["kind"] == kind))


@pytest.mark.parametrize(("kind", "breakage"), [
    ("Deployment", lambda d: d["spec"]["template"]["spec"]["containers"][0].update(imagePullPolcy="Always")),
    ("Deployment", lambda d: d["spec"].update(replicas="two")),
    ("Deployment", lambda d: d["spec"].pop("selector")),
    ("PodDisruptionBudget", lambda d: d["spec"].update(maxUnavailable=[1])),
    ("CustomResourceDefinition", lambda d: d["spec"]["versions"][0].update(servd=True)),
    ("ClusterRole", lambda d: d["rules"][0].update(verbs="get")),
], ids=["unknown-field", "wrong-type", "missing-required", "pdb-type", "crd-typo", "rbac-type"])
def test_the_schemas_catch_mistakes(kind: str, breakage: Any) -> None:
    doc = _first(kind)
    _validate(doc, VERSIONS[-1])  # valid as committed
    breakage(doc)
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(doc, VERSIONS[-1])
