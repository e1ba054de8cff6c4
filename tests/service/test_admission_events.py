"""Kubernetes Events from the scheduler's decisions, written by the watcher (real nats-server, kubesim,
the admission service and the watcher): what Kueue records on admission, pending and preemption."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest
from service.test_admission_service import (
    FAST,
    KUEUE,
    finish,
    job_doc,
    make_world,
    read_job,
    reserved,
    running_admission,
    workload_doc,
    workload_of_job,
    workloads,
)
from support.wait import eventually
from support.watcher_harness import create, running_watcher

from kq.api.events import Event
from kq.config import NatsConfig
from kq.kube import KubeClient
from kq.runtime import Bus
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(120)
C = "c1"


async def events_of(kube: KubeClient, name: str) -> list[Event]:
    # Bounded: one list of events from kubesim was once seen not to return (not diagnosed yet); a
    # poll that times out is retried by `eventually` rather than hanging the test.
    items, _ = await asyncio.wait_for(kube.list("event", namespace="demo"), timeout=10)
    evs = [msgspec.json.decode(raw, type=Event) for raw in items]
    return sorted((e for e in evs if e.involved_object.name == name), key=lambda e: (e.first_timestamp or "", e.reason))


def summary(evs: list[Event]) -> set[tuple[str, str]]:
    return {(e.type, e.reason) for e in evs}


async def test_admitted_and_pending_workloads_get_kueues_events(bus: Bus, nats_config: NatsConfig, sim: KubeSim,
                                                                kube: KubeClient, tmp_path: Path) -> None:
    await make_world(kube, cpu="1")
    async with running_watcher(bus, sim, tmp_path, [C]), running_admission(nats_config, sim, tmp_path):
        await create(kube, workload_doc("w0"))

        async def admitted() -> list[Event]:
            evs = await events_of(kube, "w0")
            assert summary(evs) == {("Normal", "QuotaReserved"), ("Normal", "Admitted")}, evs
            return evs

        evs = await eventually(admitted, timeout=30, what="QuotaReserved and Admitted events on w0")
        by_reason = {e.reason: e for e in evs}
        assert by_reason["Admitted"].message == "Admitted by ClusterQueue cq, wait time since reservation was 0s"
        assert by_reason["QuotaReserved"].message.startswith("Quota reserved in ClusterQueue cq, wait time since queued was ")
        e = by_reason["Admitted"]
        assert (e.involved_object.kind, e.involved_object.api_version, e.involved_object.namespace, e.count,
                e.source.component) == ("Workload", KUEUE, "demo", 1, "kq-watcher")
        assert e.involved_object.uid

        await create(kube, workload_doc("w1"))

        async def pending() -> Event:
            (ev,) = await events_of(kube, "w1")
            assert (ev.type, ev.reason) == ("Warning", "Pending"), ev
            return ev

        ev = await eventually(pending, timeout=30, what="a Pending event on w1")
        assert "insufficient" in ev.message.lower(), ev.message


async def test_a_preemption_is_recorded_on_both_workloads(bus: Bus, nats_config: NatsConfig, sim: KubeSim,
                                                         kube: KubeClient, tmp_path: Path) -> None:
    await make_world(kube, cpu="4", preemption={"withinClusterQueue": "LowerPriority"})
    async with running_watcher(bus, sim, tmp_path, [C]), running_admission(nats_config, sim, tmp_path):
        for name, prio in (("low", 10), ("high", 1000)):
            await create(kube, {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                                "value": prio})
        low = await workload_of_job(kube, await create(kube, job_doc("low", runtime="1h", parallelism=4,
                                                                      priority_class="low")))

        async def low_admitted() -> bool:
            assert ("Normal", "Admitted") in summary(await events_of(kube, low))
            return True

        await eventually(low_admitted, timeout=30, what="low admitted")
        high = await workload_of_job(kube, await create(kube, job_doc("high", runtime="1h", parallelism=4,
                                                                       priority_class="high")))

        async def preempted() -> tuple[list[Event], list[Event]]:
            lows, highs = await events_of(kube, low), await events_of(kube, high)
            assert ("Normal", "Preempted") in summary(lows), lows
            assert ("Normal", "PreemptedWorkload") in summary(highs), highs
            return lows, highs

        lows, highs = await eventually(preempted, timeout=30, what="Preempted and PreemptedWorkload events")
        (p,) = [e for e in lows if e.reason == "Preempted"]
        assert "Preempted to accommodate a workload" in p.message, p.message
        (pw,) = [e for e in highs if e.reason == "PreemptedWorkload"]
        assert pw.message.startswith(f"Preempted workload demo/{low} (UID: ") and "in ClusterQueue cq" in pw.message

        async def high_running() -> bool:  # leave once the jobs settled, as the scheduler's own preemption test does
            assert (await read_job(kube, "high")).spec.suspend is False
            assert (await read_job(kube, "low")).spec.suspend is True
            return True

        await eventually(high_running, timeout=30, what="high running, low suspended")


async def test_no_events_when_turned_off(bus: Bus, nats_config: NatsConfig, sim: KubeSim, kube: KubeClient,
                                         tmp_path: Path) -> None:
    quiet = msgspec.structs.replace(FAST, term=msgspec.structs.replace(FAST.term, record_events=False))
    await make_world(kube, cpu="1")
    async with running_watcher(bus, sim, tmp_path, [C]), running_admission(nats_config, sim, tmp_path,
                                                                           settings=quiet):
        await create(kube, workload_doc("w0"))
        await create(kube, workload_doc("w1"))

        async def first_round() -> dict:
            wls = await workloads(kube)
            assert reserved(wls["w0"]) and not reserved(wls["w1"]) and wls["w1"].status.conditions, wls
            return wls

        wls = await eventually(first_round, timeout=30, what="w0 admitted, w1 pending")
        await finish(kube, wls["w0"])

        async def second_round() -> bool:
            assert reserved((await workloads(kube))["w1"])
            return True

        # Commands of the second round come after the first's on KQ_CMD: had events been asked for, the
        # first round's would be written by now.
        await eventually(second_round, timeout=30, what="w1 admitted after w0 finished")
        items, _ = await kube.list("event", namespace="demo")
        assert items == []
