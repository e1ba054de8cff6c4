"""The watcher's Event backlog: queuing never waits, Events are written oldest first in the lowest
line of the write slots, and beyond the limit new ones are dropped and counted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from kq.api.events import ObjectReference
from kq.messages import RecordEvent
from services.watcher.event_backlog import EventBacklog
from services.watcher.write_slots import WriteSlots

pytestmark = pytest.mark.timeout(10)


def _event(cmd: str, reason: str) -> RecordEvent:
    return RecordEvent(id=f"{cmd}|{reason}", cluster="c1", writer="admission", epoch=0,
                       involved=ObjectReference(api_version="kueue.x-k8s.io/v1beta2", kind="Workload",
                                                namespace="demo", name=cmd, uid="u"),
                       event_type="Normal", reason=reason, action=reason, message="m", at="2026-01-01T00:00:00Z")


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_queued_without_waiting_written_oldest_first_and_dropped_beyond_the_limit() -> None:
    written: list[list[str]] = []
    gate = asyncio.Event()

    async def write(events: Sequence[RecordEvent]) -> None:
        await gate.wait()
        written.append([e.id for e in events])

    backlog = EventBacklog(write, WriteSlots(1, background_share=0), limit=3, writers=1, cluster="c1")
    backlog.put((_event("w1", "QuotaReserved"), _event("w1", "Admitted")))
    await _settle()  # the writer took w1 and waits on the API
    backlog.put((_event("w2", "QuotaReserved"), _event("w2", "Admitted")))
    backlog.put((_event("w3", "QuotaReserved"), _event("w3", "Admitted")))
    backlog.put((_event("w4", "Preempted"),))
    assert backlog.dropped == 2 and len(backlog) == 3  # w2 and w4 queued; w3's two were too many
    gate.set()
    for _ in range(20):
        await _settle()
    assert written == [["w1|QuotaReserved", "w1|Admitted"], ["w2|QuotaReserved", "w2|Admitted"], ["w4|Preempted"]]
    assert len(backlog) == 0


async def test_events_wait_for_a_free_write_slot() -> None:
    slots = WriteSlots(1, background_share=0)
    written: list[str] = []

    async def write(events: Sequence[RecordEvent]) -> None:
        written.extend(e.id for e in events)

    backlog = EventBacklog(write, slots, limit=10, writers=4, cluster="c1")
    async with slots.slot(urgent=True):
        backlog.put((_event("w1", "QuotaReserved"),))
        await _settle()
        assert written == []  # the one slot is taken by a command's write
    for _ in range(4):
        await _settle()
    assert written == ["w1|QuotaReserved"]
