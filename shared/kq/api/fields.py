"""Walking a plain mapping guided by a Struct's type: quantities and readable decode errors.

Both work on user input before (or instead of) a typed decode, so errors name
the field path the user wrote: `spec.resourceGroups[0].flavors[0].resources[0].nominalQuota`.
"""

from __future__ import annotations

import difflib
import functools
import re
from typing import Any, NamedTuple

import msgspec
from msgspec import inspect as mi

from kq.api.meta import QUANTITY_MARK
from kq.quantity import QuantityError, parse_quantity

__all__ = ["FieldError", "normalise_quantities", "explain_validation_error", "join_path"]


class FieldError(NamedTuple):
    path: str  # "spec.podSets[0].count"; "" for the whole object
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def join_path(base: str, name: str) -> str:
    return f"{base}.{name}" if base else name


@functools.cache
def _type_info(struct_type: type) -> mi.Type:
    return mi.type_info(struct_type)


def _is_quantity(t: mi.Type) -> bool:
    return isinstance(t, mi.Metadata) and bool((t.extra_json_schema or {}).get(QUANTITY_MARK))


def _quantity_text(value: Any, path: str, errors: list[FieldError]) -> Any:
    try:
        parsed = parse_quantity(value)
    except QuantityError as e:
        errors.append(FieldError(path, str(e)))
        return value
    if parsed < 0:
        errors.append(FieldError(path, f"must be non-negative, got {value!r}"))
    # Numbers as YAML users write them (`cpu: 1`, `cpu: 0.5`) are sent as the quantity string.
    return value if isinstance(value, str) else (str(value) if isinstance(value, int) else repr(value))


def _walk(value: Any, t: mi.Type, path: str, errors: list[FieldError]) -> Any:
    """Return `value` with every quantity checked and numbers turned into strings; shape mismatches pass through."""
    if _is_quantity(t):
        return _quantity_text(value, path, errors)
    if isinstance(t, mi.Metadata):
        return _walk(value, t.type, path, errors)
    if isinstance(t, mi.UnionType):
        if value is None:
            return value
        for alt in t.types:
            if _is_quantity(alt) or isinstance(alt, (mi.StructType, mi.DictType, mi.ListType, mi.VarTupleType)):
                return _walk(value, alt, path, errors)
        return value
    if isinstance(t, mi.StructType) and isinstance(value, dict):
        out = dict(value)
        for f in t.fields:
            if f.encode_name in out:
                out[f.encode_name] = _walk(out[f.encode_name], f.type, join_path(path, f.encode_name), errors)
        return out
    if isinstance(t, (mi.ListType, mi.VarTupleType)) and isinstance(value, list):
        return [_walk(v, t.item_type, f"{path}[{i}]", errors) for i, v in enumerate(value)]
    if isinstance(t, mi.DictType) and isinstance(value, dict):
        return {k: _walk(v, t.value_type, f"{path}[{k}]", errors) for k, v in value.items()}
    return value


def normalise_quantities(doc: dict[str, Any], struct_type: type) -> tuple[dict[str, Any], list[FieldError]]:
    """Check every quantity in `doc` (as typed by `struct_type`); numbers become quantity strings."""
    errors: list[FieldError] = []
    out = _walk(doc, _type_info(struct_type), "", errors)
    return out, errors


_AT = re.compile(r"^(?P<msg>.*) - at `\$(?P<path>.*)`$", re.S)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>.*)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<name>.*)`$")
_SEGMENT = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")


def _unwrap(t: mi.Type) -> mi.Type:
    """Strip Annotated metadata and Optional[...] down to the one underlying type."""
    while True:
        if isinstance(t, mi.Metadata):
            t = t.type
        elif isinstance(t, mi.UnionType):
            alts = [a for a in t.types if not isinstance(a, mi.NoneType)]
            if len(alts) != 1:
                return t
            t = alts[0]
        else:
            return t


def _type_at(struct_type: type, path: str) -> mi.Type | None:
    """The type reached by a msgspec error path like `.spec.podSets[0]` (Optional/Annotated stripped)."""
    t = _unwrap(_type_info(struct_type))
    for m in _SEGMENT.finditer(path):
        if m.group(1) is not None:
            if not isinstance(t, mi.StructType):
                return None
            f = next((f for f in t.fields if f.encode_name == m.group(1)), None)
            if f is None:
                return None
            t = f.type
        elif isinstance(t, (mi.ListType, mi.VarTupleType)):
            t = t.item_type
        elif isinstance(t, mi.DictType):
            t = t.value_type
        else:
            return None
        t = _unwrap(t)
    return t


def explain_validation_error(err: msgspec.ValidationError, struct_type: type) -> FieldError:
    """msgspec's "Object contains unknown field `nmae` - at `$.metadata`" as a FieldError with the full path."""
    text = str(err)
    m = _AT.match(text)
    msg, raw_path = (m.group("msg"), m.group("path")) if m else (text, "")  # root errors carry no path
    path = raw_path.lstrip(".")
    if u := _UNKNOWN.match(msg):
        name = u.group("name")
        hint = ""
        st = _type_at(struct_type, raw_path)
        if isinstance(st, mi.StructType):
            close = difflib.get_close_matches(name, [f.encode_name for f in st.fields], n=1)
            if close:
                hint = f' (did you mean "{close[0]}"?)'
        return FieldError(join_path(path, name), f"unknown field{hint}")
    if r := _MISSING.match(msg):
        return FieldError(join_path(path, r.group("name")), "required field is missing")
    msg = msg[:1].lower() + msg[1:]
    if msg.startswith("invalid enum value") and isinstance(lit := _type_at(struct_type, raw_path), mi.LiteralType):
        msg += f" (expected one of: {', '.join(map(str, lit.values))})"
    return FieldError(path, msg)
