"""`kq bench CONFIG --workers N`: the workload mix as batch/v1 Jobs, through one cluster and then
through a MultiKueue manager with N worker clusters, on the same machine.

Each workload of the plan becomes a Job (the queue label, its cpu request, its runtime as the pod
annotation kubesim honours), created on the plan's schedule. The single-cluster pass runs them
on the manager alone; the MultiKueue pass gives the manager the plan's queues with a MultiKueue
admission check and every worker the same queues (the manager's quota is the gate, as in Kueue),
and the Jobs carry spec.managedBy kueue.x-k8s.io/multikueue. Wall time runs from the first
creation until every manager Workload is finished. With the external dispatcher
(SPREAD_DISPATCHER) the pass also runs examples/dispatchers/spread.py, which nominates one worker
a job over the bus; its CPU is counted with the stack's. Throughout the MultiKueue pass a JobLedger
watches every worker's Jobs: a Job running in two workers at the same time fails the run; Jobs
created again after the manager evicted them (the mix preempts) are counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from kq.api.constants import MULTIKUEUE_MANAGED_BY, QUEUE_NAME_LABEL
from kq.api.kueue import ClusterQueue
from kq.bench.child import stop_child
from kq.bench.generate import BenchPlan, WorkloadPlan, setup_objects
from kq.bench.job_ledger import JobLedger
from kq.bench.live import _create, _workdir
from kq.bench.procstats import process_stats
from kq.kube import Gone, KubeClient, KubeError
from kq.stack import Stack

Say = Callable[[str], None]
KUEUE_API = "kueue.x-k8s.io/v1beta2"
# Both passes: kubesim's watch bookmarks every 10 s rather than 2 s. A manager and 20 workers hold
# ~700 idle watches; bookmarks every 2 s cost kubesim and the watcher ~20 ms of CPU a second,
# which is the simulator's cost of 21 clusters in one process, not kq's.
KUBESIM_ARGS = ("--bookmark-interval", "10s")
# `--dispatcher external`: any dispatcherName but Kueue's two built-ins makes kq wait for nominations,
# and the example dispatcher gives them (its CPU is reported as "spread").
SPREAD_DISPATCHER = "example.com/spread"
SPREAD = Path(__file__).resolve().parents[3] / "examples" / "dispatchers" / "spread.py"
# How long after the last finish the pass waits for the winners' checks still on their way
# (status.clusterName) before counting the finished Workloads that do not say where they ran.
RECORD_GRACE_S = 30.0


class _Cond(msgspec.Struct, frozen=True):
    type: str
    status: str
    reason: str = ""


class _St(msgspec.Struct, frozen=True, rename="camel"):
    conditions: tuple[_Cond, ...] = ()
    cluster_name: str = ""


class _Meta(msgspec.Struct, frozen=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    resource_version: str = ""


class _Wl(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()
    status: _St = _St()

    @property
    def key(self) -> str:
        # Workload names repeat across namespaces: Kueue's 5-hex-digit hash of a Job's name and uid
        # collides now and then among the 30 namespaces' Jobs of the same name.
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def finished_reason(self) -> str | None:
        return next((c.reason for c in self.status.conditions if c.type == "Finished" and c.status == "True"), None)

    def seen(self) -> _Seen:
        evicted = any(c.type == "Evicted" and c.status == "True" for c in self.status.conditions)
        return _Seen(self.finished_reason, self.status.cluster_name, evicted)


class _Seen(msgspec.Struct, frozen=True):
    """A manager Workload as the pass follows it: its Finished reason (None: not finished), the
    worker it records as where it ran (status.clusterName; "" on a single cluster), and whether an
    eviction was under way (which clears clusterName, as Kueue's evict.go does) as it finished."""
    reason: str | None
    cluster: str
    evicted: bool

    @property
    def unrecorded(self) -> bool:
        """Finished without saying where it ran, and not because an eviction cleared it."""
        return self.reason is not None and not self.cluster and not self.evicted


async def _follow_finished(manager: KubeClient, done: dict[str, _Seen]) -> None:
    """Keep `done` (Workload namespace/name -> what it shows) current from a watch: polling a list of every
    Workload several times a second cost the API server more than some of what is measured."""
    rv = ""
    while True:
        try:
            if not rv:
                raws, rv = await manager.list("workload")
                done.clear()
                for raw in raws:
                    wl = msgspec.json.decode(raw, type=_Wl)
                    done[wl.key] = wl.seen()
            async for ev in manager.watch("workload", rv, timeout_s=60):
                wl = msgspec.json.decode(ev.raw, type=_Wl)
                rv = wl.metadata.resource_version or rv
                if ev.type == "DELETED":
                    done.pop(wl.key, None)
                elif ev.type != "BOOKMARK":
                    done[wl.key] = wl.seen()
        except Gone:
            rv = ""
        except KubeError:
            await asyncio.sleep(0.2)


class PassResult(msgspec.Struct, frozen=True, kw_only=True):
    label: str
    jobs: int
    finished: int
    failed: int
    wall_s: float
    timed_out: bool
    unrecorded: tuple[str, ...] = ()  # finished manager Workloads that do not say where they ran (no clusterName)
    cpu_ms: dict[str, int] = {}  # CPU used during the pass, per service (instances summed)

    @property
    def throughput(self) -> float:
        return self.finished / self.wall_s if self.wall_s > 0 else 0.0


def job_body(w: WorkloadPlan, multikueue: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "suspend": True, "parallelism": w.pod_count, "completions": w.pod_count,
        "template": {"metadata": {"annotations": {"kq.dev/runtime": f"{w.runtime_ms}ms"}},
                     "spec": {"restartPolicy": "Never", "containers": [
                         {"name": "main", "image": "registry.k8s.io/pause:3.9",
                          "resources": {"requests": {"cpu": f"{w.request_milli}m"}}}]}},
    }
    if multikueue:
        spec["managedBy"] = MULTIKUEUE_MANAGED_BY
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "namespace": w.namespace, "name": w.name, "labels": {QUEUE_NAME_LABEL: w.cluster_queue}}, "spec": spec}


def _mk_objects(workers: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"apiVersion": KUEUE_API, "kind": "MultiKueueCluster", "metadata": {"name": w},
         "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": f"{w}-kubeconfig"}}}}
        for w in workers]
    out.append({"apiVersion": KUEUE_API, "kind": "MultiKueueConfig", "metadata": {"name": "bench"},
                "spec": {"clusters": workers}})
    out.append({"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": {"name": "bench-mk"}, "spec": {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "bench"}}})
    return out


async def _setup(client: KubeClient, plan: BenchPlan, with_check: bool) -> None:
    for obj in setup_objects(plan):
        if with_check and isinstance(obj, ClusterQueue):
            body = msgspec.to_builtins(obj)
            body["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "bench-mk"}]}
            await client.create("ClusterQueue", None, body)
        else:
            await _create(client, obj)


def _cpu_by_service(stack: Stack, extra: dict[str, int]) -> dict[str, int]:
    """CPU used so far by each process of the stack, summed per service (nats-server, kubesim, ...),
    and by the pass's own extra processes (name -> pid)."""
    out: dict[str, int] = {}
    procs = [(p.service or p.name, p.pid) for p in (stack.state.processes if stack.state is not None else ())]
    for name, pid in [*procs, *extra.items()]:
        st = process_stats(name, pid)
        if st is not None:
            out[name] = out.get(name, 0) + st.cpu_ms
    return out


async def _measured(stack: Stack, drive: Any, extra: dict[str, int] | None = None) -> PassResult:
    """Run one pass and record the CPU the stack spent on it (robust to a shared machine's load)."""
    before = _cpu_by_service(stack, extra or {})
    result: PassResult = await drive
    after = _cpu_by_service(stack, extra or {})
    return msgspec.structs.replace(result, cpu_ms={n: after[n] - before.get(n, 0) for n in sorted(after)})


async def _drive(manager: KubeClient, plan: BenchPlan, multikueue: bool, timeout_s: float, label: str,
                 say: Say) -> PassResult:
    total = len(plan.workloads)
    sem = asyncio.Semaphore(64)
    t0 = time.monotonic()

    async def one(w: WorkloadPlan) -> None:
        delay = t0 + w.at_ms / 1000 - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        async with sem:
            await manager.create("Job", w.namespace, job_body(w, multikueue))

    creator = asyncio.gather(*(one(w) for w in plan.workloads))
    done: dict[str, _Seen] = {}  # manager Workload (namespace/name) -> its Finished reason and cluster
    follower = asyncio.create_task(_follow_finished(manager, done))
    finished = failed = 0
    last_say = 0.0
    try:
        while True:
            reasons = [seen.reason for seen in done.values() if seen.reason is not None]
            finished, failed = len(reasons), sum(r != "Succeeded" for r in reasons)
            now = time.monotonic() - t0
            if finished >= total:
                break
            if now > timeout_s:
                return PassResult(label=label, jobs=total, finished=finished, failed=failed, wall_s=now, timed_out=True)
            if now - last_say >= 5:
                say(f"  {label}: {now:5.1f}s  {finished}/{total} finished")
                last_say = now
            await asyncio.sleep(0.25)
        await creator
        wall = time.monotonic() - t0
        missing = await _records_landed(done, RECORD_GRACE_S) if multikueue else ()
        unrecorded = (*[await _described(manager, key) for key in missing[:3]], *missing[3:])
    finally:
        follower.cancel()
        if not creator.done():
            creator.cancel()
        await asyncio.gather(creator, follower, return_exceptions=True)
    return PassResult(label=label, jobs=total, finished=finished, failed=failed, wall_s=wall, timed_out=False,
                      unrecorded=unrecorded)


async def _described(manager: KubeClient, key: str) -> str:
    """`namespace/name` with what its conditions and admission checks say, to tell why it is unrecorded."""
    ns, name = key.split("/", 1)
    try:
        raw = await manager.get("workload", ns, name)
    except KubeError:
        raw = None
    if raw is None:
        return key
    st = msgspec.json.decode(raw).get("status", {})
    conds = " ".join(f"{c['type']}={c['status']}/{c.get('reason', '')}" for c in st.get("conditions", ()))
    checks = " ".join(f"{c['name']}={c['state']}" for c in st.get("admissionChecks", ()))
    return f"{key} ({conds}; checks {checks})"


async def _records_landed(done: dict[str, _Seen], grace_s: float) -> tuple[str, ...]:
    """Finished manager Workloads still without status.clusterName once `grace_s` has passed (or none
    left): the winner's check can land a moment after the finish (the job ran and its status came back
    first), and then it is still written; one that never lands is a Workload that does not say where
    it ran."""
    end = time.monotonic() + grace_s
    while True:
        left = tuple(sorted(key for key, seen in done.items() if seen.unrecorded))
        if not left or time.monotonic() >= end:
            return left
        await asyncio.sleep(0.25)


async def single_pass(plan: BenchPlan, workdir: Path, timeout_s: float, say: Say) -> PassResult:
    async with Stack(workdir / "single", clusters=(("manager", "manager"),), log_level="warning",
                     progress=lambda _l: None, kubesim_args=KUBESIM_ARGS) as stack:
        client = await KubeClient.from_kubeconfig(stack.kubeconfig("manager"))
        try:
            await _setup(client, plan, with_check=False)
            return await _measured(stack, _drive(client, plan, False, timeout_s, "single cluster", say))
        finally:
            await client.close()


async def multikueue_pass(plan: BenchPlan, workers: int, workdir: Path, timeout_s: float, dispatcher: str,
                          say: Say) -> tuple[PassResult, JobLedger]:
    names = [f"worker-{i + 1}" for i in range(workers)]
    clusters = (("manager", "manager"), *((n, "worker") for n in names))
    config = {"multiKueue": {"gcInterval": "30s", "origin": "bench", "workerLostTimeout": "5m",
                             "dispatcherName": dispatcher}}
    async with Stack(workdir / "mk", clusters=clusters, kueue_config=config, log_level="warning",
                     progress=lambda _l: None, timeout_s=180, kubesim_args=KUBESIM_ARGS) as stack:
        clients = {c: await KubeClient.from_kubeconfig(stack.kubeconfig(c)) for c, _ in clusters}
        try:
            await _setup(clients["manager"], plan, with_check=True)
            for obj in _mk_objects(names):
                await clients["manager"].create(obj["kind"], None, obj)
            await asyncio.gather(*(_setup(clients[n], plan, with_check=False) for n in names))
            await _wait_active(clients["manager"], len(names), say)
            async with _external(stack, dispatcher, workdir) as extra, JobLedger(
                    {n: clients[n] for n in names}) as ledger:
                result = await _measured(stack, _drive(clients["manager"], plan, True, timeout_s,
                                                       f"multikueue ({workers} workers)", say), extra)
            return result, ledger
        finally:
            for c in clients.values():
                await c.close()


@contextlib.asynccontextmanager
async def _external(stack: Stack, dispatcher: str, workdir: Path) -> Any:
    """The spread example as a process of the pass when it is the dispatcher (name -> pid), else none."""
    if dispatcher != SPREAD_DISPATCHER:
        yield {}
        return
    log = (workdir / "mk" / "spread.log").open("wb")
    proc = await asyncio.create_subprocess_exec(sys.executable, str(SPREAD), "--nats", stack.nats_url, "--quiet",
                                                stdout=log, stderr=asyncio.subprocess.STDOUT)
    try:
        yield {"spread": proc.pid}
    finally:
        await stop_child(proc, grace_s=10)
        log.close()


class _Named(msgspec.Struct, frozen=True):
    status: _St = _St()


async def _wait_active(manager: KubeClient, workers: int, say: Say, timeout_s: float = 180.0) -> None:
    """The clock starts once the setup is live (every MultiKueueCluster and the check Active), as it
    would be in a cluster that has been running: connecting to N workers is not throughput."""
    t0 = time.monotonic()
    while True:
        mkcs, _ = await manager.list("multikueuecluster")
        acs, _ = await manager.list("admissioncheck")
        conds = [msgspec.json.decode(r, type=_Named).status.conditions for r in [*mkcs, *acs]]
        active = [any(c.type == "Active" and c.status == "True" for c in cs) for cs in conds]
        if len(active) == workers + 1 and all(active):
            say(f"  multikueue setup active after {time.monotonic() - t0:.1f} s")
            return
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError(f"MultiKueue setup not active after {timeout_s:.0f} s")
        await asyncio.sleep(0.25)


def render(single: PassResult, mk: PassResult, ledger: JobLedger, workers: int, dispatcher: str) -> str:
    def line(r: PassResult) -> str:
        state = "TIMED OUT, " if r.timed_out else ""
        return (f"{r.label:<28} {state}{r.finished}/{r.jobs} jobs finished ({r.failed} failed) in {r.wall_s:6.1f} s"
                f"  = {r.throughput:6.2f} jobs/s")

    def cpu(r: PassResult) -> str:
        per = ", ".join(f"{n} {ms / max(r.finished, 1):.1f}" for n, ms in sorted(r.cpu_ms.items(), key=lambda i: -i[1]))
        return f"  CPU ms per job, {r.label}: total {sum(r.cpu_ms.values()) / max(r.finished, 1):.1f} ({per})"

    ratio = mk.throughput / single.throughput if single.throughput else 0.0
    twice = ledger.ran_more_than_once()
    overlap = "never" if not ledger.overlaps else f"SEEN {len(ledger.overlaps)} times, e.g. {ledger.overlaps[:3]}"
    lines = [
        line(single), line(mk), cpu(single), cpu(mk),
        f"throughput through MultiKueue: {ratio * 100:.0f} % of single-cluster (goal >= 50 %); dispatcher {dispatcher}",
        f"job in two workers: {overlap}"
        f" (checked by watching the Jobs of all {workers} workers)",
        f"jobs created on a worker: {len(ledger.created)} of {mk.jobs}; created again after the manager evicted "
        f"them (preemption, as in a single cluster): {len(twice)}",
        f"manager workloads finished without the worker they ran on (status.clusterName; an eviction under way"
        f" clears it, as in Kueue): {len(mk.unrecorded)}"
        + (f", e.g. {', '.join(mk.unrecorded[:3])}" if mk.unrecorded else ""),
    ]
    return "\n".join(lines)


async def run_multikueue_bench(plan: BenchPlan, workers: int, *, workdir: Path | None, timeout_s: float,
                               dispatcher: str, say: Say) -> tuple[str, bool]:
    with _workdir(workdir) as wd:
        say(f"single-cluster pass: {len(plan.workloads)} jobs")
        single = await single_pass(plan, wd, timeout_s, say)
        say(f"multikueue pass: manager + {workers} workers")
        mk, ledger = await multikueue_pass(plan, workers, wd, timeout_s, dispatcher, say)
    ok = (not single.timed_out and not mk.timed_out and not ledger.overlaps and mk.finished == mk.jobs
          and not mk.unrecorded)
    return render(single, mk, ledger, workers, dispatcher), ok
