"""/metrics, /livez and /readyz of a running admission service (kq.runtime.serve, real nats-server,
kubesim and the real watcher): Kueue's metric names, labels and values after it admitted and preempted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from service.test_admission_service import FAST, KUEUE, job_doc, make_world, reserved, workload_doc, workloads
from support.wait import eventually
from support.watcher_harness import cluster_configs, create, running_watcher

from kq.config import Config, HttpConfig, NatsConfig
from kq.kube import KubeClient
from kq.runtime import Bus, serve, wait_healthy
from kubesim.server import KubeSim
from services.admission.service import main

pytestmark = pytest.mark.timeout(120)
C = "c1"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@asynccontextmanager
async def served_admission(bus: Bus, nats: NatsConfig, sim: KubeSim, tmp: Path) -> AsyncIterator[str]:
    """The admission service through serve() with its HTTP endpoint on a free port; yields its base URL."""
    config = Config(nats=nats, clusters=cluster_configs(sim, tmp, [C]), http=HttpConfig(port=0, host="127.0.0.1"))
    stop = asyncio.Event()
    task = asyncio.create_task(serve("admission", lambda b, c: main(b, c, FAST), config, ready_when_started=False,
                                     stop=stop))
    try:
        st = await wait_healthy(bus.nc, "admission", timeout=30)
        assert st.http_port, st
        yield f"http://127.0.0.1:{st.http_port}"
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0


async def scrape(base: str) -> Samples:
    async with aiohttp.ClientSession() as s, s.get(f"{base}/metrics") as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=")
        text = await r.text()
    return {(smp.name, frozenset(smp.labels.items())): smp.value
            for fam in text_string_to_metric_families(text) for smp in fam.samples}


def value(samples: Samples, metric: str, /, **labels: str) -> float:
    key = (metric, frozenset({"replica_role": "leader", **labels}.items()))
    assert key in samples, f"no {metric}{labels}; have {sorted(k for k in samples if k[0] == metric)}"
    return samples[key]


async def probe(base: str, path: str) -> int:
    async with aiohttp.ClientSession() as s, s.get(f"{base}{path}") as r:
        return r.status


async def test_metrics_after_admitting(bus: Bus, nats_config: NatsConfig, sim: KubeSim, kube: KubeClient,
                                       tmp_path: Path) -> None:
    await make_world(kube, cpu="2")
    async with running_watcher(bus, sim, tmp_path, [C]), served_admission(bus, nats_config, sim, tmp_path) as base:
        assert (await probe(base, "/livez"), await probe(base, "/readyz")) == (200, 200)
        for i in range(3):
            await create(kube, workload_doc(f"w{i}"))

        async def two_admitted() -> bool:
            assert sum(reserved(w) for w in (await workloads(kube)).values()) == 2
            return True

        await eventually(two_admitted, timeout=30, what="2 of 3 workloads admitted")
        cq = {"cluster_queue": "cq"}
        fr = {"cohort": "", "cluster_queue": "cq", "flavor": "pool-a", "resource": "cpu"}
        lq = {"name": "lq", "namespace": "demo"}

        async def reported() -> Samples:
            m = await scrape(base)
            assert value(m, "kueue_admitted_workloads_total", **cq, priority_class="") == 2
            assert value(m, "kueue_quota_reserved_workloads_total", **cq, priority_class="") == 2
            assert value(m, "kueue_local_queue_admitted_workloads_total", **lq, priority_class="") == 2
            assert value(m, "kueue_admission_wait_time_seconds_count", **cq, priority_class="") == 2
            assert value(m, "kueue_local_queue_quota_reserved_wait_time_seconds_count", **lq, priority_class="") == 2
            assert value(m, "kueue_reserving_active_workloads", **cq) == 2
            assert value(m, "kueue_admitted_active_workloads", **cq) == 2
            pending = {s: value(m, "kueue_pending_workloads", **cq, status=s) for s in ("active", "inadmissible")}
            assert sum(pending.values()) == 1, pending
            assert value(m, "kueue_local_queue_pending_workloads", **lq, status="active") \
                + value(m, "kueue_local_queue_pending_workloads", **lq, status="inadmissible") == 1
            assert value(m, "kueue_cluster_queue_resource_reservation", **fr) == 2.0
            assert value(m, "kueue_local_queue_resource_reservation", **lq, flavor="pool-a", resource="cpu") == 2.0
            return m

        m = await eventually(reported, timeout=20, what="admission metrics")
        assert value(m, "kueue_cluster_queue_nominal_quota", **fr) == 2.0
        assert value(m, "kueue_cluster_queue_borrowing_limit", **fr) == float("inf")
        assert value(m, "kueue_cluster_queue_lending_limit", **fr) == float("inf")
        assert (value(m, "kueue_cluster_queue_status", **cq, status="active"),
                value(m, "kueue_cluster_queue_status", **cq, status="pending")) == (1, 0)
        assert value(m, "kueue_local_queue_status", **lq, active="True") == 1
        assert value(m, "kueue_admission_attempts_total", result="success") >= 1
        assert value(m, "kueue_admission_attempt_duration_seconds_count", result="success") >= 1
        assert value(m, "kq_decisions_total", kind="admissions") == 2
        assert value(m, "kq_service_ready") == 1


async def test_metrics_count_preemptions_with_their_reason(bus: Bus, nats_config: NatsConfig, sim: KubeSim,
                                                           kube: KubeClient, tmp_path: Path) -> None:
    await make_world(kube, cpu="4", preemption={"withinClusterQueue": "LowerPriority"})
    async with running_watcher(bus, sim, tmp_path, [C]), served_admission(bus, nats_config, sim, tmp_path) as base:
        for name, prio in (("low", 10), ("high", 1000)):
            await create(kube, {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                                "value": prio})
        await create(kube, job_doc("low", runtime="1h", parallelism=4, priority_class="low"))

        async def low_admitted() -> bool:
            m = await scrape(base)
            assert value(m, "kueue_admitted_workloads_total", cluster_queue="cq", priority_class="low") == 1
            return True

        await eventually(low_admitted, timeout=30, what="low-priority workload admitted")
        await create(kube, job_doc("high", runtime="1h", parallelism=4, priority_class="high"))

        async def preempted() -> bool:
            m = await scrape(base)
            assert value(m, "kueue_preempted_workloads_total", preempting_cluster_queue="cq",
                         reason="InClusterQueue") == 1
            assert value(m, "kueue_evicted_workloads_total", cluster_queue="cq", reason="Preempted",
                         underlying_cause="InClusterQueue", priority_class="low") == 1
            assert value(m, "kueue_local_queue_evicted_workloads_total", name="lq", namespace="demo",
                         reason="Preempted", underlying_cause="InClusterQueue", priority_class="low") == 1
            return True

        await eventually(preempted, timeout=30, what="the preemption counted")
