"""Who is calling: bearer tokens (when a test turns them on) and a log of who called what.

Off by default (every kubeconfig kubesim writes carries the token "kubesim", and anything goes).
With tokens set (control API `PUT /kubesim/clusters/{c}/tokens`), a request without a known
bearer token is answered 401 Unauthorized, as an API server does after a ServiceAccount token
was rotated away. Every API request is logged as (user, apiGroup, resource[/subresource],
verb, namespace), a set, so a test can derive the RBAC a process needs from a run. The user is
the token's user when tokens are on, else the client's User-Agent (its first word).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubesim.errors import ApiError

# (user, apiGroup, resource[/subresource], verb, namespace): a plain tuple, as one is logged per request.
Request = tuple[str, str, str, str, str]


class Authn:
    def __init__(self) -> None:
        self.tokens: dict[str, str] | None = None  # token -> user; None: no checks
        self.requests: set[Request] = set()

    def set_tokens(self, tokens: Mapping[str, str] | None) -> None:
        self.tokens = dict(tokens) if tokens is not None else None

    def user(self, headers: Mapping[str, str]) -> str:
        """The caller; raises 401 when tokens are on and the request has no known one."""
        return self.user_of(headers.get("User-Agent"), headers.get("Authorization"))

    def user_of(self, agent: str | None, authorization: str | None) -> str:
        """user() from the two header values (the connection front keeps headers in a plain dict)."""
        if self.tokens is None:
            return (agent or "unknown").split(" ", 1)[0]
        auth = authorization or ""
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        user = self.tokens.get(token)
        if user is None:
            raise ApiError(401, "Unauthorized", reason="Unauthorized")
        return user

    def record(self, user: str, group: str, resource: str, verb: str, namespace: str) -> None:
        self.requests.add((user, group, resource, verb, namespace))
