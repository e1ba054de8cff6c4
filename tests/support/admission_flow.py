"""The harness of the admission reliability tests (failover, sharding): admission processes run as
real subprocesses, a flow of workloads that are finished once seen holding quota, and a watch
that checks quota after every Workload change and counts admissions per uid.

What is over quota is each test's own (`OverQuota`: usage per ClusterQueue -> what is wrong,
"" when nothing is); so are its queues, its workloads and its faults.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import yaml
from nats.js.errors import NotFoundError

from kq import subjects
from kq.api import constants as k
from kq.api.kueue import Workload
from kq.api.meta import condition_is_true
from kq.config import Config
from kq.kube import Conflict, KubeClient
from kq.quantity import to_milli
from kq.runtime import Bus
from support.watcher_harness import create

ROOT = Path(__file__).resolve().parents[2]
KUEUE = "kueue.x-k8s.io/v1beta2"
NAMESPACE = "demo"

OverQuota = Callable[[dict[str, int]], str]

_wl = msgspec.json.Decoder(Workload)


async def make_namespace_and_flavor(kube: KubeClient) -> None:
    await create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    await create(kube, {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}})


def cpu_workload_doc(i: int, queue: str) -> dict[str, Any]:
    """Workload w<i> in `queue`: one pod of 1 cpu, 2 cpu for one in five."""
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": f"w{i:04d}", "namespace": NAMESPACE},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2" if i % 5 == 0 else "1"}}}]}}}]}}


def finished(w: Workload) -> bool:
    return condition_is_true(w.status.conditions, k.WORKLOAD_FINISHED)


def holding(w: Workload) -> tuple[str, int] | None:
    """(ClusterQueue, cpu milli) while the workload holds quota."""
    a = w.status.admission
    if a is None or finished(w) or not condition_is_true(w.status.conditions, k.WORKLOAD_QUOTA_RESERVED):
        return None
    return a.cluster_queue, sum(to_milli(p.resource_usage.get("cpu", 0)) for p in a.pod_set_assignments)


class QuotaWatch:
    """Follows every Workload change in order; checks the quota after each and counts admissions
    (a change from not holding quota to holding it) per uid."""

    def __init__(self, kube: KubeClient, over_quota: OverQuota) -> None:
        self.kube = kube
        self.over_quota = over_quota
        self.held: dict[str, tuple[str, int]] = {}  # uid -> (cq, cpu)
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
        if bad := self.over_quota(dict(self.usage)):
            self.violations.append(f"at {w.metadata.name}@{w.metadata.resource_version}: {bad}")

    async def run(self, resource_version: str) -> None:
        rv = resource_version
        while True:  # the server ends a watch after its timeout: resume where it stopped
            async for ev in self.kube.watch("workload", rv, namespace=NAMESPACE, timeout_s=600):
                if ev.type == "BOOKMARK":
                    rv = msgspec.json.decode(ev.raw)["metadata"]["resourceVersion"]
                    continue
                w = _wl.decode(ev.raw)
                rv = w.metadata.resource_version
                self.apply(ev.type, w)

    def check_each_admitted_once(self, total: int) -> None:
        """At the end: no violation, every workload admitted exactly once, none still holding quota."""
        assert self.violations == [], self.violations[:5]
        twice = {uid: n for uid, n in self.admissions.items() if n > 1}
        assert twice == {}, f"admitted more than once: {twice}"
        assert len(self.admissions) == total, f"{len(self.admissions)} workloads admitted of {total}"
        assert self.held == {}, f"still holding quota: {self.held}"


class Flow:
    """Creates workloads (at most `outstanding` unfinished, `total` in all), finishes those seen
    holding quota in an earlier poll, and checks each polled list."""

    def __init__(self, kube: KubeClient, *, total: int, outstanding: int, workload_doc: Callable[[int], dict[str, Any]],
                 over_quota: OverQuota) -> None:
        self.kube = kube
        self.total, self.outstanding = total, outstanding
        self.workload_doc, self.over_quota = workload_doc, over_quota
        self.created = 0
        self.finished: set[str] = set()
        self.seen_holding: set[str] = set()
        self.polls = 0
        self.violations: list[str] = []

    async def step(self) -> None:
        items, rv = await self.kube.list("workload", namespace=NAMESPACE)
        wls = [_wl.decode(raw) for raw in items]
        self.polls += 1
        usage: Counter[str] = Counter()
        for w in wls:
            if (h := holding(w)) is not None:
                usage[h[0]] += h[1]
        if bad := self.over_quota(dict(usage)):
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
        while self.created < self.total and outstanding < self.outstanding:
            await create(self.kube, self.workload_doc(self.created))
            self.created += 1
            outstanding += 1

    async def _finish(self, w: Workload) -> None:
        conds = [msgspec.to_builtins(c) for c in w.status.conditions if c.type != k.WORKLOAD_FINISHED]
        conds.append({"type": k.WORKLOAD_FINISHED, "status": "True", "reason": "Succeeded", "message": "done",
                      "lastTransitionTime": "2024-01-01T00:00:00Z"})
        body = {"metadata": {"resourceVersion": w.metadata.resource_version}, "status": {"conditions": conds}}
        with contextlib.suppress(Conflict):  # changed since the list: finished on a later poll
            await self.kube.patch("workload", NAMESPACE, w.metadata.name, body, patch_type="merge",
                                  subresource="status")


def check_over_quota(watch: QuotaWatch, flow: Flow, watching: asyncio.Task[None]) -> None:
    """Between polls: fail at once when the watch stopped or anything was seen over quota."""
    if watching.done():
        watching.result()
        raise AssertionError("the watch stopped")
    if watch.violations or flow.violations:
        raise AssertionError(f"over quota: watch {watch.violations[:3]} lists {flow.violations[:3]}")


class AdmissionProcesses:
    """`python -m services.admission` processes (one per KQ_INSTANCE) on one config file."""

    def __init__(self, tmp: Path, config: Config, *, log_tail: int = 4000) -> None:
        self.tmp = tmp
        self.config = tmp / "kq.yaml"
        self.config.write_text(yaml.safe_dump(msgspec.to_builtins(config)))
        self.log_tail = log_tail
        self.procs: dict[str, asyncio.subprocess.Process] = {}

    async def start(self, instance: str) -> None:
        with open(self.tmp / f"admission-{instance}.log", "wb") as out:  # the child keeps its own descriptor
            env = {**os.environ, "KQ_CONFIG": str(self.config), "KQ_INSTANCE": instance, "KQ_LOG_LEVEL": "info"}
            self.procs[instance] = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "services.admission", cwd=str(ROOT), env=env, stdout=out,
                stderr=asyncio.subprocess.STDOUT)

    def alive(self) -> set[str]:
        return {i for i, p in self.procs.items() if p.returncode is None}

    def output(self) -> str:
        return "\n".join(f"--- admission-{i} (exit {p.returncode}) ---\n"
                         + (self.tmp / f"admission-{i}.log").read_text(errors="replace")[-self.log_tail:]
                         for i, p in sorted(self.procs.items()))

    def signal(self, instance: str, sig: signal.Signals) -> None:
        self.procs[instance].send_signal(sig)

    async def kill(self, instance: str) -> None:
        self.procs[instance].send_signal(signal.SIGKILL)
        await asyncio.wait_for(self.procs[instance].wait(), 10)

    async def terminate(self, instance: str) -> None:
        self.procs[instance].send_signal(signal.SIGTERM)
        await asyncio.wait_for(self.procs[instance].wait(), 20)

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

    async def check_nothing_dead_lettered(self, bus: Bus) -> None:
        with contextlib.suppress(NotFoundError):
            await bus.js.get_msg(subjects.EVENTS_STREAM, subject=subjects.dead_letter_subject("admission"))
            raise AssertionError(f"admission dead-lettered input:\n{self.output()}")
