"""core/v1 Event: what kq records on Workloads and ClusterQueues for users (`kubectl describe`,
`kq describe`), written by the watcher only (kq.messages.RecordEvent)."""

from __future__ import annotations

from typing import Literal

from kq.api.meta import K8sStruct, ObjectMeta

__all__ = ["Event", "EventSource", "ObjectReference"]

EventType = Literal["Normal", "Warning"]


class ObjectReference(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""


class EventSource(K8sStruct, frozen=True, kw_only=True):
    component: str = ""
    host: str = ""


class Event(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    involved_object: ObjectReference = ObjectReference()
    reason: str = ""
    message: str = ""
    type: str = "Normal"
    count: int = 0
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    source: EventSource = EventSource()
    action: str = ""
    reporting_component: str = ""
    reporting_instance: str = ""
