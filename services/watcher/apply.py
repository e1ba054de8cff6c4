"""Carry out one write a core decided, against the API server: the only place cores' Actions meet HTTP.

Errors stay typed (kq.kube): the callers decide what a Conflict or NotFound means
for them (re-read and re-plan; give up; retry later).
"""

from __future__ import annotations

from typing import Any

import msgspec

from kq.api.registry import decode_object
from kq.kube import KubeClient
from kq.obs import TRACEPARENT_ANNOTATION, current_traceparent
from services.watcher.core.writes import Action, Create, Delete, Write


async def apply_action(client: KubeClient, action: Action) -> Any | None:
    """Apply; returns the object as the server stored it (None after a delete)."""
    raw = await apply_raw(client, action)
    return None if raw is None else decode_object(action.kind, raw)


async def apply_raw(client: KubeClient, action: Action) -> bytes | None:
    """Apply; returns the server's JSON of the object (None after a delete), for a caller that
    decodes it only if it needs it."""
    ns = action.namespace or None
    match action:
        case Write():
            return await client.patch(action.kind, ns, action.name, action.patch, patch_type=action.patch_type,
                                      subresource=action.subresource)
        case Create():
            return await client.create(action.kind, ns, action.body)
        case Delete():
            await client.delete(action.kind, ns, action.name,
                                preconditions={"uid": action.uid, "resourceVersion": action.resource_version})
            return None
        case _:
            raise TypeError(f"not an action: {action!r}")


async def read(client: KubeClient, kind: str, namespace: str, name: str) -> Any | None:
    raw = await client.get(kind, namespace or None, name)
    return None if raw is None else decode_object(kind, raw)


def with_trace(action: Action) -> Action:
    """A Workload being created carries the current trace context (kq.obs: one trace per workload)."""
    if not isinstance(action, Create) or action.kind != "workload":
        return action  # (most actions: the trace context is not even looked up)
    tp = current_traceparent()
    if tp is None:
        return action
    body = msgspec.json.decode(action.body)
    body.setdefault("metadata", {}).setdefault("annotations", {})[TRACEPARENT_ANNOTATION] = tp
    return msgspec.structs.replace(action, body=msgspec.json.encode(body))
