"""Overlapping command batches (the consumer pipelines them): commands for one object still
run in stream order, and a command waiting behind a retrying one is retried with it."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import aiohttp
import msgspec
import pytest
from support.kubesim_fixtures import SimControl, SimSpec
from support.wait import eventually
from support.watcher_harness import create, read_typed

from kq import subjects
from kq.api.kueue import Admission, ClusterQueueStatus, LocalQueueStatus, PodSetAssignment, Workload
from kq.api.meta import find_condition
from kq.kube import KubeClient
from kq.messages import (
    AdmitWorkload,
    Command,
    CommandOutcome,
    EventNote,
    EvictWorkload,
    RecordEvent,
    SetClusterQueueStatus,
    SetLocalQueueStatus,
    SetWorkloadPending,
    command_kind,
)
from kq.runtime import Bus, Delivery, TemporaryError, encode_payload
from kubesim.server import KubeSim
from services.watcher.core import workload_status as ws
from services.watcher.handlers import CommandExecutor
from services.watcher.objects import ClusterObjects
from services.watcher.write_slots import WriteSlots

pytestmark = pytest.mark.timeout(60)
C = "c1"
KUBESIM = SimSpec(seed=5)
ADMISSION = Admission(cluster_queue="cq", pod_set_assignments=(
    PodSetAssignment(name="main", flavors={"cpu": "f1"}, resource_usage={"cpu": "1"}, count=1),))


@pytest.fixture
async def world(kube: KubeClient) -> Workload:
    await create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    return await create(kube, {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w1", "namespace": "demo"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}}}]}})


def delivery(cmd: Command, seq: int) -> Delivery:
    return Delivery(subject=subjects.command_subject(C, command_kind(cmd)), data=encode_payload(cmd), headers={},
                    stream=subjects.COMMANDS_STREAM, consumer="test", stream_seq=seq, consumer_seq=seq,
                    deliveries=1, pending=0, timestamp_ns=0, reply="")


def commands(wl: Workload) -> tuple[AdmitWorkload, EvictWorkload]:
    common: dict[str, Any] = {"cluster": C, "writer": "admission", "epoch": 0, "namespace": "demo", "name": "w1",
              "uid": wl.metadata.uid}
    return (AdmitWorkload(id="admit", admission=ADMISSION, **common),
            EvictWorkload(id="evict", reason="Preempted", message="by a test", **common))


def count_patches(kube: KubeClient) -> list[str]:
    """The kinds of the API's PATCHes from now on, in order."""
    patches: list[str] = []
    real_patch = kube.patch

    async def patch(kind: str, *args: Any, **kw: Any) -> bytes:
        patches.append(kind)
        return await real_patch(kind, *args, **kw)

    kube.patch = patch  # type: ignore[method-assign]  # the API writes, counted
    return patches


async def test_a_later_batch_waits_for_the_same_objects_earlier_batch(bus: Bus, sim: KubeSim, kube: KubeClient,
                                                                      world: Workload) -> None:
    admit, evict = commands(world)
    ex = CommandExecutor(bus, C, kube, ClusterObjects(C), concurrency=8, max_replans=10)
    async with aiohttp.ClientSession() as s:  # slow the first write down: the evict arrives meanwhile
        await SimControl(s, sim.url).fault(C, {"type": "errors", "code": 409, "count": 3, "verbs": ["patch"],
                                               "resources": ["workloads/status"]})
    first = asyncio.create_task(ex.handle_batch([delivery(admit, 1)]))
    await asyncio.sleep(0)  # the first batch has taken its place in the object's queue
    second = await ex.handle_batch([delivery(evict, 2)])
    assert await first == [None] and second == [None]
    wl = await read_typed(kube, "workload", "demo", "w1")
    # In stream order: admitted, then evicted. Had the evict overtaken, it would have found
    # nothing to evict and the admit would have won.
    assert ws.is_evicted(wl), [c.type for c in wl.status.conditions]


async def test_a_later_batch_is_retried_behind_a_retrying_command(bus: Bus, kube: KubeClient, world: Workload) -> None:
    admit, evict = commands(world)
    ex = CommandExecutor(bus, C, kube, ClusterObjects(C), concurrency=8, max_replans=10)
    gate = asyncio.Event()
    real_decide = ex._decide

    blocked = asyncio.Event()

    async def failing_admit(cmd, max_epoch):
        if cmd.id == "admit":
            blocked.set()
            await gate.wait()
            raise TemporaryError("the API server is struggling")
        return await real_decide(cmd, max_epoch)

    ex._decide = failing_admit  # type: ignore[method-assign]  # a fault injected into the executor
    first = asyncio.create_task(ex.handle_batch([delivery(admit, 1)]))
    second = asyncio.create_task(ex.handle_batch([delivery(evict, 2)]))
    await asyncio.wait_for(blocked.wait(), 5)  # the admit is being applied, and held
    done, _ = await asyncio.wait({second}, timeout=0.05)  # a bounded look: it must not overtake
    assert not done  # waiting behind the admit
    gate.set()
    (r1,), (r2,) = await first, await second
    assert isinstance(r1, TemporaryError) and isinstance(r2, TemporaryError)
    wl = await read_typed(kube, "workload", "demo", "w1")
    assert not ws.is_evicted(wl) and wl.metadata.resource_version == world.metadata.resource_version


# --- a queue's status: only the newest waiting command is written ---


def status_command(id: str, pending: int, epoch: int = 0, writer: str = "admission") -> SetClusterQueueStatus:
    return SetClusterQueueStatus(id=id, cluster=C, writer=writer, epoch=epoch, name="cq",
                                 status=ClusterQueueStatus(pending_workloads=pending))


async def executor_reporting(bus: Bus, kube: KubeClient) -> tuple[CommandExecutor, dict[str, CommandOutcome]]:
    await create(kube, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
                        "spec": {"namespaceSelector": {}}})
    ex = CommandExecutor(bus, C, kube, ClusterObjects(C), concurrency=8, max_replans=10)
    reported: dict[str, CommandOutcome] = {}
    real_report = ex._report

    async def report(done: list[tuple[Command, CommandOutcome]]) -> None:
        await real_report(done)
        reported.update((cmd.id, out) for cmd, out in done)

    ex._report = report  # type: ignore[method-assign]  # the outcomes, as published
    return ex, reported


async def test_a_queue_status_superseded_by_a_newer_one_is_not_written(bus: Bus, kube: KubeClient) -> None:
    ex, reported = await executor_reporting(bus, kube)
    before = await read_typed(kube, "clusterqueue", None, "cq")
    # s1 and s2 in one batch; s3 arrives while they wait behind a slow first write.
    started, held = asyncio.Event(), asyncio.Event()
    real_decide = ex._decide

    async def slow(cmd: Command, max_epoch: int) -> CommandOutcome:
        if cmd.id == "s0":
            started.set()
            await held.wait()
        return await real_decide(cmd, max_epoch)

    ex._decide = slow  # type: ignore[method-assign]  # the first write held until the others arrived
    first = asyncio.create_task(ex.handle_batch([delivery(status_command("s0", 1), 1)]))
    await asyncio.wait_for(started.wait(), 5)
    second = asyncio.create_task(ex.handle_batch([delivery(status_command("s1", 2), 2),
                                                  delivery(status_command("s2", 3), 3)]))
    third = asyncio.create_task(ex.handle_batch([delivery(status_command("s3", 4), 4)]))
    await asyncio.sleep(0)
    held.set()
    assert await first == [None] and await second == [None, None] and await third == [None]
    assert {i: (o.applied, o.reason) for i, o in reported.items()} == {
        "s0": (True, ""), "s1": (True, "Superseded"), "s2": (True, "Superseded"), "s3": (True, "")}
    cq = await read_typed(kube, "clusterqueue", None, "cq")
    assert cq.status.pending_workloads == 4
    assert int(cq.metadata.resource_version) == int(before.metadata.resource_version) + 2  # s0 and s3 only


async def test_a_status_is_not_superseded_by_another_writer_nor_when_its_epoch_is_stale(
        bus: Bus, kube: KubeClient) -> None:
    ex, reported = await executor_reporting(bus, kube)
    assert await ex.handle_batch([
        delivery(status_command("a1", 1, epoch=1), 1),
        delivery(status_command("b1", 2, writer="other"), 2),  # another writer's newer one: a1 still written
    ]) == [None, None]
    assert await ex.handle_batch([
        delivery(status_command("a0", 3, epoch=0), 3),  # stale: refused, though a newer one follows
        delivery(status_command("a2", 4, epoch=1), 4),
    ]) == [None, None]
    assert {i: (o.applied, o.reason) for i, o in reported.items()} == {
        "a1": (True, ""), "b1": (True, ""), "a0": (False, "StaleEpoch"), "a2": (True, "")}


async def test_a_pending_reason_superseded_by_a_newer_one_is_not_written(bus: Bus, kube: KubeClient,
                                                                         world: Workload) -> None:
    ex, reported = await executor_reporting(bus, kube)
    common: dict[str, Any] = {"cluster": C, "writer": "admission", "epoch": 0, "namespace": "demo", "name": "w1",
                              "uid": world.metadata.uid, "reason": "Pending"}
    older = SetWorkloadPending(id="p1", message="5 more needed", **common)
    newer = SetWorkloadPending(id="p2", message="2 more needed", **common)
    patches = count_patches(kube)
    assert await ex.handle_batch([delivery(older, 1), delivery(newer, 2)]) == [None, None]
    assert patches == ["workload"]
    assert {i: (o.applied, o.reason) for i, o in reported.items()} == {"p1": (True, "Superseded"), "p2": (True, "")}
    wl = await read_typed(kube, "workload", "demo", "w1")
    cond = find_condition(wl.status.conditions, "QuotaReserved")
    assert cond is not None and (cond.status, cond.message) == ("False", "2 more needed")


# --- what holds or frees quota goes before what only reports ---


async def test_a_pending_reason_followed_by_the_admission_is_not_written(bus: Bus, kube: KubeClient,
                                                                        world: Workload) -> None:
    ex, reported = await executor_reporting(bus, kube)
    admit, _ = commands(world)
    pending = SetWorkloadPending(id="p1", cluster=C, writer="admission", epoch=0, namespace="demo", name="w1",
                                 uid=world.metadata.uid, reason="Pending", message="5 more needed")
    other_writer = SetWorkloadPending(id="p0", cluster=C, writer="other", epoch=0, namespace="demo", name="w1",
                                      uid=world.metadata.uid, reason="Pending", message="not ours")
    patches = count_patches(kube)
    assert await ex.handle_batch([delivery(other_writer, 1), delivery(pending, 2), delivery(admit, 3)]) == [None] * 3
    assert {i: (o.applied, o.reason) for i, o in reported.items()} == {
        "p0": (True, ""), "p1": (True, "Superseded"), "admit": (True, "")}
    assert patches == ["workload", "workload"]  # another writer's reason, then the admission
    wl = await read_typed(kube, "workload", "demo", "w1")
    assert ws.has_quota_reservation(wl)


async def test_an_admission_waiting_for_a_write_slot_goes_before_a_queue_status(bus: Bus, kube: KubeClient,
                                                                                world: Workload) -> None:
    await create(kube, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
                        "spec": {"namespaceSelector": {}}})
    ex = CommandExecutor(bus, C, kube, ClusterObjects(C), concurrency=1, max_replans=10)
    admit, _ = commands(world)
    started, held = asyncio.Event(), asyncio.Event()
    order: list[str] = []
    real_decide = ex._decide

    async def traced(cmd: Command, max_epoch: int) -> CommandOutcome:
        order.append(cmd.id)
        if cmd.id == "s0":
            started.set()
            await held.wait()
        return await real_decide(cmd, max_epoch)

    ex._decide = traced  # type: ignore[method-assign]  # the one write slot held until both others wait
    first = asyncio.create_task(ex.handle_batch([delivery(status_command("s0", 1), 1)]))
    await asyncio.wait_for(started.wait(), 5)
    other_cq = SetLocalQueueStatus(id="l1", cluster=C, writer="admission", epoch=0, namespace="demo", name="lq",
                                   status=LocalQueueStatus(pending_workloads=1))
    second = asyncio.create_task(ex.handle_batch([delivery(other_cq, 2)]))
    third = asyncio.create_task(ex.handle_batch([delivery(admit, 3)]))
    await eventually(lambda: ex._slots.waiting() == (1, 1), timeout=5.0,
                     what="the admission and the queue status both waiting for the one write slot")
    assert order == ["s0"]
    held.set()
    await asyncio.gather(first, second, third)
    assert order == ["s0", "admit", "l1"]


async def test_an_admissions_events_do_not_hold_its_outcome(bus: Bus, kube: KubeClient, world: Workload) -> None:
    ex, reported = await executor_reporting(bus, kube)
    admit, _ = commands(world)
    admit = msgspec.structs.replace(admit, events=(
        EventNote(event_type="Normal", reason="QuotaReserved", message="Quota reserved", at="2026-01-01T00:00:00Z"),))
    held, recording = asyncio.Event(), asyncio.Event()
    recorded: list[str] = []
    real_record = ex.events.record_note

    async def slow_record(cmd: RecordEvent) -> tuple[bool, str]:
        recording.set()
        await held.wait()
        recorded.append(cmd.reason)
        return await real_record(cmd)

    ex.events.record_note = slow_record  # type: ignore[method-assign]  # the Event write held
    assert await asyncio.wait_for(ex.handle_batch([delivery(admit, 1)]), 10) == [None]
    assert reported["admit"].applied and recorded == []  # the outcome is out, the Event not yet written
    await asyncio.wait_for(recording.wait(), 5)
    held.set()

    async def written() -> bool:
        items, _ = await kube.list("event", namespace="demo")
        return len(items) == 1

    await eventually(written, timeout=10, what="the QuotaReserved Event")
    assert recorded == ["QuotaReserved"]


async def test_a_pending_reason_waiting_for_a_slot_makes_way_for_its_admission(bus: Bus, kube: KubeClient,
                                                                               world: Workload) -> None:
    """A workload's pending reason waits for a background write slot when its admission arrives:
    the reason, replaced by the admission, goes on at once without a slot and is not written, and
    the admission takes the next slot, before the reports that were ahead of the reason."""
    ex, reported = await executor_reporting(bus, kube)
    ex._slots = WriteSlots(1)
    admit, _ = commands(world)
    pending = SetWorkloadPending(id="p1", cluster=C, writer="admission", epoch=0, namespace="demo", name="w1",
                                 uid=world.metadata.uid, reason="Pending", message="5 more needed")
    others = [SetLocalQueueStatus(id=f"l{i}", cluster=C, writer="admission", epoch=0, namespace="demo", name=f"lq{i}",
                                  status=LocalQueueStatus(pending_workloads=1)) for i in (1, 2)]
    started = {"s0": asyncio.Event(), "l1": asyncio.Event()}
    held = {"s0": asyncio.Event(), "l1": asyncio.Event()}
    order: list[str] = []
    real_decide = ex._decide

    async def traced(cmd: Command, max_epoch: int) -> CommandOutcome:
        order.append(cmd.id)
        if cmd.id in held:
            started[cmd.id].set()
            await held[cmd.id].wait()
        return await real_decide(cmd, max_epoch)

    ex._decide = traced  # type: ignore[method-assign]  # the one write slot held while the others line up
    batches = [asyncio.create_task(ex.handle_batch([delivery(status_command("s0", 1), 1)]))]
    await asyncio.wait_for(started["s0"].wait(), 5)
    reports: list[Command] = [*others, pending]
    for seq, cmd in enumerate(reports, start=2):  # each waits for the slot before the next comes
        batches.append(asyncio.create_task(ex.handle_batch([delivery(cmd, seq)])))
        await eventually(functools.partial(_waiting, ex, (0, seq - 1)), timeout=5.0, what="reports waiting")
    batches.append(asyncio.create_task(ex.handle_batch([delivery(admit, 5)])))
    # the reason is done (superseded, no slot taken) while the one slot is still held
    await eventually(lambda: "p1" in reported and ex._slots.waiting() == (1, 2), timeout=5.0,
                     what="the reason excused and the admission first in line")
    held["s0"].set()
    await asyncio.wait_for(started["l1"].wait(), 5)
    held["l1"].set()
    assert await asyncio.wait_for(asyncio.gather(*batches), 20) == [[None]] * 5
    assert order == ["s0", "admit", "l1", "l2"]
    assert (reported["p1"].applied, reported["p1"].reason) == (True, "Superseded")
    wl = await read_typed(kube, "workload", "demo", "w1")
    assert ws.has_quota_reservation(wl)


def _waiting(ex: CommandExecutor, lines: tuple[int, int]) -> bool:
    return ex._slots.waiting() == lines


async def test_an_admissions_two_events_are_both_written(bus: Bus, kube: KubeClient, world: Workload) -> None:
    """QuotaReserved and Admitted ride on one admission: each becomes its own Event (written side by
    side, one started as a task and the other in the group's own record task)."""
    ex, reported = await executor_reporting(bus, kube)
    admit, _ = commands(world)
    admit = msgspec.structs.replace(admit, events=(
        EventNote(event_type="Normal", reason="QuotaReserved", message="Quota reserved", at="2026-01-01T00:00:00Z"),
        EventNote(event_type="Normal", reason="Admitted", message="Admitted", at="2026-01-01T00:00:00Z")))
    assert await asyncio.wait_for(ex.handle_batch([delivery(admit, 1)]), 10) == [None]
    assert reported["admit"].applied

    async def written() -> bool:
        items, _ = await kube.list("event", namespace="demo")
        return len(items) == 2

    await eventually(written, timeout=10, what="the QuotaReserved and Admitted Events")
    items, _ = await kube.list("event", namespace="demo")
    got = sorted((e["reason"], e["message"], e["involvedObject"]["uid"], e["count"])
                 for e in map(msgspec.json.decode, items))
    assert got == [("Admitted", "Admitted", world.metadata.uid, 1),
                   ("QuotaReserved", "Quota reserved", world.metadata.uid, 1)]
