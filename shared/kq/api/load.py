"""User input (kq apply/create/delete, scenario files) into checked, typed objects.

Every document is checked before anything is sent: YAML, apiVersion/kind,
metadata, unknown fields on Kueue kinds, every quantity, and Kueue's own rules.
An InputError names the source, the document, the object and the field path.
Older Kueue versions (v1beta1, v1alpha1) are converted to v1beta2 first.
"""

from __future__ import annotations

import difflib
from typing import Any

import msgspec
import yaml

from kq.api.convert import ConversionError, convert_to_v1beta2, is_legacy
from kq.api.fields import FieldError, explain_validation_error, normalise_quantities
from kq.api.meta import OBJECT_META_FIELDS
from kq.api.registry import KINDS, KindInfo, UnknownKindError, kind_for
from kq.api.validate import validate_metadata, validate_object

# API groups of Kueue's job frameworks kq does not integrate yet -> Kueue's framework names.
UNSUPPORTED_FRAMEWORKS = {
    # (kubeflow.org's training kinds and ray.io's RayJob and RayCluster are served: these are the rest)
    "ray.io": "ray.io/rayservice",
    "sparkoperator.k8s.io": "sparkoperator.k8s.io/sparkapplication",
}

__all__ = ["InputError", "LoadedObject", "load_documents", "load_object"]


class InputError(ValueError):
    """Bad user input; `errors` holds every field problem found in the object."""

    def __init__(self, where: str, errors: list[FieldError]) -> None:
        self.where = where
        self.errors = errors
        lines = [str(e) for e in errors] or ["invalid"]
        text = f"{where}: {lines[0]}" if len(lines) == 1 else f"{where}:\n  " + "\n  ".join(lines)
        super().__init__(text)


class LoadedObject(msgspec.Struct, frozen=True, kw_only=True):
    kind_info: KindInfo
    obj: Any  # the typed Struct (kind_info.type)
    body: dict[str, Any]  # what to send to the API server: the user's object, in v1beta2, quantities as strings
    source: str = ""
    index: int = 0  # position of the document in its source, from 1

    @property
    def name(self) -> str:
        return str(self.obj.metadata.name)

    @property
    def namespace(self) -> str:
        return str(self.obj.metadata.namespace)

    def ref(self) -> str:
        """Human reference: "ClusterQueue cq", "Job ns/j1"."""
        ns = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind_info.kind} {ns}{self.name or self.obj.metadata.generate_name + '*'}"


def _where(source: str, index: int | None, doc: Any) -> str:
    parts = [source]
    if index is not None:
        parts.append(f"document {index}")
    if isinstance(doc, dict):
        kind = doc.get("kind") if isinstance(doc.get("kind"), str) else "?"
        meta = doc.get("metadata")
        if not isinstance(meta, dict):
            meta = {}
        name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "")
        ns = meta.get("namespace")
        if name:
            parts.append(f"{kind} {ns}/{name}" if isinstance(ns, str) and ns else f"{kind} {name}")
        elif kind != "?":
            parts.append(str(kind))
    return " ".join(parts[:1]) + (f" ({', '.join(parts[1:])})" if len(parts) > 1 else "")


def _kind_of(doc: dict[str, Any]) -> tuple[KindInfo, dict[str, Any]]:
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise _Reject([FieldError("apiVersion", "required")])
    if not isinstance(kind, str) or not kind:
        raise _Reject([FieldError("kind", "required")])
    if is_legacy(api_version, kind):
        try:
            doc = convert_to_v1beta2(doc)
        except ConversionError as e:
            raise _Reject([FieldError(e.path, e.message)]) from None
        api_version = doc["apiVersion"]
    try:
        return kind_for(api_version, kind), doc
    except UnknownKindError:
        framework = UNSUPPORTED_FRAMEWORKS.get(api_version.split("/")[0])
        if framework is not None:
            msg = (f"{api_version}/{kind}: Kueue's {framework} integration is not available in kq yet; "
                   "the object would run unqueued, so it is refused")
            raise _Reject([FieldError("kind", msg)]) from None
        served = [i.api_version for i in KINDS if i.kind == kind]
        hint = f"; {kind} is served as {served[0]}" if served else ""
        raise _Reject([FieldError("kind", f"unknown apiVersion/kind {api_version}/{kind}{hint}")]) from None


class _Reject(Exception):
    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors


def _check_metadata_keys(doc: dict[str, Any]) -> list[FieldError]:
    meta = doc.get("metadata")
    if meta is None:
        return [FieldError("metadata", "required")]
    if not isinstance(meta, dict):
        return [FieldError("metadata", "expected a mapping")]
    errors = []
    for key in meta:
        if key not in OBJECT_META_FIELDS:
            close = difflib.get_close_matches(str(key), sorted(OBJECT_META_FIELDS), n=1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            errors.append(FieldError(f"metadata.{key}", f"unknown field{hint}"))
    return errors


def _check_top_level_keys(doc: dict[str, Any], info: KindInfo) -> list[FieldError]:
    """Core kinds ignore unknown fields when decoding, but a top-level typo ("sepc") is still a typo."""
    if info.strict:
        return []  # msgspec rejects unknown fields of Kueue kinds everywhere
    known = [f.encode_name for f in msgspec.structs.fields(info.type)]
    errors = []
    for key in doc:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            errors.append(FieldError(str(key), f"unknown field{hint}"))
    return errors


def _load(doc: Any) -> tuple[KindInfo, Any, dict[str, Any]]:
    if not isinstance(doc, dict):
        raise _Reject([FieldError("", f"expected a mapping (a Kubernetes object), got {type(doc).__name__}")])
    info, doc = _kind_of(doc)
    errors = _check_top_level_keys(doc, info) + _check_metadata_keys(doc)
    body, quantity_errors = normalise_quantities(doc, info.type)
    errors += quantity_errors
    try:
        obj = msgspec.convert(body, info.type, str_keys=True)
    except msgspec.ValidationError as e:
        raise _Reject([*errors, explain_validation_error(e, info.type)]) from None
    errors += validate_metadata(obj.metadata, info.namespaced, info.kind)
    errors += validate_object(obj)
    if errors:
        raise _Reject(errors)
    return info, obj, body


def load_object(doc: dict[str, Any], source: str, index: int | None = None) -> LoadedObject:
    """Check and type one already-parsed object. Raises InputError."""
    try:
        info, obj, body = _load(doc)
    except _Reject as r:
        raise InputError(_where(source, index, doc), r.errors) from None
    return LoadedObject(kind_info=info, obj=obj, body=body, source=source, index=index or 0)


def load_documents(text: str, source: str) -> list[LoadedObject]:
    """Every object in a YAML (or JSON) stream; `kind: List` documents are expanded. Raises InputError."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        raise InputError(source, [FieldError("", f"invalid YAML: {e}")]) from None
    out: list[LoadedObject] = []
    for i, doc in enumerate(docs, start=1):
        if doc is None:  # an empty document, e.g. a trailing "---"
            continue
        if isinstance(doc, dict) and doc.get("kind") == "List" and doc.get("apiVersion") == "v1":
            items = doc.get("items")
            if not isinstance(items, list):
                raise InputError(_where(source, i, doc), [FieldError("items", "expected a list")])
            out.extend(load_object(item, f"{source} document {i} items", j) for j, item in enumerate(items, start=1))
            continue
        out.append(load_object(doc, source, i))
    return out
