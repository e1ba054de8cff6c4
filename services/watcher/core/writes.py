"""What the watcher's cores ask the shell to do to a Kubernetes object, and how a change becomes a patch.

A core never sends a whole object back: it builds the wanted object with
`msgspec.structs.replace`, and `patch_write` turns the difference into a JSON
merge patch (RFC 7386) that carries the resourceVersion the decision was made
on. The API server answers 409 if the object moved meanwhile, so every write is
a conditional write: re-read and decide again, never overwrite blindly.
Fields kq's lenient core types do not model never appear in either side of the
difference, so a patch leaves them alone.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

import msgspec

_encoder = msgspec.json.Encoder(order="sorted")


class Write(msgspec.Struct, frozen=True, kw_only=True):
    """PATCH (merge) one object, conditional on `resource_version` (inside the patch body)."""

    kind: str  # lower-case kind token: "workload", "job"
    namespace: str  # "" for cluster-scoped objects
    name: str
    subresource: Literal["status"] | None
    patch: bytes  # JSON merge patch (or JSON patch), with metadata.resourceVersion set
    resource_version: str
    why: str
    # "json": an RFC 6902 patch, for changes inside lists a merge patch would replace whole
    # (and with them the fields kq's lenient types do not model).
    patch_type: Literal["merge", "json"] = "merge"


class Create(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    namespace: str
    name: str
    body: bytes  # the whole object as JSON
    why: str


class Delete(msgspec.Struct, frozen=True, kw_only=True):
    """DELETE with uid and resourceVersion preconditions."""

    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    why: str


class Skip(msgspec.Struct, frozen=True, kw_only=True):
    """Nothing to write: the object is already as wanted."""

    reason: str


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """The command cannot apply to the object as it is; `reason` is a short CamelCase code."""

    reason: str
    message: str


Action = Write | Create | Delete


def merge_diff(old: Any, new: Any) -> dict[str, Any]:
    """The JSON merge patch that turns mapping `old` into mapping `new` (empty when equal).

    Keys are visited in sorted order so the same change always yields the same bytes.
    Lists are replaced whole, as merge patch does; a removed key becomes null.
    """
    patch: dict[str, Any] = {}
    for key in sorted(set(old) | set(new)):
        if key not in new:
            patch[key] = None
            continue
        nv = new[key]
        if key not in old:
            patch[key] = nv
            continue
        ov = old[key]
        if isinstance(nv, dict) and isinstance(ov, dict):
            sub = merge_diff(ov, nv)
            if sub:
                patch[key] = sub
        elif nv != ov:
            patch[key] = nv
    return patch


def _builtins(obj: msgspec.Struct) -> dict[str, Any]:
    out = msgspec.to_builtins(obj)
    if not isinstance(out, dict):
        raise TypeError(f"{type(obj).__name__} does not encode to an object")
    return out


_NO_STATUS = object()  # the status is never left out of the encoding
_WHOLE = object()  # not known here when it is: convert the whole object


@cache
def _status_field(cls: type) -> tuple[str | None, Any]:
    """The attribute encoded as "status" of a struct type (None: it has none), and the value it is
    left out at when encoding: msgspec's omit_defaults leaves a field out when it holds its default
    object itself (not an equal one), or an empty collection from a collection factory."""
    for f in msgspec.structs.fields(cls):
        if f.encode_name != "status":
            continue
        if not cls.__struct_config__.omit_defaults:  # type: ignore[attr-defined]  # a Struct type
            return f.name, _NO_STATUS
        if f.default is not msgspec.NODEFAULT:
            return f.name, f.default
        return f.name, _NO_STATUS if f.default_factory is msgspec.NODEFAULT else _WHOLE
    return None, _NO_STATUS


def _status_builtins(obj: msgspec.Struct) -> Any:
    """`_builtins(obj).get("status", {})` without converting the rest of the object."""
    attr, default = _status_field(type(obj))
    if attr is None:
        return {}
    if default is _WHOLE:
        return _builtins(obj).get("status", {})
    value = getattr(obj, attr)
    if value is default:
        return {}
    return msgspec.to_builtins(value)


def patch_write(
    kind: str,
    old: Any,
    new: Any,
    *,
    status: bool,
    why: str,
) -> Write | None:
    """A conditional merge patch from `old` to `new` on the main resource or its status; None if no change.

    On the main resource the status is left out (the API server ignores it there), and
    on the status subresource everything but the status is.
    """
    if status:
        # Only the status is converted (a Workload's spec is most of it, and most writes are status
        # writes): the same dicts as the whole object's "status" would give.
        diff = merge_diff({"status": _status_builtins(old)}, {"status": _status_builtins(new)})
    else:
        a, b = _builtins(old), _builtins(new)
        a.pop("status", None)
        b.pop("status", None)
        diff = merge_diff(a, b)
    if not diff:
        return None
    meta = old.metadata
    rv = meta.resource_version
    diff.setdefault("metadata", {})["resourceVersion"] = rv
    return Write(
        kind=kind,
        namespace=meta.namespace,
        name=meta.name,
        subresource="status" if status else None,
        patch=_encoder.encode(diff),
        resource_version=rv,
        why=why,
    )


def encode_body(obj: msgspec.Struct) -> bytes:
    return _encoder.encode(obj)


def json_patch_write(kind: str, old: Any, ops: list[dict[str, Any]], *, status: bool, why: str) -> Write | None:
    """A conditional RFC 6902 patch: `ops` plus the resourceVersion the decision was made on
    (kept in the patched object, which makes it a precondition). None when there is nothing to do."""
    if not ops:
        return None
    meta = old.metadata
    rv = meta.resource_version
    body = [*ops, {"op": "replace", "path": "/metadata/resourceVersion", "value": rv}]
    return Write(kind=kind, namespace=meta.namespace, name=meta.name, subresource="status" if status else None,
                 patch=_encoder.encode(body), resource_version=rv, why=why, patch_type="json")
