"""The watcher's Events against kubesim: a repeat is counted on the Event it wrote (kept as the
server's JSON, decoded only then), a redelivered occurrence is not counted twice."""

from __future__ import annotations

import pytest

from kq.api.events import ObjectReference
from kq.api.registry import decode_object
from kq.clock import SYSTEM_CLOCK
from kq.kube import KubeClient
from kq.messages import RecordEvent
from services.watcher.core.events import event_name
from services.watcher.events import EventWriter

pytestmark = pytest.mark.timeout(60)


def occurrence(at: str) -> RecordEvent:
    return RecordEvent(id=f"e|{at}", cluster="c1", writer="admission", epoch=1,
                       involved=ObjectReference(api_version="kueue.x-k8s.io/v1beta2", kind="Workload",
                                                namespace="default", name="w1", uid="u1"),
                       event_type="Warning", reason="Pending", message="no quota", at=at)


async def test_a_repeat_is_counted_on_the_event_written_before(kube: KubeClient) -> None:
    writer = EventWriter(kube, "test", SYSTEM_CLOCK)
    first, again = occurrence("2026-11-24T08:00:00Z"), occurrence("2026-11-24T08:00:05Z")
    applied, reason, rv1 = await writer.record(first)
    assert (applied, reason) == (True, "") and rv1
    gets: list[str] = []
    real_get = kube.get

    async def counted_get(kind: str, namespace: str | None, name: str) -> bytes | None:
        gets.append(name)
        return await real_get(kind, namespace, name)

    kube.get = counted_get  # type: ignore[method-assign]  # the writer knows its Event: no read
    applied, reason, rv2 = await writer.record(again)
    assert (applied, reason) == (True, "") and rv2 != rv1
    assert await writer.record(again) == (True, "AlreadyApplied", rv2)  # redelivered: counted once
    assert gets == []
    raw = await real_get("event", "default", event_name(first))
    assert raw is not None
    ev = decode_object("event", raw)
    assert (ev.count, ev.first_timestamp, ev.last_timestamp) == (2, first.at, again.at)
