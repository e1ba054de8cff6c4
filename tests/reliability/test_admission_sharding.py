"""Sharded admission (admission.shards: 4): replica processes join, leave and are killed with
SIGKILL mid-run while workloads flow through five cohort trees, and a cohort edit moves a
ClusterQueue from one slot's tree into another's.

Checked at every observed point, from a Kubernetes watch (every change, in order) and from polled
lists: no ClusterQueue and no cohort above its quota, no workload admitted twice; and in the end
nothing lost: every workload admitted once and finished; the slots spread over the live replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections import Counter
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
from kq.config import AdmissionConfig, ClusterConfig, Config, NatsConfig
from kq.kube import Conflict, KubeClient
from kq.quantity import to_milli
from kq.runtime import Bus
from kubesim.server import KubeSim
from services.admission.board import Board
from services.admission.core.ownership import slot_of

C = "c1"
ROOT = Path(__file__).resolve().parents[2]
KUEUE = "kueue.x-k8s.io/v1beta2"
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
    await create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    await create(kube, {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}})
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
    queue = qs[(i * 7) % len(qs)]
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": f"w{i:04d}", "namespace": "demo"},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2" if i % 5 == 0 else "1"}}}]}}}]}}


_wl = msgspec.json.Decoder(Workload)


def holding(w: Workload) -> tuple[str, int] | None:
    a = w.status.admission
    if a is None or condition_is_true(w.status.conditions, k.WORKLOAD_FINISHED) \
            or not condition_is_true(w.status.conditions, k.WORKLOAD_QUOTA_RESERVED):
        return None
    return a.cluster_queue, sum(to_milli(p.resource_usage.get("cpu", 0)) for p in a.pod_set_assignments)


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


class QuotaWatch:
    """Every Workload change in order: quota after each, and admissions per uid."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.held: dict[str, tuple[str, int]] = {}
        self.usage: Counter[str] = Counter()
        self.admissions: Counter[str] = Counter()
        self.violations: list[str] = []

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
        if bad := over_quota(dict(self.usage)):
            self.violations.append(f"at {w.metadata.name}@{w.metadata.resource_version}: {bad}")

    async def run(self, rv: str) -> None:
        while True:
            async for ev in self.kube.watch("workload", rv, namespace="demo", timeout_s=600):
                if ev.type == "BOOKMARK":
                    rv = msgspec.json.decode(ev.raw)["metadata"]["resourceVersion"]
                    continue
                w = _wl.decode(ev.raw)
                rv = w.metadata.resource_version
                self.apply(ev.type, w)


class Replicas:
    """`python -m services.admission` processes on one config file (admission.shards: 4)."""

    def __init__(self, tmp: Path, nats: NatsConfig, kubeconfig: Path) -> None:
        self.tmp = tmp
        self.config = tmp / "kq.yaml"
        cfg = Config(nats=nats, clusters=(ClusterConfig(name=C, kubeconfig=str(kubeconfig)),),
                     admission=AdmissionConfig(shards=SHARDS, lease_ttl_s=2, replica_ttl_s=2, balance_interval_s=0.2))
        self.config.write_text(yaml.safe_dump(msgspec.to_builtins(cfg)))
        self.procs: dict[str, asyncio.subprocess.Process] = {}

    async def start(self, instance: str) -> None:
        with open(self.tmp / f"admission-{instance}.log", "wb") as out:
            env = {**os.environ, "KQ_CONFIG": str(self.config), "KQ_INSTANCE": instance, "KQ_LOG_LEVEL": "info"}
            self.procs[instance] = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "services.admission", cwd=str(ROOT), env=env, stdout=out,
                stderr=asyncio.subprocess.STDOUT)

    def alive(self) -> set[str]:
        return {i for i, p in self.procs.items() if p.returncode is None}

    def output(self) -> str:
        return "\n".join(f"--- admission-{i} (exit {p.returncode}) ---\n"
                         + (self.tmp / f"admission-{i}.log").read_text(errors="replace")[-3000:]
                         for i, p in sorted(self.procs.items()))

    async def kill(self, instance: str) -> None:
        self.procs[instance].send_signal(signal.SIGKILL)
        await asyncio.wait_for(self.procs[instance].wait(), 10)

    async def terminate(self, instance: str) -> None:
        self.procs[instance].send_signal(signal.SIGTERM)
        await asyncio.wait_for(self.procs[instance].wait(), 20)

    async def stop(self) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()


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


class Flow:
    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.created = 0
        self.finished: set[str] = set()
        self.seen_holding: set[str] = set()
        self.violations: list[str] = []

    async def step(self) -> None:
        items, rv = await self.kube.list("workload", namespace="demo")
        wls = [_wl.decode(raw) for raw in items]
        usage: Counter[str] = Counter()
        for w in wls:
            if (h := holding(w)) is not None:
                usage[h[0]] += h[1]
        if bad := over_quota(dict(usage)):
            self.violations.append(f"list@{rv}: {bad}")
        self.finished = {w.metadata.name for w in wls if condition_is_true(w.status.conditions, k.WORKLOAD_FINISHED)}
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
        with contextlib.suppress(Conflict):
            await self.kube.patch("workload", "demo", w.metadata.name, body, patch_type="merge", subresource="status")


async def test_replicas_join_leave_and_die_without_over_quota_or_double_admission(
        bus: Bus, nats_config: NatsConfig, sim: KubeSim, kube: KubeClient, tmp_path: Path) -> None:
    await make_world(kube)
    _, start_rv = await kube.list("workload", namespace="demo")
    watch = QuotaWatch(kube)
    replicas = Replicas(tmp_path, nats_config, sim.kubeconfig(C, tmp_path / f"{C}.kubeconfig"))
    flow = Flow(kube)
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
                if watching.done():
                    watching.result()
                    raise AssertionError("the watch stopped")
                await flow.step()
                if watch.violations or flow.violations:
                    raise AssertionError(f"over quota: watch {watch.violations[:3]} lists {flow.violations[:3]}")
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

        assert watch.violations == [] and flow.violations == [], (watch.violations[:5], flow.violations[:5])
        twice = {uid: n for uid, n in watch.admissions.items() if n > 1}
        assert twice == {}, f"admitted more than once: {twice}"
        assert len(watch.admissions) == TOTAL, f"{len(watch.admissions)} workloads admitted of {TOTAL}"
        assert watch.held == {}, f"still holding quota: {watch.held}"
        moved = [n for n in range(TOTAL) if workload_doc(n)["spec"]["queueName"] == MOVER]
        assert moved, "the moved queue took workloads"
        with contextlib.suppress(NotFoundError):
            await bus.js.get_msg(subjects.EVENTS_STREAM, subject=subjects.dead_letter_subject("admission"))
            raise AssertionError(f"admission dead-lettered input:\n{replicas.output()}")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{replicas.output()}") from None
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await replicas.stop()
