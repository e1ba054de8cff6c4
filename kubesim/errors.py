"""API errors as Kubernetes Status objects, with the reasons and messages the API server uses."""

from __future__ import annotations

from typing import Any

from kubesim.resources import ResourceType

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An error answer; `status()` is its body."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def qualified(rt: ResourceType) -> str:
    """`workloads.kueue.x-k8s.io`, or `pods` for the core group, as in API server messages."""
    return rt.key


def _details(rt: ResourceType, name: str, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "kind": rt.plural}
    if rt.group:
        d["group"] = rt.group
    d.update(extra)
    return d


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, f'{qualified(rt)} "{name}" not found', details=_details(rt, name))


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(409, f'{qualified(rt)} "{name}" already exists', reason="AlreadyExists", details=_details(rt, name))


def conflict(rt: ResourceType, name: str, why: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409, f'Operation cannot be fulfilled on {qualified(rt)} "{name}": {why}', details=_details(rt, name)
    )


def invalid(rt: ResourceType, name: str, field: str, value: Any, detail: str) -> ApiError:
    cause = {"reason": "FieldValueInvalid", "message": f"Invalid value: {value!r}: {detail}", "field": field}
    what = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    return ApiError(
        422,
        f'{what} "{name}" is invalid: {field}: Invalid value: {value!r}: {detail}',
        details=_details(rt, name, causes=[cause]),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def gone(message: str) -> ApiError:
    return ApiError(410, message, reason="Expired")


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(405, message)


def success(rt: ResourceType, name: str, uid: str) -> dict[str, Any]:
    """The Status a delete answers with when the object is gone at once (built-in kinds)."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": _details(rt, name, uid=uid),
    }
