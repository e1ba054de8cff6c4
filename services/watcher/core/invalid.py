"""Objects written straight into the cluster that kq cannot read: what to say on them. Pure.

`kq apply` refuses a bad object before it is sent; an object written past it (kubectl against an
API server without Kueue's webhooks, another controller) reaches the watcher as it is. The
watcher tells its owner where: a condition on the object's status for the kinds whose status
carries conditions (Active=False for the queues, admission checks and MultiKueue clusters;
QuotaReserved=False/Misconfigured for a Workload, Kueue's reason for an inadmissible one), and a
Warning Event for every other kind (a Job, a ResourceFlavor, a Cohort...). The message names the
field. When the object is fixed, the condition kq set is removed; what else the status says is
left as it was.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from kq.api.fields import normalise_quantities
from kq.api.meta import Condition
from kq.api.registry import decode_object
from services.watcher.core.writes import Skip, Write, patch_write

INVALID_SPEC = "InvalidSpec"  # no Kueue reason: Kueue's webhooks never let such an object in
MISCONFIGURED = "Misconfigured"  # Kueue's QuotaReserved reason for an inadmissible Workload

# kind token -> (condition type, reason) set while the object does not decode
STATUS_CONDITION: dict[str, tuple[str, str]] = {
    "clusterqueue": ("Active", INVALID_SPEC),
    "localqueue": ("Active", INVALID_SPEC),
    "admissioncheck": ("Active", INVALID_SPEC),
    "multikueuecluster": ("Active", INVALID_SPEC),
    "workload": ("QuotaReserved", MISCONFIGURED),
}
_AT = re.compile(r"^(?P<what>.*) - at `\$(?P<path>[^`]*)`$", re.DOTALL)
_NAMED = re.compile(r"(?:unknown|missing required) field `(?P<field>[^`]*)`")
_MAX_MESSAGE = 1024
# Kinds whose quantities (quotas, limits) are checked beyond their shape: "lots" decodes as a
# string, and admission would only drop the object. Only the queue tree's kinds: they are few
# records, where a second decode costs nothing; a Workload's are checked by admission.
_QUANTITIES_CHECKED = frozenset({"clusterqueue", "cohort"})


SpecSeen = tuple[str, int]  # (uid, metadata.generation) of a spec whose quantities were found good


def decode_or_error(kind: str, raw: bytes, spec_good: SpecSeen | None = None) -> tuple[Any | None, str | None]:
    """(the typed object, None) or (None, a message naming the field that does not fit).
    `spec_good`: the spec already checked (every status write of a ClusterQueue comes back on the
    watch; its quantities are not walked again while the generation stays)."""
    try:
        obj = decode_object(kind, raw)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        return None, describe(str(e))
    if kind in _QUANTITIES_CHECKED and (spec_good is None or spec_seen(kind, obj) != spec_good):
        _, errors = normalise_quantities(msgspec.json.decode(raw), type(obj))
        if errors:
            text = "; ".join(str(e) for e in errors)
            return None, text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."
    return obj, None


def spec_seen(kind: str, obj: Any) -> SpecSeen | None:
    """What decode_or_error may skip next time for this object (None: nothing to skip; a server
    that keeps no generation gets every copy checked)."""
    meta = obj.metadata
    if kind not in _QUANTITIES_CHECKED or meta.generation <= 0 or not meta.uid:
        return None
    return meta.uid, meta.generation


def describe(error: str) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.spec.x[0]`" as "spec.x[0]: Expected `int`, got `str`"."""
    m = _AT.match(error)
    path, what = (m["path"].lstrip("."), m["what"]) if m else ("", error)
    named = _NAMED.search(what)
    if named is not None:  # msgspec puts an unknown or missing field in the message, its parent in the path
        path = f"{path}.{named['field']}" if path else named["field"]
    text = f"{path}: {what}" if path else what
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def condition_message(kind: str, error: str) -> str:
    return f"the {kind} cannot be read, kq ignores it until it is fixed: {error}"


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def plan_invalid(kind: str, obj: dict[str, Any], error: str, now: str) -> Write | Skip | None:
    """The status write marking an undecodable object, from its raw JSON; Skip when the condition
    is already there; None for a Workload holding quota, whose QuotaReserved is not this to undo
    (the caller records an Event instead)."""
    cond_type, reason = STATUS_CONDITION[kind]
    meta = _mapping(obj.get("metadata"))
    status = _mapping(obj.get("status"))
    found = status.get("conditions")
    conditions: list[Any] = found if isinstance(found, list) else []
    message = condition_message(kind, error)
    current = next((c for c in conditions if isinstance(c, dict) and c.get("type") == cond_type), None)
    if current is not None:
        if current.get("status") == "False" and current.get("reason") == reason and current.get("message") == message:
            return Skip(reason="AlreadyApplied")
        if kind == "workload" and current.get("status") == "True":
            return None
    wanted = {"type": cond_type, "status": "False", "reason": reason, "message": message,
              "lastTransitionTime": now}
    if isinstance(meta.get("generation"), int):
        wanted["observedGeneration"] = meta["generation"]
    if current is not None and current.get("status") == "False" and isinstance(current.get("lastTransitionTime"), str):
        wanted["lastTransitionTime"] = current["lastTransitionTime"]  # no transition: the status did not change
    kept = [c for c in conditions if c is not current]
    rv = str(meta.get("resourceVersion") or "")
    patch = {"metadata": {"resourceVersion": rv}, "status": {"conditions": [*kept, wanted]}}
    return Write(kind=kind, namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
                 subresource="status", patch=msgspec.json.encode(patch), resource_version=rv,
                 why=f"{kind} does not decode: {error}")


def plan_fixed(kind: str, obj: Any, *, marked: bool) -> Write | None:
    """The status write removing the condition kq set while the object did not decode; None if none.
    InvalidSpec is kq's alone, so it is found again after a restart; a Workload's Misconfigured is
    also admission's (a missing LocalQueue), so it is removed only when this watcher set it (`marked`)."""
    cond_type, reason = STATUS_CONDITION[kind]
    if reason != INVALID_SPEC and not marked:
        return None
    status = getattr(obj, "status", None)
    conditions: tuple[Condition, ...] = getattr(status, "conditions", ()) or ()
    ours = [c for c in conditions if c.type == cond_type and c.reason == reason and c.status == "False"]
    if status is None or not ours:
        return None
    kept = tuple(c for c in conditions if not (c.type == cond_type and c.reason == reason))
    wanted = msgspec.structs.replace(obj, status=msgspec.structs.replace(status, conditions=kept))
    return patch_write(kind, obj, wanted, status=True, why=f"{kind} decodes again")
