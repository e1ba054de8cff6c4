"""The three patch formats the API server accepts for JSON bodies.

- application/merge-patch+json (RFC 7386): maps merge recursively, null deletes, lists replace.
- application/json-patch+json (RFC 6902): add, remove, replace, move, copy, test.
- application/strategic-merge-patch+json, the subset kubesim supports (built-in kinds only;
  custom resources answer 415 as on a real cluster):
  * maps merge recursively, null deletes a key;
  * lists whose field Kubernetes declares `patchStrategy: merge` merge by their key:
    containers/initContainers/ephemeralContainers/env/volumes/imagePullSecrets/
    schedulingGates/resourceClaims (name), volumeMounts (mountPath), volumeDevices
    (devicePath), ports (containerPort), conditions/addresses (type),
    ownerReferences (uid), hostAliases (ip), topologySpreadConstraints (topologyKey);
    `finalizers` merges as a set of strings; every other list (tolerations, taints,
    args, ...) is replaced;
  * directives: `$patch: replace` and `$patch: delete` on maps and list items,
    `$deleteFromPrimitiveList/<field>`; `$setElementOrder/<field>` and `$retainKeys`
    are accepted and ignored.

All functions work on the target in place (callers pass a private copy) and return the result.
Malformed patches raise PatchError, which the API answers with 422 (or 400 for bad JSON shape).
"""

from __future__ import annotations

import copy
from typing import Any

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"

_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}
_SET_LISTS = frozenset(("finalizers",))


class PatchError(ValueError):
    def __init__(self, message: str, code: int = 422) -> None:
        super().__init__(message)
        self.code = code


# --- merge patch ---------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = merge_patch(target.get(key), value)
    return target


def merged(target: Any, patch: Any) -> Any:
    """merge_patch without touching `target`: a new map on each patched path, the rest shared."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(out.get(key), value)
    return out


# --- JSON patch ----------------------------------------------------------------------------------


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise PatchError(f"invalid JSON pointer {path!r}")
    if path == "":
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], op: str) -> tuple[Any, str]:
    if not parts:
        raise PatchError(f"{op}: the whole document cannot be the target")
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list):
            cur = cur[_index(cur, p, op, allow_end=False)]
        else:
            raise PatchError(f"{op}: path /{'/'.join(parts)} does not exist")
    return cur, parts[-1]


def _index(lst: list[Any], token: str, op: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(lst)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"{op}: invalid array index {token!r}")
    i = int(token)
    if i > len(lst) or (i == len(lst) and not allow_end):
        raise PatchError(f"{op}: array index {i} out of bounds")
    return i


def _get(doc: Any, parts: list[str], op: str) -> Any:
    if not parts:
        return doc
    parent, last = _parent(doc, parts, op)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"{op}: path /{'/'.join(parts)} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, op, allow_end=False)]
    raise PatchError(f"{op}: path /{'/'.join(parts)} does not exist")


def _add(doc: Any, parts: list[str], value: Any, op: str) -> Any:
    if not parts:
        return value
    parent, last = _parent(doc, parts, op)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, op, allow_end=True), value)
    else:
        raise PatchError(f"{op}: parent of /{'/'.join(parts)} is not a container")
    return doc


def _remove(doc: Any, parts: list[str], op: str) -> Any:
    parent, last = _parent(doc, parts, op)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"{op}: path /{'/'.join(parts)} does not exist")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, op, allow_end=False))
    raise PatchError(f"{op}: path /{'/'.join(parts)} does not exist")


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations", code=400)
    for i, o in enumerate(ops):
        if not isinstance(o, dict) or "op" not in o or "path" not in o:
            raise PatchError(f"operation {i}: needs 'op' and 'path'")
        op, parts = o["op"], _pointer(o["path"])
        if op == "add":
            doc = _add(doc, parts, copy.deepcopy(_value(o, i)), op)
        elif op == "remove":
            _remove(doc, parts, op)
        elif op == "replace":
            _get(doc, parts, op)  # must exist
            if parts:
                _remove(doc, parts, op)
            doc = _add(doc, parts, copy.deepcopy(_value(o, i)), op)
        elif op in ("move", "copy"):
            src = _pointer(o.get("from"))
            value = _remove(doc, src, op) if op == "move" else copy.deepcopy(_get(doc, src, op))
            doc = _add(doc, parts, value, op)
        elif op == "test":
            if _get(doc, parts, op) != _value(o, i):
                raise PatchError(f"test operation failed at {o['path']}")
        else:
            raise PatchError(f"operation {i}: unknown op {op!r}")
    return doc


def _value(o: dict[str, Any], i: int) -> Any:
    if "value" not in o:
        raise PatchError(f"operation {i} ({o['op']}): missing 'value'")
    return o["value"]


# --- strategic merge patch (subset) --------------------------------------------------------------


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object", code=400)
    return _smp_map(target if isinstance(target, dict) else {}, patch)


def _smp_map(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if directive is not None and directive != "merge":
        raise PatchError(f"unsupported $patch directive {directive!r} on a map")
    for key, value in patch.items():
        if key == "$patch" or key == "$retainKeys" or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(target.get(field), list) and isinstance(value, list):
                target[field] = [v for v in target[field] if v not in value]
            continue
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            if value.get("$patch") == "delete":
                target.pop(key, None)
            else:
                cur = target.get(key)
                target[key] = _smp_map(cur if isinstance(cur, dict) else {}, value)
        elif isinstance(value, list):
            target[key] = _smp_list(key, target.get(key), value)
        else:
            target[key] = value
    return target


def _smp_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    current = current if isinstance(current, list) else []
    if any(isinstance(p, dict) and p.get("$patch") == "replace" and len(p) == 1 for p in patch):
        return [p for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
    if field in _SET_LISTS:
        return current + [p for p in patch if p not in current]
    key = _MERGE_KEYS.get(field)
    if key is None or not all(isinstance(p, dict) for p in patch):
        return [_strip(p) for p in patch]
    if field == "ports" and any("containerPort" not in p and "port" in p for p in patch):
        key = "port"  # a Service's ports merge on `port`
    out = list(current)
    for item in patch:
        if key not in item:
            raise PatchError(f"{field}: every item needs its merge key {key!r}")
        idx = next((i for i, c in enumerate(out) if isinstance(c, dict) and c.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
        elif idx is None:
            out.append(_strip(item))
        else:
            out[idx] = _smp_map(out[idx], item)
    return out


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
