"""Sharded admission (admission.shards: 4): replica processes join, leave and are killed with
SIGKILL mid-run while workloads flow through five cohort trees, and a cohort edit moves a
ClusterQueue from one slot's tree into another's.

Checked at every observed point, from a Kubernetes watch (every change, in order) and from polled
lists: no ClusterQueue and no cohort above its quota, no workload admitted twice; and in the end
nothing lost: every workload admitted once and finished; the slots spread over the live replicas.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from support.admission_flow import (
    KUEUE,
    AdmissionProcesses,
    Flow,
    QuotaWatch,
    check_over_quota,
    cpu_workload_doc,
    make_namespace_and_flavor,
)
from support.kubesim_fixtures import SimSpec
from support.wait import eventually
from support.watcher_harness import create, running_watcher

from kq.config import AdmissionConfig, ClusterConfig, Config, NatsConfig
from kq.kube import KubeClient
from kq.runtime import Bus
from kubesim.server import KubeSim
from services.admission.board import Board
from services.admission.core.ownership import slot_of

C = "c1"
SHARDS = 4
TOTAL = int(os.environ.get("KQ_SHARDING_TOTAL", "240"))  # workloads (a longer run: set it higher)
RUN_S = 240 + TOTAL // 5
pytestmark = pytest.mark.timeout(RUN_S + 60)
OUTSTANDING = 48
TREES = ("t0", "t1", "t2", "t3")
MOVER = "solo"  # a ClusterQueue without a cohort, moved into another slot's tree mid-run
NOMINAL, BORROW = 3000, 1000  # cpu milli of every ClusterQueue

KUBESIM = SimSpec(clusters=(C,), seed=37, history_size=80_000)


def target_tree() -> str:
    """A tree in another slot than the mover's, so the edit moves it between slots."""
    return next(t for t in TREES if slot_of(C, t, SHARDS) != slot_of(C, MOVER, SHARDS))


def queues() -> list[str]:
    return [f"{t}-{x}" for t in TREES for x in "ab"] + [MOVER]


async def make_world(kube: KubeClient) -> None:
    await make_namespace_and_flavor(kube)
    for name in queues():
        await create(kube, cq_doc(name, None if name == MOVER else name.split("-")[0]))
        await create(kube, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": "demo"},
                            "spec": {"clusterQueue": name}})


def cq_doc(name: str, cohort: str | None) -> dict[str, Any]:
    """Nominal 3 cpu; in a cohort it may borrow 1 more (a queue without one cannot borrow)."""
    quota = {"name": "cpu", "nominalQuota": f"{NOMINAL}m"} | ({"borrowingLimit": f"{BORROW}m"} if cohort else {})
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "default", "resources": [quota]}]}]}
    if cohort is not None:
        spec["cohortName"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def workload_doc(i: int) -> dict[str, Any]:
    qs = queues()
    return cpu_workload_doc(i, qs[(i * 7) % len(qs)])


def over_quota(usage: dict[str, int]) -> str:
    """A queue above nominal + borrowing, or a tree above its queues' nominal. The mover counts in
    its target tree throughout (before the move it cannot borrow, so this only loosens that tree)."""
    bad = [f"{cq}={used}" for cq, used in sorted(usage.items()) if used > NOMINAL + BORROW]
    target = target_tree()
    for t in TREES:
        members = [f"{t}-a", f"{t}-b"] + ([MOVER] if t == target else [])
        used = sum(usage.get(m, 0) for m in members)
        if used > NOMINAL * len(members):
            bad.append(f"{t}={used}")
    return ", ".join(bad)


async def slots_held(bus: Bus, alive: set[str]) -> dict[str, tuple[int, ...]] | None:
    """The slots each live replica holds, when every slot is held once by them, each replica within
    its fair share; else None."""
    beats = {b.instance: b.slots for b in await Board(bus, 2).replicas() if b.instance in alive}
    held = sorted(s for slots in beats.values() for s in slots)
    share = -(-SHARDS // len(alive))
    if set(beats) != alive or held != list(range(SHARDS)) or any(len(s) > share for s in beats.values()):
        return None
    return beats


async def spread(bus: Bus, alive: set[str]) -> dict[str, tuple[int, ...]]:
    async def probe() -> dict[str, tuple[int, ...]]:
        beats = await slots_held(bus, alive)
        assert beats is not None
        return beats

    return await eventually(probe, timeout=60, interval=0.1, what=f"the slots spread over replicas {sorted(alive)}")


async def test_replicas_join_leave_and_die_without_over_quota_or_double_admission(
        bus: Bus, nats_config: NatsConfig, sim: KubeSim, kube: KubeClient, tmp_path: Path) -> None:
    await make_world(kube)
    _, start_rv = await kube.list("workload", namespace="demo")
    watch = QuotaWatch(kube, over_quota)
    kubeconfig = sim.kubeconfig(C, tmp_path / f"{C}.kubeconfig")
    replicas = AdmissionProcesses(tmp_path, Config(
        nats=nats_config, clusters=(ClusterConfig(name=C, kubeconfig=str(kubeconfig)),),
        admission=AdmissionConfig(shards=SHARDS, lease_ttl_s=2, replica_ttl_s=2, balance_interval_s=0.2)), log_tail=3000)
    flow = Flow(kube, total=TOTAL, outstanding=OUTSTANDING, workload_doc=workload_doc, over_quota=over_quota)
    watching = asyncio.create_task(watch.run(start_rv), name="quota-watch")

    async def move() -> None:
        doc = cq_doc(MOVER, target_tree())
        await kube.patch("clusterqueue", None, MOVER, {"spec": doc["spec"]}, patch_type="merge")

    # What happens as the workloads finish: (fraction finished, what, action). A step waits until the
    # previous one settled: the slots spread over the live replicas (the flow goes on meanwhile).
    steps = [
        (0.10, "replica 1 joins", lambda: replicas.start("1")),
        (0.25, "a cohort edit moves a queue between slots", move),
        (0.40, "replica 0 is killed with SIGKILL", lambda: replicas.kill("0")),
        (0.55, "replica 2 joins", lambda: replicas.start("2")),
        (0.70, "replica 1 leaves (SIGTERM)", lambda: replicas.terminate("1")),
    ]
    try:
        async with running_watcher(bus, sim, tmp_path, [C]):
            await replicas.start("0")
            await spread(bus, {"0"})
            deadline = time.monotonic() + RUN_S
            done: list[str] = []
            settled = True
            spreads: list[dict[str, tuple[int, ...]]] = []
            while len(flow.finished) < TOTAL or len(done) < len(steps) or not settled:
                await flow.step()
                check_over_quota(watch, flow, watching)
                if not settled and (beats := await slots_held(bus, replicas.alive())) is not None:
                    settled = True
                    spreads.append(beats)
                for frac, what, action in steps:
                    if settled and what not in done and len(flow.finished) >= frac * TOTAL:
                        await action()
                        done.append(what)
                        settled = False
                if time.monotonic() > deadline:
                    raise AssertionError(f"not done: created {flow.created}, finished {len(flow.finished)}, "
                                         f"steps {done}, settled {settled}")
                await asyncio.sleep(0.1)
            # joined: 0 and 1 share; moved: the same; killed: 1 holds all; joined: 1 and 2 share; left: 2
            assert [sorted(b) for b in spreads] == [["0", "1"], ["0", "1"], ["1"], ["1", "2"], ["2"]], spreads

        assert flow.violations == [], flow.violations[:5]
        watch.check_each_admitted_once(TOTAL)
        moved = [n for n in range(TOTAL) if workload_doc(n)["spec"]["queueName"] == MOVER]
        assert moved, "the moved queue took workloads"
        await replicas.check_nothing_dead_lettered(bus)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{replicas.output()}") from None
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await replicas.stop()
