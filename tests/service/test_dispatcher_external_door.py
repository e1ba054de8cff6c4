"""The bus door for external dispatchers (services/dispatcher/external.py) on a real nats-server:
a workload waiting for a nomination is published once per wait, however often the manager
Workload changes meanwhile (each publication looked like a new wait to a dispatcher that widens on
it); the end of a published wait goes out on kq.v1.mk.settled.*; a new reservation is a new wait."""

from __future__ import annotations

import json
from typing import Any

from msgspec.structs import replace
from nats.js.api import ConsumerConfig
from unit.multikueue.mk_builders import cond, local

from kq import subjects
from kq.api import constants as k
from kq.api.kueue import SchedulingStats, Workload, WorkloadSchedulingStatsEviction
from kq.runtime import Bus
from services.dispatcher.external import ExternalDoor

WORKERS = ["worker-1", "worker-2"]


def _rv(wl: Workload, rv: str) -> Workload:
    return replace(wl, metadata=replace(wl.metadata, resource_version=rv))


async def _published(bus: Bus) -> list[tuple[str, dict[str, Any]]]:
    """Everything on KQ_MK, in order: (verb, body)."""
    sub = await bus.js.pull_subscribe("", stream=subjects.MK_STREAM, config=ConsumerConfig(filter_subject="kq.v1.mk.>"))
    info = await bus.js.stream_info(subjects.MK_STREAM)
    msgs = await sub.fetch(info.state.messages, timeout=5) if info.state.messages else []
    await sub.unsubscribe()
    return [(m.subject.split(".")[3], json.loads(m.data)) for m in msgs]


async def test_one_pending_message_per_wait_then_settled_where_it_was_admitted(bus: Bus) -> None:
    door = ExternalDoor(bus, None)  # type: ignore[arg-type]  # observing needs no term
    wl = local()
    for rv in ("7", "8", "9"):  # the manager Workload changes while the nomination travels
        await door.observe(_rv(wl, rv), "mk", True, WORKERS)
    nominated = local(nominated=("worker-2",))
    await door.observe(nominated, "mk", False, WORKERS)  # nominated, the copy not admitted yet
    admitted = local(state="Ready", cluster="worker-2")
    await door.observe(admitted, "mk", False, WORKERS)
    await door.observe(_rv(admitted, "12"), "mk", False, WORKERS)  # later changes: nothing more
    got = await _published(bus)
    assert [verb for verb, _ in got] == ["pending", "settled"]
    assert got[0][1]["clusters"] == WORKERS
    assert got[1][1] == {"namespace": "ns", "name": "job-j1-abc", "uid": "wl-uid", "cluster": "worker-2"}


async def test_a_wait_ended_by_eviction_is_settled_and_the_next_reservation_is_a_new_wait(bus: Bus) -> None:
    door = ExternalDoor(bus, None)  # type: ignore[arg-type]
    await door.observe(local(), "mk", True, WORKERS)
    evicted = local(conds=(cond(k.WORKLOAD_EVICTED, reason="Preempted"),))
    await door.observe(evicted, "mk", False, WORKERS)
    again = local()
    again = replace(again, status=replace(again.status, conditions=(
        cond(k.WORKLOAD_QUOTA_RESERVED, at="2026-01-01T00:05:00Z"),)))
    await door.observe(again, "mk", True, WORKERS)
    await door.observe(again, "mk", True, ["worker-1"])  # a worker lost while waiting: the dispatcher should know
    await door.deleted("ns", "job-j1-abc", "wl-uid")
    got = await _published(bus)
    assert [verb for verb, _ in got] == ["pending", "settled", "pending", "pending", "settled"]
    assert got[1][1]["cluster"] == "" and got[3][1]["clusters"] == ["worker-1"]


async def test_evicted_and_reserved_again_within_the_same_second_is_a_new_wait(bus: Bus) -> None:
    """Condition times are whole seconds: the eviction count tells the two reservations apart (else
    the second wait would never be published, and nothing would nominate for it)."""
    door = ExternalDoor(bus, None)  # type: ignore[arg-type]
    first = local()
    await door.observe(first, "mk", True, WORKERS)
    await door.observe(local(conds=(cond(k.WORKLOAD_EVICTED, reason="Preempted"),)), "mk", False, WORKERS)
    stats = SchedulingStats(evictions=(WorkloadSchedulingStatsEviction(reason="Preempted", count=1),))
    await door.observe(replace(first, status=replace(first.status, scheduling_stats=stats)), "mk", True, WORKERS)
    assert [verb for verb, _ in await _published(bus)] == ["pending", "settled", "pending"]


async def test_a_restarted_dispatcher_publishing_the_same_wait_again_is_dropped_by_the_bus(bus: Bus) -> None:
    for _ in range(2):  # two terms of the service, each with its own memory
        await ExternalDoor(bus, None).observe(local(), "mk", True, WORKERS)  # type: ignore[arg-type]
    assert [verb for verb, _ in await _published(bus)] == ["pending"]
