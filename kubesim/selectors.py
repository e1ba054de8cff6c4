"""Label and field selectors in the API server's string syntax.

Label selectors: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`,
comma-separated (all must hold). Field selectors: `path=value`, `path==value`,
`path!=value` over the fields each resource supports (metadata.name and
metadata.namespace everywhere, plus the few per-kind fields Kubernetes has);
any other field is a 400, as on a real cluster.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.errors import bad_request
from kubesim.resources import ResourceType

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_SET_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(?P<neg>!?)\s*(?P<key>{_KEY})\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op == "exists":
            return self.key in labels
        if op == "!exists":
            return self.key not in labels
        if op == "=" or op == "in":
            return self.key in labels and labels[self.key] in self.values
        # "!=" and "notin" also match objects without the label, as in Kubernetes.
        return labels.get(self.key) not in self.values


LabelSelector = tuple[Requirement, ...]


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text or not text.strip():
        return ()
    reqs: list[Requirement] = []
    for part in _split_top(text):
        if m := _SET_RE.match(part):
            values = frozenset(v.strip() for v in m["values"].split(",") if v.strip())
            if not values:
                raise bad_request(f"unable to parse requirement: {part.strip()!r}: values must not be empty")
            reqs.append(Requirement(m["key"], m["op"], values))
        elif m := _CMP_RE.match(part):
            op = "!=" if m["op"] == "!=" else "="
            reqs.append(Requirement(m["key"], op, frozenset((m["value"],))))
        elif m := _EXISTS_RE.match(part):
            reqs.append(Requirement(m["key"], "!exists" if m["neg"] else "exists"))
        else:
            raise bad_request(f"unable to parse requirement: {part.strip()!r}")
    return tuple(reqs)


def labels_match(selector: LabelSelector, obj: Mapping[str, Any]) -> bool:
    if not selector:
        return True
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(r.matches(labels) for r in selector)


# --- field selectors ---------------------------------------------------------------------------

_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "pods": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "nodes": ("spec.unschedulable",),
    "namespaces": ("status.phase",),
    "secrets": ("type",),
    "events": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "jobs.batch": ("status.successful",),
}


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    path: tuple[str, ...]
    value: str
    negate: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        cur: Any = obj
        for part in self.path:
            cur = cur.get(part) if isinstance(cur, Mapping) else None
            if cur is None:
                break
        if cur is None:
            text = ""
        elif isinstance(cur, bool):
            text = "true" if cur else "false"
        else:
            text = str(cur)
        return (text == self.value) != self.negate


FieldSelector = tuple[FieldRequirement, ...]


def parse_field_selector(text: str | None, rt: ResourceType) -> FieldSelector:
    if not text or not text.strip():
        return ()
    allowed = _COMMON_FIELDS + _KIND_FIELDS.get(rt.key, ())
    reqs: list[FieldRequirement] = []
    for part in text.split(","):
        part = part.strip()
        for op in ("!=", "==", "="):
            if op in part:
                field, value = part.split(op, 1)
                break
        else:
            raise bad_request(f"invalid field selector: {part!r}")
        field = field.strip()
        if field not in allowed:
            raise bad_request(f'field label not supported: "{field}"')
        reqs.append(FieldRequirement(tuple(field.split(".")), value.strip(), op == "!="))
    return tuple(reqs)


def fields_match(selector: FieldSelector, obj: Mapping[str, Any]) -> bool:
    return all(r.matches(obj) for r in selector)


def matcher(labels: LabelSelector, fields: FieldSelector) -> Callable[[Mapping[str, Any]], bool] | None:
    """A predicate for both selectors, or None when nothing is selected out."""
    if not labels and not fields:
        return None
    return lambda obj: labels_match(labels, obj) and fields_match(fields, obj)
