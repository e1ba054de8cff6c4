"""Admission's mirror look-ahead on a real nats-server: far behind a backlog of new workloads, the
finish of a workload holding quota is applied at once, its quota is counted free once, and the
backlog is still applied in order (handlers.Inputs.ahead over kq.runtime.replay's look-ahead)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec
import pytest
from support.wait import eventually

from kq import subjects
from kq.api import kueue as api
from kq.mirror import record_headers
from kq.runtime import Bus, Delivery, OutMsg
from services.admission.core.model import SchedulerConfig
from services.admission.handlers import Inputs
from services.admission.plan.partition import LostLeadership, Partition

pytestmark = pytest.mark.timeout(60)
C = "c1"
KUEUE = "kueue.x-k8s.io/v1beta2"
T0 = "2023-11-14T22:00:00Z"
ADMISSION = api.Admission(cluster_queue="cq", pod_set_assignments=(
    api.PodSetAssignment(name="main", flavors={"cpu": "default"}, resource_usage={"cpu": "2"}, count=1),))
RESERVED = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": T0}
FINISHED = {"type": "Finished", "status": "True", "reason": "Succeeded", "lastTransitionTime": T0}


def message(kind: str, ns: str, name: str, body: dict[str, Any], rv: int) -> OutMsg:
    meta = {"name": name, "uid": f"uid-{name}", "resourceVersion": str(rv), "generation": 1,
            "creationTimestamp": T0, **({"namespace": ns} if ns else {})}
    return OutMsg(subjects.object_subject(C, kind, ns or None, name), json.dumps({**body, "metadata": meta}).encode(),
                  f"{kind}/{name}@{rv}", headers=record_headers("put", str(rv), f"uid-{name}"))


def workload(name: str, rv: int, cpu: str, status: dict[str, Any] | None = None) -> OutMsg:
    return message("workload", "demo", name, {"apiVersion": KUEUE, "kind": "Workload", "spec": {
        "queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}, "status": status or {}}, rv)


WORLD = [
    message("namespace", "", "demo", {"apiVersion": "v1", "kind": "Namespace"}, 1),
    message("resourceflavor", "", "default", {"apiVersion": KUEUE, "kind": "ResourceFlavor"}, 2),
    message("clusterqueue", "", "cq", {"apiVersion": KUEUE, "kind": "ClusterQueue", "spec": {
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "2"}]}]}]}}, 3),
    message("localqueue", "demo", "lq", {"apiVersion": KUEUE, "kind": "LocalQueue", "spec": {"clusterQueue": "cq"}}, 4),
]


def lost(e: LostLeadership) -> None:
    raise AssertionError(f"lost leadership: {e}")


async def test_a_finish_behind_a_backlog_frees_its_quota_at_once_and_once(bus: Bus) -> None:
    p = Partition(C, 7, SchedulerConfig())
    inputs = Inputs({C: p}, lost)
    a = subjects.object_subject(C, "workload", "demo", "a")
    backlog = [workload(f"b{i:03}", 100 + i, "1") for i in range(600)]
    hold, entered = asyncio.Event(), asyncio.Event()
    applied: list[tuple[str, int]] = []  # (subject, backlog records applied before it)

    async def handler(d: Delivery) -> None:
        if d.subject == backlog[0].subject:
            entered.set()
            await hold.wait()
        await inputs.on_object(d)
        applied.append((d.subject, sum(1 for s, _ in applied if s != a)))

    admitted = {"conditions": [RESERVED], "admission": msgspec.to_builtins(ADMISSION)}
    await bus.publish_many([*WORLD, workload("a", 10, "2", admitted)])
    async with bus.replay(subjects.OBJECTS_STREAM, subjects.object_filter(C), handler, deliver="last_per_subject",
                          batch=2000, ahead=inputs.ahead, ahead_depth=5000) as r:
        await r.wait_caught_up(10)
        p.mark_rebuilt()
        assert p.holds_quota("demo/a")  # a holds all 2 cpu

        await bus.publish_many(backlog)
        await asyncio.wait_for(entered.wait(), 10)  # b000 in hand, the rest behind it

        async def all_sent() -> bool:
            (consumer,) = await bus.js.consumers_info(subjects.OBJECTS_STREAM)
            return consumer.delivered is not None and consumer.delivered.stream_seq >= len(WORLD) + 1 + len(backlog)

        await eventually(all_sent, timeout=10, what="the backlog sent to the replay")
        ack = await bus.publish_many([workload("a", 1000, "2", {**admitted, "conditions": [RESERVED, FINISHED]})])
        hold.set()
        await eventually(lambda: r.last_seq >= ack[0].seq, timeout=20, what="the replay past a's finish")

    ahead = [before for s, before in applied if s == a][1:]  # the first is a's admitted record
    assert len(ahead) == 1 and ahead[0] < len(backlog) - 1  # applied once more, ahead of the backlog's end
    assert r.handled_ahead == 1
    assert "demo/a" not in p.state.reserved and len(p.state.pending) == len(backlog)
    # the 2 cpu a held are free once, not twice: exactly two of the 1-cpu workloads fit
    reserved: list[str] = []
    while p.wants_cycle(0.0):
        out, _ = p.plan([p.cycle(0.0)], 0.0)
        reserved += [s.target for s in out.sent.values() if s.action == "reserve"]
    assert reserved == ["demo/b000", "demo/b001"]
