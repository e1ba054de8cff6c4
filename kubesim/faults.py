"""Injected faults of one cluster's API: error answers and latency.

Stored faults apply to API requests only (never to the in-process controllers).
`cut-watches` and `expire-history` are one-shot actions done by the control API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VERBS = frozenset(("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"))
ERROR_CODES = frozenset((409, 429, 500, 503))


class FaultError(ValueError):
    """A malformed fault request; the message names the field."""


@dataclass(slots=True)
class ErrorFault:
    code: int
    remaining: int
    verbs: frozenset[str] | None  # None: every verb
    resources: frozenset[str] | None  # None: every resource; entries: plural, plural.group or plural/subresource
    retry_after_s: int

    def matches(self, verb: str, names: tuple[str, ...]) -> bool:
        if self.verbs is not None and verb not in self.verbs:
            return False
        return self.resources is None or any(n in self.resources for n in names)


class Faults:
    def __init__(self) -> None:
        self.latency_ms = 0
        self.errors: list[ErrorFault] = []

    def clear(self) -> None:
        self.latency_ms = 0
        self.errors.clear()

    def describe(self) -> dict[str, Any]:
        return {
            "latencyMs": self.latency_ms,
            "errors": [
                {"code": f.code, "remaining": f.remaining, "verbs": sorted(f.verbs) if f.verbs else None,
                 "resources": sorted(f.resources) if f.resources else None}
                for f in self.errors
            ],
        }

    def add_errors(self, spec: dict[str, Any]) -> None:
        code = spec.get("code")
        if code not in ERROR_CODES:
            raise FaultError(f"errors.code: want one of {sorted(ERROR_CODES)}, got {code!r}")
        count = spec.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise FaultError(f"errors.count: want a positive integer, got {count!r}")
        verbs = _names(spec, "verbs")
        if verbs is not None and not verbs <= VERBS:
            raise FaultError(f"errors.verbs: unknown verb(s) {sorted(verbs - VERBS)}; known: {sorted(VERBS)}")
        resources = _names(spec, "resources")
        retry = spec.get("retryAfterSeconds", 1)
        if not isinstance(retry, int) or isinstance(retry, bool) or retry < 0:
            raise FaultError(f"errors.retryAfterSeconds: want a non-negative integer, got {retry!r}")
        self.errors.append(ErrorFault(code, count, verbs, resources, retry))

    def set_latency(self, spec: dict[str, Any]) -> None:
        ms = spec.get("ms")
        if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
            raise FaultError(f"latency.ms: want a non-negative integer, got {ms!r}")
        self.latency_ms = ms

    def take_error(self, verb: str, names: tuple[str, ...]) -> ErrorFault | None:
        """The first error fault matching this request, used up by one."""
        for f in self.errors:
            if f.matches(verb, names):
                f.remaining -= 1
                if f.remaining <= 0:
                    self.errors.remove(f)
                return f
        return None


def _names(spec: dict[str, Any], field: str) -> frozenset[str] | None:
    value = spec.get(field)
    if value is None or value == []:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise FaultError(f"errors.{field}: want a list of strings, got {value!r}")
    return frozenset(value)
