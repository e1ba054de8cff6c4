"""Status conditions the way Kubernetes controllers write them."""

from __future__ import annotations

from typing import Any


def set_condition(status: dict[str, Any], ctype: str, value: str, reason: str, message: str, now: str,
                  *, probe: bool = False) -> None:
    """Set one condition; lastTransitionTime moves only when the status value changes."""
    conds: list[dict[str, Any]] = status.setdefault("conditions", [])
    for c in conds:
        if c.get("type") == ctype:
            if c.get("status") != value:
                c["lastTransitionTime"] = now
            c["status"] = value
            c["reason"] = reason
            c["message"] = message
            if probe:
                c["lastProbeTime"] = now
            return
    cond = {"type": ctype, "status": value, "reason": reason, "message": message, "lastTransitionTime": now}
    if probe:
        cond["lastProbeTime"] = now
    conds.append(cond)


def condition_true(obj: Any, ctype: str) -> bool:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype:
            return c.get("status") == "True"
    return False


def condition(obj: Any, ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype:
            return c
    return None
