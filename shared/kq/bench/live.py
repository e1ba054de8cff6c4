"""`kq bench CONFIG`: the whole stack, every service its own process, driven through the API.

    start-up   Stack.up(): nats-server, kubesim, every service, each healthy   (reported apart)
    t = 0      the scheduler is up; the runner starts watching Workloads and ClusterQueues
               flavor, cohorts, then per queue its namespace, ClusterQueue and LocalQueue
               the workloads, the k-th of each set at k x creationIntervalMs (runner.py mimics runs)
    wall       every ClusterQueue reports no pending and no reserving workloads, every workload
               created and seen finished
    shutdown   peak memory and CPU of every process read from /proc, then Stack.down() (reported apart)

Objects go through kubesim's Kubernetes API with the same client a user's `kq apply` uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from kq.bench.generate import BenchPlan, WorkloadPlan, setup_objects, workload_object
from kq.bench.hops import WORKLOADS
from kq.bench.metrics import ProcessStats, RunLog
from kq.bench.pipeline import NO_ANSWER, Pipeline
from kq.bench.procstats import process_stats
from kq.bench.runner import Clock, Runner, watch_kind
from kq.kube import (
    AlreadyExists,
    KubeClient,
    KubeError,
    ServerError,
    Throttled,
    Unreachable,
    resource_path,
    retry_delay,
)
from kq.stack import Stack

CLUSTER = "manager"
PROGRESS_EVERY_S = 1.0
# Settling after the set-up (--queue-series): the stack counts as quiet when its processes used less
# than this much CPU in one sampling period, every ClusterQueue having reported its first status.
SETTLE_PERIOD_S = 1.0
SETTLE_QUIET_CPU_MS = 100
_CREATE_TRIES = 10
_RETRY_S = 0.2
_BATCH = 64  # workloads due at the same moment sent in one pipelined batch
_encoder = msgspec.json.Encoder()

Say = Callable[[str], None]


class BenchRunError(RuntimeError):
    pass


@contextlib.contextmanager
def _workdir(path: Path | None) -> Iterator[Path]:
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="kq-bench-") as tmp:
        yield Path(tmp)


def _kind(obj: msgspec.Struct) -> str:
    return str(getattr(obj, "kind")).lower()  # noqa: B009 - setup objects are plain msgspec.Structs; each has kind and metadata


async def create_retrying(client: KubeClient, kind: str, namespace: str | None, name: str, body: Any,
                          *, tried: bool = False) -> None:
    """Create, retrying what is transient; AlreadyExists after a retry means the first try landed
    (`tried`: an earlier try got no answer, so it may have landed too)."""
    for attempt in range(_CREATE_TRIES):
        try:
            await client.create(kind, namespace, body)
            return
        except AlreadyExists:
            if attempt > 0 or tried:
                return
            raise
        except Throttled as e:
            await asyncio.sleep(retry_delay(e, 0.0))
        except (ServerError, Unreachable):
            await asyncio.sleep(_RETRY_S * (attempt + 1))
    raise BenchRunError(f"could not create {kind} {namespace}/{name} after {_CREATE_TRIES} tries")


async def _create(client: KubeClient, obj: msgspec.Struct) -> None:
    meta = getattr(obj, "metadata")  # noqa: B009 - setup objects are plain msgspec.Structs; each has kind and metadata
    await create_retrying(client, _kind(obj), meta.namespace or None, meta.name, obj)


async def _setup(client: KubeClient, plan: BenchPlan, concurrency: int) -> None:
    objs = setup_objects(plan)
    cluster_scoped = ("topology", "node", "resourceflavor", "cohort")
    head = [o for o in objs if _kind(o) in cluster_scoped]
    sem = asyncio.Semaphore(concurrency)

    async def one(o: msgspec.Struct) -> None:
        async with sem:
            await _create(client, o)

    await asyncio.gather(*(one(o) for o in head))

    async def queue_objects(group: list[msgspec.Struct]) -> None:
        async with sem:
            for o in group:  # namespace, ClusterQueue, LocalQueue: in order
                await _create(client, o)

    rest = [o for o in objs if _kind(o) not in cluster_scoped]
    await asyncio.gather(*(queue_objects(rest[i:i + 3]) for i in range(0, len(rest), 3)))


class _Creator:
    """Creates the workloads on their absolute schedule (a late one does not delay the next).

    Workloads due at the same moment (the k-th of every queue) go out together, pipelined when
    `pipeline` is given (kq.bench.pipeline); what gets no 201 there is created one at a time."""

    def __init__(self, client: KubeClient, plan: BenchPlan, clock: Clock, log: RunLog, concurrency: int,
                 pipeline: Pipeline | None = None) -> None:
        self.client = client
        self.plan = plan
        self.clock = clock
        self.log = log
        self.pipeline = pipeline
        self.sem = asyncio.Semaphore(concurrency)
        self.done = asyncio.Event()
        self.error: BaseException | None = None

    async def _one(self, w: WorkloadPlan, *, tried: bool = False) -> None:
        try:
            await create_retrying(self.client, "workload", w.namespace, w.name, workload_object(w), tried=tried)
            self.log.created += 1
        except Exception as e:  # noqa: BLE001 - reported by _wait_done; the run stops
            self.error = self.error or e
        finally:
            self.sem.release()

    async def _batch(self, batch: list[WorkloadPlan]) -> None:
        assert self.pipeline is not None
        p = self.pipeline
        try:
            answers = await p.send([p.request("POST", resource_path("workload", w.namespace),
                                              _encoder.encode(workload_object(w))) for w in batch])
        except Exception as e:  # noqa: BLE001 - reported by _wait_done; the run stops
            self.error = self.error or e
            answers = []
        finally:
            self.sem.release()
        retry: list[Awaitable[None]] = []
        for w, answer in zip(batch, answers, strict=False):
            if answer.status == 201:
                self.log.created += 1
            else:  # one at a time, as without the pipeline (an unanswered one may have landed)
                await self.sem.acquire()
                retry.append(self._one(w, tried=answer.status == NO_ANSWER))
        await asyncio.gather(*retry)

    def _due(self, i: int) -> int:
        """The end of the run of workloads from i due at the same moment (at most _BATCH)."""
        at = self.plan.workloads[i].at_ms
        end = i + 1
        while end < len(self.plan.workloads) and end - i < _BATCH and self.plan.workloads[end].at_ms == at:
            end += 1
        return end

    async def run(self, start_ms: float) -> None:
        tasks: list[asyncio.Task[None]] = []
        workloads = self.plan.workloads
        try:
            i = 0
            while i < len(workloads):
                w = workloads[i]
                delay = (start_ms + w.at_ms - self.clock.now_ms()) / 1000.0
                if delay > 0:
                    await asyncio.sleep(delay)
                await self.sem.acquire()
                if self.error is not None:
                    break
                if self.pipeline is None:
                    tasks.append(asyncio.create_task(self._one(w)))
                    i += 1
                    continue
                end = self._due(i)
                tasks.append(asyncio.create_task(self._batch(list(workloads[i:end]))))
                i = end
            await asyncio.gather(*tasks)
            self.log.all_created_ms = self.clock.now_ms()
        finally:
            for t in tasks:
                t.cancel()
            self.done.set()


def _progress_line(clock: Clock, log: RunLog, runner: Runner, total: int) -> str:
    busy = runner.tracker.busy_queues()
    return (f"  t={clock.now_ms() / 1000:7.1f}s  created {log.created}/{total}  admitted {runner.admitted}  "
            f"finished {runner.finished}  busy queues {len(busy)}")


@contextlib.asynccontextmanager
async def _tasks() -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks: list[asyncio.Task[None]] = []
    try:
        yield tasks
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def run_live(plan: BenchPlan, *, timeout_s: float = 600.0, workdir: Path | None = None,
                   say: Say | None = None, concurrency: int = 64, startup_timeout_s: float = 120.0,
                   replicas: dict[str, int] | None = None, settle_s: float = 0.0,
                   journal: Path | None = None) -> RunLog:
    """`settle_s` > 0: after creating the queues, wait (up to that long) until every ClusterQueue has
    reported and the stack is quiet before snapshotting its CPU and creating workloads, so the queues'
    set-up (mirroring them, their first statuses) is not counted as the workloads' cost. `journal`:
    kubesim writes every committed Workload change there with its commit time (kq.bench.hops)."""
    say = say or (lambda _line: None)
    log = RunLog(mode="live")
    history = max(100_000, 10 * len(plan.workloads))  # kubesim's watch window: a slow watcher must not see 410
    with _workdir(workdir) as wd:
        t_start = time.monotonic()
        stack = Stack(wd / "stack", clusters=((CLUSTER, "manager"),), log_level="warning",
                      timeout_s=startup_timeout_s, progress=say, replicas=replicas,
                      kubesim_args=("--history", str(history), "--log-level", "warning", *_journal_args(journal)))
        await stack.up()
        try:
            log.startup_ms = (time.monotonic() - t_start) * 1000.0
            clock = Clock()
            say(f"stack up in {log.startup_ms / 1000:.1f}s; t=0 now")
            await _drive(stack, plan, clock, log, timeout_s, say, concurrency, settle_s)
        finally:
            t_down = time.monotonic()
            await stack.down()
            log.shutdown_ms = (time.monotonic() - t_down) * 1000.0
    return log


def _journal_args(journal: Path | None) -> tuple[str, ...]:
    if journal is None:
        return ()
    journal.unlink(missing_ok=True)  # kubesim appends: one run's records only
    return ("--journal", str(journal.resolve()), "--journal-resources", WORKLOADS)


async def _drive(stack: Stack, plan: BenchPlan, clock: Clock, log: RunLog, timeout_s: float, say: Say,
                 concurrency: int, settle_s: float = 0.0) -> None:
    client = await KubeClient.from_kubeconfig(stack.kubeconfig(CLUSTER), max_connections=concurrency * 2 + 8)
    pipeline = await Pipeline.for_kubeconfig(str(stack.kubeconfig(CLUSTER)))
    runner = Runner(client, plan, clock, log, max_patches=concurrency, pipeline=pipeline)
    try:
        async with _tasks() as tasks:
            tasks.append(asyncio.create_task(watch_kind(client, "workload", runner.on_workload, log, count_drops=True)))
            tasks.append(asyncio.create_task(watch_kind(client, "clusterqueue", runner.on_cluster_queue, log,
                                                        count_drops=False)))
            try:
                await _setup(client, plan, concurrency)
            except KubeError as e:
                raise BenchRunError(f"creating the queues: {e}") from e
            if settle_s > 0:
                await _settle(stack, runner, clock, settle_s, say)
            log.processes_at_start = _stack_processes(stack)
            log.workloads_from_ms = clock.now_ms()
            log.runner_at_start = process_stats("the runner (not in the sum)", os.getpid())
            say(f"queues created at t={clock.now_ms() / 1000:.1f}s; creating {len(plan.workloads)} workloads")
            creator = _Creator(client, plan, clock, log, concurrency, pipeline)
            tasks.append(asyncio.create_task(creator.run(clock.now_ms())))
            await _wait_done(stack, plan, clock, log, runner, creator, timeout_s, say, tasks)
            log.processes = _stack_processes(stack)
            log.runner = process_stats("the runner (not in the sum)", os.getpid())
    finally:
        runner.close()
        if pipeline is not None:
            pipeline.close()
        await client.close()
    if runner.finish_failures:
        say(f"{len(runner.finish_failures)} finish patches failed, e.g. {runner.finish_failures[0]}")


async def _wait_done(stack: Stack, plan: BenchPlan, clock: Clock, log: RunLog, runner: Runner, creator: _Creator,
                     timeout_s: float, say: Say, tasks: list[asyncio.Task[None]]) -> None:
    deadline = time.monotonic() + timeout_s
    next_progress = time.monotonic() + PROGRESS_EVERY_S
    total = len(plan.workloads)
    while True:
        if creator.error is not None:
            raise BenchRunError(f"creating workloads: {creator.error}")
        for t in tasks:
            if t.done() and not t.cancelled() and t.exception() is not None:
                raise BenchRunError(f"watching: {t.exception()}")
        if creator.done.is_set() and runner.tracker.idle() and runner.finished >= log.created:
            log.completed_ms = clock.now_ms()
            say(_progress_line(clock, log, runner, total))
            say(f"done at t={log.completed_ms / 1000:.1f}s")
            break
        now = time.monotonic()
        if now >= deadline:
            log.timed_out = True
            say(_progress_line(clock, log, runner, total))
            busy = runner.tracker.busy_queues()
            say(
                f"timed out after {timeout_s:.0f}s; busy queues: {', '.join(busy[:5])}{' ...' if len(busy) > 5 else ''}"
            )
            break
        if now >= next_progress:
            next_progress = now + PROGRESS_EVERY_S
            say(_progress_line(clock, log, runner, total))
            _check_stack(stack)
        runner.changed.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(runner.changed.wait(), timeout=min(PROGRESS_EVERY_S, max(0.01, deadline - now)))
    log.stopped_ms = clock.now_ms()


async def _settle(stack: Stack, runner: Runner, clock: Clock, settle_s: float, say: Say) -> None:
    deadline = time.monotonic() + settle_s
    before = sum(p.cpu_ms for p in _stack_processes(stack))
    while time.monotonic() < deadline:
        await asyncio.sleep(SETTLE_PERIOD_S)
        _check_stack(stack)
        now = sum(p.cpu_ms for p in _stack_processes(stack))
        quiet, before = now - before < SETTLE_QUIET_CPU_MS, now
        if quiet and runner.tracker.idle():
            say(f"queues settled at t={clock.now_ms() / 1000:.1f}s")
            return
    say(f"the queues did not settle within {settle_s:.0f}s (busy queues {len(runner.tracker.busy_queues())}); "
        "going on: the set-up's tail is counted")


def _check_stack(stack: Stack) -> None:
    """A service that died makes the rest of the run meaningless: say so at once."""
    for p in stack.state.processes if stack.state is not None else ():
        if p.role == "service":
            child = stack.process(p.service or "", p.instance or "0")
            if child is not None and child.exit_code() is not None:
                raise BenchRunError(f"{p.name} exited with code {child.exit_code()}; see {p.log}")


def _stack_processes(stack: Stack) -> list[ProcessStats]:
    out: list[ProcessStats] = []
    for p in stack.state.processes if stack.state is not None else ():
        st = process_stats(p.name, p.pid)
        if st is not None:
            out.append(st)
    return out
