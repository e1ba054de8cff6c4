"""Failover of the admission scheduler: an active and a hot-standby process (real subprocesses),
the watcher and kubesim, a few hundred workloads flowing through two ClusterQueues of one cohort;
the active scheduler is killed with SIGKILL mid-run and the standby takes over.

Checked at every observed point, from a Kubernetes watch (every change, in order) and from
polled lists: no ClusterQueue and no cohort above its quota (nominal + allowed borrowing), no
workload admitted twice; and in the end nothing lost: every workload admitted once and finished.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
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

from kq.config import ClusterConfig, Config, NatsConfig
from kq.kube import KubeClient
from kq.runtime import Bus
from kq.stack.health import health_answers
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(300)
C = "c1"
TOTAL = 300  # workloads
OUTSTANDING = 40  # created and not yet finished, at most
KILL_AFTER = TOTAL // 3  # finished workloads before the active scheduler is killed
# cpu in milli: what each ClusterQueue may hold (nominal + borrowingLimit) and the cohort's total.
LIMITS = {"cq-a": 8000, "cq-b": 7000}
COHORT_LIMIT = 10000


KUBESIM = SimSpec(clusters=(C,), seed=31, history_size=50_000)


async def make_world(kube: KubeClient) -> None:
    await make_namespace_and_flavor(kube)
    for name, borrowing in (("cq-a", "3"), ("cq-b", "2")):
        await create(kube, {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
            "cohortName": "team", "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
                {"name": "cpu", "nominalQuota": "5", "borrowingLimit": borrowing}]}]}]}})
        await create(kube, {"apiVersion": KUEUE, "kind": "LocalQueue",
                            "metadata": {"name": f"lq-{name[-1]}", "namespace": "demo"}, "spec": {"clusterQueue": name}})


def workload_doc(i: int) -> dict[str, Any]:
    """Two of three go to cq-a, so it borrows from cq-b; one in five asks for 2 cpu."""
    return cpu_workload_doc(i, "lq-b" if i % 3 == 0 else "lq-a")


def over_quota(usage: dict[str, int]) -> str:
    bad = [f"{cq}={used}>{LIMITS.get(cq, 0)}" for cq, used in sorted(usage.items()) if used > LIMITS.get(cq, 0)]
    if sum(usage.values()) > COHORT_LIMIT:
        bad.append(f"cohort={sum(usage.values())}>{COHORT_LIMIT}")
    return ", ".join(bad)


async def statuses(bus: Bus) -> dict[str, str]:
    return {i: st.status for i, st in (await health_answers(bus.nc, "admission", window_s=0.3)).items()}


async def active_instance(bus: Bus, alive: set[str]) -> str:
    async def probe() -> str:
        st = await statuses(bus)
        ready = [i for i in alive if st.get(i) == "ready"]
        standby = [i for i in alive if st.get(i) == "standby"]
        assert len(ready) == 1 and len(standby) == len(alive) - 1, st
        return ready[0]

    return await eventually(probe, timeout=60, interval=0.1, what="one active scheduler, the rest standby")


async def run_flow(flow: Flow, watch: QuotaWatch, watching: asyncio.Task[None],
                   kill: Callable[[], Awaitable[None]], timeout: float = 200.0, poll_s: float = 0.1) -> None:
    """Poll and drive the flow until every workload finished; kill the active scheduler a third of
    the way. Fails at once on a quota violation, or with where it stood at the deadline."""
    deadline = time.monotonic() + timeout
    killed = False
    while True:
        await flow.step()
        check_over_quota(watch, flow, watching)
        if not killed and len(flow.finished) >= KILL_AFTER:
            await kill()
            killed = True
        if killed and len(flow.finished) == TOTAL:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not done within {timeout}s: created {flow.created}, finished "
                                 f"{len(flow.finished)}, killed {killed}, polls {flow.polls}")
        await asyncio.sleep(poll_s)


async def kill_active(bus: Bus, schedulers: AdmissionProcesses, active: str) -> None:
    """SIGKILL: the standby takes over once the lease's TTL has run out."""
    await schedulers.kill(active)


async def pause_active(bus: Bus, schedulers: AdmissionProcesses, active: str) -> None:
    """SIGSTOP until the standby decides, then SIGCONT: the old leader wakes up with stale state and
    an old epoch; whatever it still sends is refused, and it must step down."""
    schedulers.signal(active, signal.SIGSTOP)
    await active_instance(bus, set(schedulers.procs) - {active})
    schedulers.signal(active, signal.SIGCONT)


FAULTS = {"kill-9": kill_active, "pause-resume": pause_active}


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_standby_takes_over_without_double_admission(fault: str, bus: Bus, nats_config: NatsConfig,
                                                           sim: KubeSim, kube: KubeClient, tmp_path: Path) -> None:
    await make_world(kube)
    _, start_rv = await kube.list("workload", namespace="demo")
    watch = QuotaWatch(kube, over_quota)
    kubeconfig = sim.kubeconfig(C, tmp_path / f"{C}.kubeconfig")
    schedulers = AdmissionProcesses(tmp_path, Config(nats=nats_config,
                                                     clusters=(ClusterConfig(name=C, kubeconfig=str(kubeconfig)),)))
    flow = Flow(kube, total=TOTAL, outstanding=OUTSTANDING, workload_doc=workload_doc, over_quota=over_quota)
    watching = asyncio.create_task(watch.run(start_rv), name="quota-watch")
    try:
        async with running_watcher(bus, sim, tmp_path, [C]):
            await schedulers.start("0")
            await schedulers.start("1")
            first = await active_instance(bus, {"0", "1"})
            try:
                await run_flow(flow, watch, watching, lambda: FAULTS[fault](bus, schedulers, first))
                second = await active_instance(bus, schedulers.alive())  # the paused one is back as a standby
            except AssertionError as e:
                raise AssertionError(f"{e}\n{schedulers.output()}") from None
            assert second != first

        # Invariants over the whole run, from the watch (every change in order).
        assert flow.violations == [], flow.violations[:5]
        watch.check_each_admitted_once(TOTAL)
        await schedulers.check_nothing_dead_lettered(bus)
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await schedulers.stop()
