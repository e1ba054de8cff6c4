"""`kq bench --burst N`: N Jobs created as fast as the API server takes them, against a modest
quota, and a check that no process grows without bound and no work is lost (issue 12).

The whole stack runs (every service its own process, one kubesim cluster). One ClusterQueue with
`--quota` cpus; N batch/v1 Jobs of one pod (1 cpu, `--runtime` each, kubesim's pod runtime
annotation) go to its LocalQueue, `--concurrency` creations in flight. Most stay pending. The run
ends when every Job has its Workload, every Workload is in the mirror (KQ_OBJECTS), and admission
has decided about each one (finished, admitted, or pending with the QuotaReserved=False condition
it writes), the ClusterQueue's pendingWorkloads agreeing; or at --timeout.

Reported: created / with a Workload / mirrored / pending / admitted / finished, dead letters
(KQ_EVENTS .dlq.), and per process the peak resident set (VmHWM) and CPU seconds. Progress lines
show each process's current RSS, so growth shows as it happens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import nats.errors
from nats.js import JetStreamContext, api

from kq import subjects
from kq.api.constants import QUEUE_NAME_LABEL
from kq.bench.burst_ledger import WorkloadLedger
from kq.bench.live import BenchRunError, _check_stack, _stack_processes, create_retrying
from kq.bench.metrics import ProcessStats, RunLog
from kq.bench.procstats import process_stats
from kq.bench.runner import watch_kind
from kq.kube import KubeClient
from kq.stack import Stack, StackError
from kq.visibility import PendingWorkloadsRequest, answer_decoder

CLUSTER = "manager"
NAMESPACE = "burst"
QUEUE = "burst"
FLAVOR = "default"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
PROGRESS_EVERY_S = 5.0
KUBESIM_HISTORY = 100_000  # the watch window kubesim keeps (its default is 10,000)

Say = Callable[[str], None]


class BurstResult(msgspec.Struct, kw_only=True):
    jobs: int
    created: int = 0
    workloads: int = 0
    mirrored: int = 0
    waiting: int = 0  # Workloads neither admitted nor finished
    marked_pending: int = 0  # ... of them with admission's QuotaReserved=False condition
    admitted: int = 0  # admitted now, not finished
    finished: int = 0
    cq_pending: int | None = None  # the ClusterQueue's status.pendingWorkloads (admission's count)
    cq_reserving: int | None = None
    listed_pending: int | None = None  # pending workloads admission listed (visibility API) at the end
    not_listed: list[str] = []  # waiting Workloads admission did not list: lost to it
    dead_letters: int = 0
    timed_out: bool = False
    error: str = ""  # why the run stopped early
    create_s: float | None = None  # when the last Job was created
    wall_s: float = 0.0
    processes: list[ProcessStats] = []
    runner: ProcessStats | None = None

    @property
    def counted(self) -> bool:
        """Admission's ClusterQueue status counts every Workload (pending, reserving, or finished)."""
        return (self.cq_pending is not None and self.cq_reserving is not None
                and self.cq_pending + self.cq_reserving + self.finished == self.workloads)

    @property
    def lost(self) -> int:
        """Jobs without a Workload or a mirrored Workload, Workloads admission does not know, dead letters."""
        missing = max(self.created - self.workloads, self.created - self.mirrored, 0)
        return missing + len(self.not_listed) + self.dead_letters

    @property
    def ok(self) -> bool:
        return (not self.timed_out and not self.error and self.created == self.jobs and self.listed_pending is not None
                and self.lost == 0)


def setup_objects(quota: int) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": QUEUE}, "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": str(quota)}]}]}]}},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": NAMESPACE},
         "spec": {"clusterQueue": QUEUE}},
    ]


def job_body(i: int, runtime: str) -> dict[str, Any]:
    """A user's Job: suspended, labelled with its LocalQueue, one pod of 1 cpu running `runtime`."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "namespace": NAMESPACE, "name": f"burst-{i:06d}", "labels": {QUEUE_NAME_LABEL: QUEUE}}, "spec": {
        "suspend": True, "parallelism": 1, "completions": 1,
        "template": {"metadata": {"annotations": {"kq.dev/runtime": runtime}},
                     "spec": {"restartPolicy": "Never", "containers": [
                         {"name": "main", "image": "registry.k8s.io/pause:3.9",
                          "resources": {"requests": {"cpu": "1"}}}]}}}}


async def _create_dict(client: KubeClient, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    await create_retrying(client, obj["kind"].lower(), meta.get("namespace"), meta["name"], obj)


async def count_subjects(js: JetStreamContext, stream: str, filter_subject: str, *, last_per_subject: bool) -> int:
    """Messages (or, last_per_subject, distinct subjects) matching a filter, from an ephemeral
    consumer's pending count: nothing is delivered."""
    cfg = api.ConsumerConfig(
        filter_subject=filter_subject, ack_policy=api.AckPolicy.NONE, inactive_threshold=30.0,
        deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT if last_per_subject else api.DeliverPolicy.ALL)
    info = await js.add_consumer(stream, cfg)
    try:
        return int(info.num_pending or 0)
    finally:
        with contextlib.suppress(Exception):
            await js.delete_consumer(stream, info.name)


class _CQ(msgspec.Struct, frozen=True):
    class Meta(msgspec.Struct, frozen=True, rename="camel"):
        resource_version: str = ""

    class Status(msgspec.Struct, frozen=True, rename="camel"):
        pending_workloads: int = 0
        reserving_workloads: int = 0

    metadata: Meta = Meta()
    status: Status = Status()


async def listed_pending(nc: Any, cluster_queue: str, total: int, page: int = 2000) -> set[str]:
    """Every pending workload admission lists for a ClusterQueue (Kueue's visibility API), paged from
    the back: a workload admitted meanwhile leaves the head and shifts the rest forward, so a page
    fetched later (nearer the head) overlaps the one before instead of skipping what moved."""
    out: set[str] = set()
    offset = max(0, total - page)
    while True:
        req = PendingWorkloadsRequest(cluster_queue=cluster_queue, offset=offset, limit=page)
        msg = await nc.request(subjects.visibility_subject(CLUSTER), msgspec.json.encode(req), timeout=60)
        ans = answer_decoder.decode(msg.data)
        if ans.error or ans.summary is None:
            raise BenchRunError(f"visibility: {ans.error or 'no answer'}")
        out.update(f"{w.metadata.namespace}/{w.metadata.name}" for w in ans.summary.items)
        if offset == 0:
            return out
        offset = max(0, offset - page)


async def run_burst(n: int, *, quota: int, runtime: str, timeout_s: float, concurrency: int, workdir: Path,
                    say: Say, startup_timeout_s: float = 120.0) -> BurstResult:
    res = BurstResult(jobs=n)
    stack = Stack(workdir / "stack", clusters=((CLUSTER, "manager"),), log_level="warning",
                  timeout_s=startup_timeout_s, progress=say,
                  kubesim_args=("--history", str(KUBESIM_HISTORY), "--log-level", "warning"))
    await stack.up()
    try:
        say(f"stack up; creating {n} Jobs against {quota} cpus of quota")
        await _drive(stack, n, quota, runtime, timeout_s, concurrency, say, res)
    except BenchRunError as e:
        res.error = str(e)  # the figures so far are still worth printing
    finally:
        res.processes = _stack_processes(stack)
        res.runner = process_stats("the bench (not in the sum)", os.getpid())
        try:
            await stack.down()
        except Exception as e:  # noqa: BLE001 - a process slow to die under load: the figures still count
            res.error = res.error or f"stopping the stack: {e}"
    return res


async def _drive(stack: Stack, n: int, quota: int, runtime: str, timeout_s: float, concurrency: int, say: Say,
                 res: BurstResult) -> None:
    client = await KubeClient.from_kubeconfig(stack.kubeconfig(CLUSTER), max_connections=concurrency + 8)
    ledger = WorkloadLedger()
    cq: list[_CQ] = []
    log = RunLog(mode="live")

    def on_cq(etype: str, raw: bytes) -> str:
        c = msgspec.json.decode(raw, type=_CQ)
        if etype != "DELETED":
            cq[:] = [c]
        return c.metadata.resource_version

    tasks: list[asyncio.Task[Any]] = []
    # Ctrl-C or SIGTERM ends the run like the timeout does, so the stack still comes down.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        tasks.append(asyncio.create_task(watch_kind(client, "workload", ledger.feed, log, count_drops=True)))
        tasks.append(asyncio.create_task(watch_kind(client, "clusterqueue", on_cq, log, count_drops=False)))
        for obj in setup_objects(quota):
            await _create_dict(client, obj)
        t0 = time.monotonic()
        creator = asyncio.create_task(_create_jobs(client, n, runtime, concurrency, res))
        tasks.append(creator)
        deadline = t0 + timeout_s
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), min(PROGRESS_EVERY_S, max(0.0, deadline - time.monotonic())))
            if creator.done() and creator.exception() is not None:
                raise BenchRunError(f"creating Jobs: {creator.exception()}")
            if creator.done() and res.create_s is None:
                res.create_s = time.monotonic() - t0
            for t in tasks[:2]:
                if t.done() and not t.cancelled() and t.exception() is not None:
                    raise BenchRunError(f"watching: {t.exception()}")
            _check_stack(stack)
            await _fill(stack, ledger, cq, res)
            res.wall_s = time.monotonic() - t0
            say(_progress(res, stack))
            if creator.done() and res.workloads == res.created == res.mirrored and res.counted:
                # Admission counts them all; now ask it for each waiting one by name.
                try:
                    listed = await listed_pending(stack.bus.nc, QUEUE, res.cq_pending or 0)
                except (nats.errors.Error, TimeoutError) as e:  # a busy admission: ask again next round
                    say(f"  admission's visibility API did not answer ({e!r}); asking again")
                    listed = None
                if listed is not None:
                    res.not_listed = ledger.not_in(listed)
                    res.listed_pending = len(listed)
                if listed is not None and not res.not_listed:
                    say(f"every Job accounted for at t={res.wall_s:.1f}s ({len(listed)} listed pending)")
                    break
                elif listed is not None:
                    say(f"  {len(res.not_listed)} waiting Workloads not listed by admission, e.g. "
                        f"{res.not_listed[:3]}")
            if time.monotonic() >= deadline or stop.is_set():
                res.timed_out = True
                say("interrupted" if stop.is_set() else f"timed out after {timeout_s:.0f}s")
                break
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.close()


async def _create_jobs(client: KubeClient, n: int, runtime: str, concurrency: int, res: BurstResult) -> None:
    """As fast as the API server takes them, `concurrency` in flight; the first failure ends it."""
    sem = asyncio.Semaphore(concurrency)
    failed: list[BaseException] = []

    async def one(i: int) -> None:
        try:
            await _create_dict(client, job_body(i, runtime))
            res.created += 1
        except Exception as e:  # noqa: BLE001 - raised below, in the creating loop
            failed.append(e)
        finally:
            sem.release()

    pending: set[asyncio.Task[None]] = set()
    for i in range(n):
        await sem.acquire()
        if failed:
            break
        t = asyncio.create_task(one(i))
        pending.add(t)
        t.add_done_callback(pending.discard)
    await asyncio.gather(*pending)
    if failed:
        raise failed[0]


async def _fill(stack: Stack, ledger: WorkloadLedger, cq: list[_CQ], res: BurstResult) -> None:
    js = stack.bus.js
    res.workloads = len(ledger)
    res.admitted, res.finished = ledger.counts["admitted"], ledger.counts["finished"]
    res.marked_pending = ledger.counts["pending"]
    res.waiting = ledger.counts["new"] + res.marked_pending
    if cq:
        res.cq_pending, res.cq_reserving = cq[0].status.pending_workloads, cq[0].status.reserving_workloads
    with contextlib.suppress(Exception):  # a slow bus: keep the last figures
        res.mirrored = await count_subjects(js, subjects.OBJECTS_STREAM,
                                            subjects.object_filter(CLUSTER, "workload"), last_per_subject=True)
        res.dead_letters = await count_subjects(js, subjects.EVENTS_STREAM, subjects.DEAD_LETTERS_ALL,
                                                last_per_subject=False)


def _rss_mib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def _progress(res: BurstResult, stack: Stack) -> str:
    rss = []
    for p in stack.state.processes if stack.state is not None else ():
        mib = _rss_mib(p.pid)
        if mib is not None:
            rss.append(f"{p.name} {mib}")
    return (f"  t={res.wall_s:7.1f}s  created {res.created}/{res.jobs}  workloads {res.workloads}  "
            f"mirrored {res.mirrored}  waiting {res.waiting} (cq pending {res.cq_pending})  admitted {res.admitted}  "
            f"finished {res.finished}  dlq {res.dead_letters}  | RSS MiB: "
            + ", ".join(rss))


def render(res: BurstResult, argv_line: str) -> str:
    lines = [argv_line,
             f"Jobs created {res.created:,} of {res.jobs:,}"
             + (f" in {res.create_s:.1f} s" if res.create_s is not None else "")
             + f"; run {'timed out' if res.timed_out else 'settled'} at {res.wall_s:.1f} s",
             f"Workloads {res.workloads:,}, mirrored {res.mirrored:,}; waiting {res.waiting:,} "
             f"({res.marked_pending:,} marked Pending; ClusterQueue pendingWorkloads {res.cq_pending}, "
             f"listed by admission {res.listed_pending}), admitted {res.admitted:,}, finished {res.finished:,}; "
             f"dead letters {res.dead_letters}",
             f"lost: {res.lost} ({'nothing lost' if res.lost == 0 else 'LOST WORK'})"
             + (f"; stopped early: {res.error}" if res.error else ""),
             "",
             "| process | peak RSS (VmHWM) | CPU s |",
             "|---|---|---|"]
    for p in [*res.processes, *([res.runner] if res.runner else [])]:
        lines.append(f"| {p.name} | {p.max_rss_bytes / (1 << 20):.0f} MiB | {p.cpu_ms / 1000:.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kq bench --burst", description=__doc__.split("\n\n")[0])
    p.add_argument("--burst", type=int, required=True, metavar="N", help="Jobs created at once")
    p.add_argument("--quota", type=int, default=20, help="cpus of the ClusterQueue's quota (default 20)")
    p.add_argument("--runtime", default="2s", help="each Job's pod run time (default 2s)")
    p.add_argument("--timeout", type=float, default=1800.0, metavar="SECONDS",
                   help="longest run after the stack is up (default 1800)")
    p.add_argument("--concurrency", type=int, default=64, metavar="N", help="creations in flight (default 64)")
    p.add_argument("--workdir", type=Path, metavar="DIR", help="keep the stack's files (logs, bus store) here")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    if args.burst < 1 or args.quota < 1 or args.timeout <= 0 or args.concurrency < 1:
        print("error: --burst, --quota and --concurrency must be >= 1, --timeout > 0", file=sys.stderr)
        return 2

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    try:
        with tempfile.TemporaryDirectory(prefix="kq-bench-burst-") as tmp:
            wd = args.workdir or Path(tmp)
            wd.mkdir(parents=True, exist_ok=True)
            res = asyncio.run(run_burst(args.burst, quota=args.quota, runtime=args.runtime, timeout_s=args.timeout,
                                        concurrency=args.concurrency, workdir=wd, say=say))
    except (BenchRunError, StackError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print(render(res, f"kq bench --burst {args.burst} --quota {args.quota} --runtime {args.runtime}"))
    return 0 if res.ok else 1
