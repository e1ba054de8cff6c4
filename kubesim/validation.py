"""Object metadata validation the API server does for every kind: names, labels, annotations.

The point is to catch what a real cluster would refuse (an upper-case name, a
64-character label value) here rather than in production.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubesim.errors import ApiError, bad_request, invalid
from kubesim.resources import ResourceType

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

# Kinds whose names must be DNS labels (63 characters, no dots); everything else is a subdomain.
_LABEL_NAMED = frozenset(("namespaces", "jobs.batch", "jobsets.jobset.x-k8s.io"))


def check_name(rt: ResourceType, name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise invalid(rt, str(name or ""), "metadata.name", name, "name or generateName is required")
    if rt.key in _LABEL_NAMED:
        if len(name) > 63 or not _DNS_LABEL.match(name):
            raise invalid(
                rt, name, "metadata.name", name,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                "and must start and end with an alphanumeric character (at most 63 characters)",
            )
    elif rt.key in ("events", "events.events.k8s.io"):
        if len(name) > 253:
            raise invalid(rt, name, "metadata.name", name, "must be no more than 253 characters")
    elif len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise invalid(
            rt, name, "metadata.name", name,
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character (at most 253 characters)",
        )


def _check_key(rt: ResourceType, name: str, field: str, key: Any) -> None:
    if not isinstance(key, str):
        raise bad_request(f"{field}: keys must be strings")
    prefix, _, local = key.rpartition("/")
    ok = bool(local) and len(local) <= 63 and _QUALIFIED_NAME.match(local) is not None
    if prefix:
        ok = ok and len(prefix) <= 253 and _DNS_SUBDOMAIN.match(prefix) is not None
    if not ok:
        raise invalid(rt, name, field, key, "name part must consist of alphanumeric characters, '-', '_' or '.', "
                      "and must start and end with an alphanumeric character (at most 63 characters), "
                      "with an optional DNS subdomain prefix and '/'")


def _check_label_value(rt: ResourceType, name: str, value: str) -> None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise invalid(rt, name, "metadata.labels", value, "a valid label must be an empty string or consist of "
                      "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                      "alphanumeric character (at most 63 characters)")


def _check_string_map(
    rt: ResourceType, name: str, field: str, m: Any, check_value: Callable[[ResourceType, str, str], None] | None
) -> None:
    """A map of qualified-name keys to strings (labels, annotations); each entry checked in turn."""
    if m is None:
        return
    if not isinstance(m, dict):
        raise bad_request(f"{field} must be a map of strings")
    for k, v in m.items():
        _check_key(rt, name, field, k)
        if not isinstance(v, str):
            raise bad_request(f"{field}[{k}]: value must be a string, got {type(v).__name__}")
        if check_value is not None:
            check_value(rt, name, v)


ANNOTATIONS_MAX_BYTES = 256 * 1024  # all annotations of one object together (the API server's limit)


def check_metadata(rt: ResourceType, name: str, meta: dict[str, Any]) -> None:
    """Labels, annotations, finalizers and ownerReferences must have the Kubernetes shapes."""
    _check_string_map(rt, name, "metadata.labels", meta.get("labels"), _check_label_value)
    _check_string_map(rt, name, "metadata.annotations", meta.get("annotations"), None)
    annotations = meta.get("annotations") or {}
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_MAX_BYTES:
        raise invalid(rt, name, "metadata.annotations", f"{size} bytes",
                      f"Too long: must have at most {ANNOTATIONS_MAX_BYTES} bytes")
    finalizers = meta.get("finalizers")
    if finalizers is not None and (
        not isinstance(finalizers, list) or not all(isinstance(f, str) and f for f in finalizers)
    ):
        raise bad_request("metadata.finalizers must be a list of non-empty strings")
    owners = meta.get("ownerReferences")
    if owners is not None:
        if not isinstance(owners, list):
            raise bad_request("metadata.ownerReferences must be a list")
        for i, ref in enumerate(owners):
            if not isinstance(ref, dict):
                raise bad_request(f"metadata.ownerReferences[{i}] must be an object")
            for field in ("apiVersion", "kind", "name", "uid"):
                if not isinstance(ref.get(field), str) or not ref[field]:
                    raise invalid(rt, name, f"metadata.ownerReferences[{i}].{field}", ref.get(field), "required")
        if sum(1 for ref in owners if ref.get("controller")) > 1:
            raise invalid(
                rt, name, "metadata.ownerReferences", "", "Only one reference can have Controller set to true"
            )


def require_map(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise bad_request(f"{field}: must be a JSON object, got {type(value).__name__}")
    return value


__all__ = ["ApiError", "check_metadata", "check_name", "require_map"]
