"""Failover of the admission scheduler: an active and a hot-standby process (real subprocesses),
the watcher and kubesim, a few hundred workloads flowing through two ClusterQueues of one cohort;
the active scheduler is killed with SIGKILL mid-run and the standby takes over.

Checked at every observed point, from a Kubernetes watch (every change, in order) and from
polled lists: no ClusterQueue and no cohort above its quota (nominal + allowed borrowing), no
workload admitted twice; and in the end nothing lost: every workload admitted once and finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from nats.js.errors import NotFoundError
from support.kubesim_fixtures import SimSpec
from support.wait import eventually
from support.watcher_harness import create, running_watcher

from kq import subjects
from kq.api import constants as k
from kq.api.kueue import Workload
from kq.api.meta import condition_is_true
from kq.config import ClusterConfig, Config, NatsConfig
from kq.kube import Conflict, KubeClient
from kq.quantity import to_milli
from kq.runtime import Bus
from kq.stack.health import health_answers
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(300)
C = "c1"
ROOT = Path(__file__).resolve().parents[2]
KUEUE = "kueue.x-k8s.io/v1beta2"
TOTAL = 300  # workloads
OUTSTANDING = 40  # created and not yet finished, at most
KILL_AFTER = TOTAL // 3  # finished workloads before the active scheduler is killed
# cpu in milli: what each ClusterQueue may hold (nominal + borrowingLimit) and the cohort's total.
LIMITS = {"cq-a": 8000, "cq-b": 7000}
COHORT_LIMIT = 10000


KUBESIM = SimSpec(clusters=(C,), seed=31, history_size=50_000)


async def make_world(kube: KubeClient) -> None:
    await create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    await create(kube, {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}})
    for name, borrowing in (("cq-a", "3"), ("cq-b", "2")):
        await create(kube, {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
            "cohortName": "team", "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
                {"name": "cpu", "nominalQuota": "5", "borrowingLimit": borrowing}]}]}]}})
        await create(kube, {"apiVersion": KUEUE, "kind": "LocalQueue",
                            "metadata": {"name": f"lq-{name[-1]}", "namespace": "demo"}, "spec": {"clusterQueue": name}})


def workload_doc(i: int) -> dict[str, Any]:
    """Two of three go to cq-a, so it borrows from cq-b; one in five asks for 2 cpu."""
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": f"w{i:04d}", "namespace": "demo"},
            "spec": {"queueName": "lq-b" if i % 3 == 0 else "lq-a", "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2" if i % 5 == 0 else "1"}}}]}}}]}}


# --- what holds quota -------------------------------------------------------------------------------

_wl = msgspec.json.Decoder(Workload)


def finished(w: Workload) -> bool:
    return condition_is_true(w.status.conditions, k.WORKLOAD_FINISHED)


def holding(w: Workload) -> tuple[str, int] | None:
    """(ClusterQueue, cpu milli) while the workload holds quota."""
    a = w.status.admission
    if a is None or finished(w) or not condition_is_true(w.status.conditions, k.WORKLOAD_QUOTA_RESERVED):
        return None
    return a.cluster_queue, sum(to_milli(p.resource_usage.get("cpu", 0)) for p in a.pod_set_assignments)


def over_quota(usage: dict[str, int]) -> str:
    bad = [f"{cq}={used}>{LIMITS.get(cq, 0)}" for cq, used in sorted(usage.items()) if used > LIMITS.get(cq, 0)]
    if sum(usage.values()) > COHORT_LIMIT:
        bad.append(f"cohort={sum(usage.values())}>{COHORT_LIMIT}")
    return ", ".join(bad)


class QuotaWatch:
    """Follows every Workload change in order; checks the quota after each and counts admissions
    (a change from not holding quota to holding it) per uid."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.held: dict[str, tuple[str, int]] = {}  # uid -> (cq, cpu)
        self.usage: Counter[str] = Counter()
        self.admissions: Counter[str] = Counter()
        self.violations: list[str] = []
        self.events = 0

    def apply(self, type_: str, w: Workload) -> None:
        uid = w.metadata.uid
        now = None if type_ == "DELETED" else holding(w)
        before = self.held.pop(uid, None)
        if before is not None:
            self.usage[before[0]] -= before[1]
        if now is not None:
            self.held[uid] = now
            self.usage[now[0]] += now[1]
            if before is None:
                self.admissions[uid] += 1
        self.events += 1
        if bad := over_quota(dict(self.usage)):
            self.violations.append(f"at {w.metadata.name}@{w.metadata.resource_version}: {bad}")

    async def run(self, resource_version: str) -> None:
        rv = resource_version
        while True:  # the server ends a watch after its timeout: resume where it stopped
            async for ev in self.kube.watch("workload", rv, namespace="demo", timeout_s=600):
                if ev.type == "BOOKMARK":
                    rv = msgspec.json.decode(ev.raw)["metadata"]["resourceVersion"]
                    continue
                w = _wl.decode(ev.raw)
                rv = w.metadata.resource_version
                self.apply(ev.type, w)


# --- the two scheduler processes --------------------------------------------------------------------


class Schedulers:
    """Two `python -m services.admission` processes (instances "0" and "1") on one config file."""

    def __init__(self, tmp: Path, nats: NatsConfig, kubeconfig: Path) -> None:
        self.tmp = tmp
        self.config = tmp / "kq.yaml"
        cfg = Config(nats=nats, clusters=(ClusterConfig(name=C, kubeconfig=str(kubeconfig)),))
        self.config.write_text(yaml.safe_dump(msgspec.to_builtins(cfg)))
        self.procs: dict[str, asyncio.subprocess.Process] = {}

    async def start(self, instance: str) -> None:
        with open(self.tmp / f"admission-{instance}.log", "wb") as out:  # the child keeps its own descriptor
            env = {**os.environ, "KQ_CONFIG": str(self.config), "KQ_INSTANCE": instance, "KQ_LOG_LEVEL": "info"}
            self.procs[instance] = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "services.admission", cwd=str(ROOT), env=env, stdout=out,
                stderr=asyncio.subprocess.STDOUT)

    def output(self) -> str:
        return "\n".join(f"--- admission-{i} (exit {p.returncode}) ---\n"
                         + (self.tmp / f"admission-{i}.log").read_text(errors="replace")[-4000:]
                         for i, p in sorted(self.procs.items()))

    async def kill(self, instance: str) -> None:
        proc = self.procs[instance]
        proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), 10)

    def signal(self, instance: str, sig: signal.Signals) -> None:
        self.procs[instance].send_signal(sig)

    async def stop(self) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                proc.send_signal(signal.SIGCONT)  # a paused one would not see SIGTERM
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()


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


# --- the flow ---------------------------------------------------------------------------------------


class Flow:
    """Creates workloads (at most OUTSTANDING unfinished), finishes those seen holding quota in an
    earlier poll, and checks each polled list."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.created = 0
        self.finished: set[str] = set()
        self.seen_holding: set[str] = set()
        self.polls = 0
        self.violations: list[str] = []

    async def step(self) -> None:
        items, rv = await self.kube.list("workload", namespace="demo")
        wls = [_wl.decode(raw) for raw in items]
        self.polls += 1
        usage: Counter[str] = Counter()
        for w in wls:
            if (h := holding(w)) is not None:
                usage[h[0]] += h[1]
        if bad := over_quota(dict(usage)):
            self.violations.append(f"list@{rv}: {bad}")
        self.finished = {w.metadata.name for w in wls if finished(w)}
        for w in wls:
            if holding(w) is None:
                continue
            if w.metadata.name in self.seen_holding:
                await self._finish(w)
            else:
                self.seen_holding.add(w.metadata.name)
        outstanding = self.created - len(self.finished)
        while self.created < TOTAL and outstanding < OUTSTANDING:
            await create(self.kube, workload_doc(self.created))
            self.created += 1
            outstanding += 1

    async def _finish(self, w: Workload) -> None:
        conds = [msgspec.to_builtins(c) for c in w.status.conditions if c.type != k.WORKLOAD_FINISHED]
        conds.append({"type": k.WORKLOAD_FINISHED, "status": "True", "reason": "Succeeded", "message": "done",
                      "lastTransitionTime": "2024-01-01T00:00:00Z"})
        body = {"metadata": {"resourceVersion": w.metadata.resource_version}, "status": {"conditions": conds}}
        with contextlib.suppress(Conflict):  # changed since the list: finished on a later poll
            await self.kube.patch("workload", "demo", w.metadata.name, body, patch_type="merge", subresource="status")


async def run_flow(flow: Flow, watch: QuotaWatch, watching: asyncio.Task[None],
                   kill: Callable[[], Awaitable[None]], timeout: float = 200.0, poll_s: float = 0.1) -> None:
    """Poll and drive the flow until every workload finished; kill the active scheduler a third of
    the way. Fails at once on a quota violation, or with where it stood at the deadline."""
    deadline = time.monotonic() + timeout
    killed = False
    while True:
        if watching.done():
            watching.result()
            raise AssertionError("the watch stopped")
        await flow.step()
        if watch.violations or flow.violations:
            raise AssertionError(f"over quota: watch {watch.violations[:3]} lists {flow.violations[:3]}")
        if not killed and len(flow.finished) >= KILL_AFTER:
            await kill()
            killed = True
        if killed and len(flow.finished) == TOTAL:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not done within {timeout}s: created {flow.created}, finished "
                                 f"{len(flow.finished)}, killed {killed}, polls {flow.polls}")
        await asyncio.sleep(poll_s)


async def kill_active(bus: Bus, schedulers: Schedulers, active: str) -> None:
    """SIGKILL: the standby takes over once the lease's TTL has run out."""
    await schedulers.kill(active)


async def pause_active(bus: Bus, schedulers: Schedulers, active: str) -> None:
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
    watch = QuotaWatch(kube)
    schedulers = Schedulers(tmp_path, nats_config, sim.kubeconfig(C, tmp_path / f"{C}.kubeconfig"))
    flow = Flow(kube)
    watching = asyncio.create_task(watch.run(start_rv), name="quota-watch")
    try:
        async with running_watcher(bus, sim, tmp_path, [C]):
            await schedulers.start("0")
            await schedulers.start("1")
            first = await active_instance(bus, {"0", "1"})
            try:
                await run_flow(flow, watch, watching, lambda: FAULTS[fault](bus, schedulers, first))
                alive = {i for i, p in schedulers.procs.items() if p.returncode is None}
                second = await active_instance(bus, alive)  # the paused one is back as a standby
            except AssertionError as e:
                raise AssertionError(f"{e}\n{schedulers.output()}") from None
            assert second != first

        # Invariants over the whole run, from the watch (every change in order).
        assert watch.violations == [], watch.violations[:5]
        assert flow.violations == [], flow.violations[:5]
        twice = {uid: n for uid, n in watch.admissions.items() if n > 1}
        assert twice == {}, f"admitted more than once: {twice}"
        assert len(watch.admissions) == TOTAL, f"{len(watch.admissions)} workloads admitted of {TOTAL}"
        assert watch.held == {}, f"still holding quota: {watch.held}"
        try:
            await bus.js.get_msg(subjects.EVENTS_STREAM, subject=subjects.dead_letter_subject("admission"))
            raise AssertionError(f"admission dead-lettered input:\n{schedulers.output()}")
        except NotFoundError:
            pass
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await schedulers.stop()
