"""The live runner's eyes and hands: watch Workloads and ClusterQueues through the API, record
what it sees, and mimic execution as Kueue's runner does (runner/controller/controller.go).

- No pods run. When a workload is seen Admitted (and neither evicted nor finished) a timer of its
  runtimeMs starts; when it fires the runner sets Finished=True (status merge patch with the
  resourceVersion it last saw as precondition; on 409 it re-reads and decides again).
- Seen not admitted, or evicted, before the timer fires: the timer is cancelled; when admitted
  again the workload runs its full runtime again. (Releasing an evicted workload's quota is the
  watcher's job for a workload without a job, so the runner does not do it.)
- Every ClusterQueue status seen becomes a CQReport, every change of a workload's
  (admitted, evicted, finished) a WorkloadSeen, times in ms since the scheduler started.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

import msgspec

from kq.api.meta import Condition, parse_time
from kq.bench.generate import BenchPlan
from kq.bench.metrics import CompletionTracker, CQReport, RunLog, WorkloadSeen
from kq.bench.pipeline import Pipeline
from kq.kube import (
    Conflict,
    Gone,
    KubeClient,
    KubeError,
    NotFound,
    ServerError,
    StreamBroken,
    Throttled,
    Unreachable,
    resource_path,
    retry_delay,
)

FINISH_REASON = "ByTest"
FINISH_MESSAGE = "By test runner"
WATCH_TIMEOUT_S = 300.0
_RETRY_S = 0.2
_MAX_FINISH_TRIES = 20


# --- the few fields the runner reads (lenient: everything else is ignored) ----------------------------


class _Meta(msgspec.Struct, frozen=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    resource_version: str = ""
    creation_timestamp: str | None = None


class _WorkloadStatus(msgspec.Struct, frozen=True):
    conditions: tuple[Condition, ...] = ()


class _Workload(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()
    status: _WorkloadStatus = _WorkloadStatus()


class _ResourceUsage(msgspec.Struct, frozen=True):
    name: str = ""
    total: str | int | float = "0"


class _FlavorUsage(msgspec.Struct, frozen=True):
    name: str = ""
    resources: tuple[_ResourceUsage, ...] = ()


class _CQStatus(msgspec.Struct, frozen=True, rename="camel"):
    conditions: tuple[Condition, ...] = ()
    flavors_reservation: tuple[_FlavorUsage, ...] = ()
    flavors_usage: tuple[_FlavorUsage, ...] = ()
    pending_workloads: int = 0
    reserving_workloads: int = 0


class _ClusterQueue(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()
    status: _CQStatus = _CQStatus()


_wl_decoder = msgspec.json.Decoder(_Workload)
_cq_decoder = msgspec.json.Decoder(_ClusterQueue)
_encoder = msgspec.json.Encoder()


def _true(conditions: tuple[Condition, ...], type_: str) -> Condition | None:
    for c in conditions:
        if c.type == type_:
            return c if c.status == "True" else None
    return None


def _milli(value: str | int | float) -> int:
    from kq.quantity import to_milli

    try:
        return to_milli(value)
    except ValueError:
        return 0


def _first_total(flavors: tuple[_FlavorUsage, ...]) -> int:
    if flavors and flavors[0].resources:
        return _milli(flavors[0].resources[0].total)
    return 0


def _rfc3339_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Clock:
    """ms since the scheduler started, on the monotonic clock; API times converted to the same axis."""

    def __init__(self) -> None:
        self.t0_mono = time.monotonic()
        self.t0_epoch = time.time()

    def now_ms(self) -> float:
        return (time.monotonic() - self.t0_mono) * 1000.0

    def api_ms(self, timestamp: str | None) -> float | None:
        if not timestamp:
            return None
        try:
            return (parse_time(timestamp).timestamp() - self.t0_epoch) * 1000.0
        except ValueError:
            return None


class Runner:
    def __init__(self, client: KubeClient, plan: BenchPlan, clock: Clock, log: RunLog,
                 *, max_patches: int = 32, pipeline: Pipeline | None = None) -> None:
        self.client = client
        self.pipeline = pipeline
        self._due: list[str] = []  # timers fired this loop turn: their finishes go out as one batch
        self.clock = clock
        self.log = log
        self.runtime_ms = {w.key: w.runtime_ms for w in plan.workloads}
        self.tracker = CompletionTracker(q.name for q in plan.queues)
        self.seen: dict[str, tuple[bool, bool, bool]] = {}  # key -> (admitted, evicted, finished)
        self.versions: dict[str, int] = {}  # key -> newest resourceVersion handled
        self.latest: dict[str, _Workload] = {}  # running workloads as last seen (for the finish patch)
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.admitted = 0
        self.finished = 0
        self.finish_failures: list[str] = []
        self.changed = asyncio.Event()  # set on anything that may complete the run
        self._patches = asyncio.Semaphore(max_patches)
        self._tasks: set[asyncio.Task[None]] = set()

    # --- workloads -----------------------------------------------------------------------------

    def on_workload(self, etype: str, raw: bytes) -> str:
        wl = _wl_decoder.decode(raw)
        meta = wl.metadata
        if etype == "DELETED":
            return meta.resource_version
        key = f"{meta.namespace}/{meta.name}"
        # Patch answers and re-reads arrive beside the watch: never let an older version win.
        rv = int(meta.resource_version) if meta.resource_version.isdigit() else None
        if rv is not None:
            if rv <= self.versions.get(key, -1):
                return meta.resource_version
            self.versions[key] = rv
        conds = wl.status.conditions
        admitted_c = _true(conds, "Admitted")
        state = (admitted_c is not None, _true(conds, "Evicted") is not None, _true(conds, "Finished") is not None)
        prev = self.seen.get(key)
        if prev != state:
            now = self.clock.now_ms()
            self.seen[key] = state
            self.log.workload_events.append(WorkloadSeen(
                t_ms=now, key=key, admitted=state[0], evicted=state[1], finished=state[2],
                created_ms=self.clock.api_ms(meta.creation_timestamp),
                admitted_ms=self.clock.api_ms(admitted_c.last_transition_time) if admitted_c is not None else None,
                rv=rv or 0,
            ))
            if state[0] and (prev is None or not prev[0]):
                self.admitted += 1
            if state[2] and (prev is None or not prev[2]):
                self.finished += 1
                self.changed.set()
        self._mimic(key, wl, state)
        return meta.resource_version

    def _mimic(self, key: str, wl: _Workload, state: tuple[bool, bool, bool]) -> None:
        admitted, evicted, finished = state
        running = admitted and not evicted and not finished
        if running:
            self.latest[key] = wl
            if key not in self.timers:
                delay = self.runtime_ms.get(key, 0) / 1000.0
                loop = asyncio.get_running_loop()
                self.timers[key] = loop.call_later(delay, self._fire, key)
        else:
            self.latest.pop(key, None)
            handle = self.timers.pop(key, None)
            if handle is not None:
                handle.cancel()

    def _fire(self, key: str) -> None:
        if self.pipeline is None:
            self._start(self._finish(key))
            return
        if not self._due:
            asyncio.get_running_loop().call_soon(self._fire_due)
        self._due.append(key)

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _fire_due(self) -> None:
        due, self._due = self._due, []
        self._start(self._finish_batch(due))

    async def _finish_batch(self, keys: list[str]) -> None:
        """The finishes of timers that fired together, pipelined; anything but a 200 (or a 404: gone)
        is finished one at a time as without the pipeline (a 409 re-reads and decides again)."""
        assert self.pipeline is not None
        p = self.pipeline
        sent: list[str] = []
        requests: list[bytes] = []
        for key in keys:
            body = self._finish_body(key)
            if body is not None:
                ns, name = key.split("/", 1)
                sent.append(key)
                requests.append(p.request("PATCH", resource_path("workload", ns, name, "status"), body,
                                          "application/merge-patch+json"))
        if not requests:
            return
        async with self._patches:
            answers = await p.send(requests)
        for key, answer in zip(sent, answers, strict=True):
            if answer.status == 200:
                self.on_workload("MODIFIED", answer.body)  # the finish as written, without waiting for the watch
            elif answer.status != 404:
                self._start(self._finish(key))

    def _finish_body(self, key: str) -> bytes | None:
        """The finish patch of a workload still running (resourceVersion as precondition), else None."""
        if self.timers.get(key) is None:
            return None  # cancelled meanwhile (evicted): it will run again when readmitted
        wl = self.latest.get(key)
        if wl is None:
            return None
        conds = [c for c in wl.status.conditions if c.type != "Finished"]
        conds.append(Condition(type="Finished", status="True", reason=FINISH_REASON, message=FINISH_MESSAGE,
                               last_transition_time=_rfc3339_now()))
        return _encoder.encode({"metadata": {"resourceVersion": wl.metadata.resource_version},
                                "status": {"conditions": conds}})

    async def _finish(self, key: str) -> None:
        ns, name = key.split("/", 1)
        async with self._patches:
            for _ in range(_MAX_FINISH_TRIES):
                body = self._finish_body(key)
                if body is None:
                    return
                try:
                    answer = await self.client.patch("workload", ns, name, body, patch_type="merge",
                                                     subresource="status")
                except Conflict:
                    fresh = await self._reread(ns, name)
                    if fresh is None:
                        return
                    self.on_workload("MODIFIED", fresh)  # decides again: finish, or not any more
                    continue
                except NotFound:
                    return
                except Throttled as e:
                    await asyncio.sleep(retry_delay(e, 0.0))
                    continue
                except (Unreachable, ServerError):
                    await asyncio.sleep(_RETRY_S)
                    continue
                except KubeError as e:
                    self.finish_failures.append(f"{key}: {e}")
                    return
                self.on_workload("MODIFIED", answer)  # the finish as written, without waiting for the watch
                return
            self.finish_failures.append(f"{key}: not finished after {_MAX_FINISH_TRIES} tries")

    async def _reread(self, ns: str, name: str) -> bytes | None:
        for _ in range(_MAX_FINISH_TRIES):
            try:
                return await self.client.get("workload", ns, name)
            except (Unreachable, Throttled, KubeError):
                await asyncio.sleep(_RETRY_S)
        return None

    # --- cluster queues --------------------------------------------------------------------------

    def on_cluster_queue(self, etype: str, raw: bytes) -> str:
        cq = _cq_decoder.decode(raw)
        if etype == "DELETED":
            return cq.metadata.resource_version
        st = cq.status
        active_c = next((c for c in st.conditions if c.type == "Active"), None)
        report = CQReport(
            t_ms=self.clock.now_ms(), cq=cq.metadata.name, usage_milli=_first_total(st.flavors_usage),
            reserved_milli=_first_total(st.flavors_reservation), pending=st.pending_workloads,
            reserving=st.reserving_workloads, active=active_c is None or active_c.status == "True",
        )
        self.log.cq_reports.append(report)
        self.tracker.feed(report)
        self.changed.set()
        return cq.metadata.resource_version

    # --- end ---------------------------------------------------------------------------------------

    def close(self) -> None:
        for handle in self.timers.values():
            handle.cancel()
        self.timers.clear()
        for task in self._tasks:
            task.cancel()


Handler = Callable[[str, bytes], str]


async def watch_kind(client: KubeClient, kind: str, handle: Handler, log: RunLog, *, count_drops: bool) -> None:
    """List, then watch for ever (cancel to stop): resume after a cut stream; re-list after 410
    (counted as dropped events when `count_drops`: what happened in between was not seen)."""
    items, rv = await client.list(kind)
    for raw in items:
        handle("ADDED", raw)
    while True:
        try:
            async for ev in client.watch(kind, rv, timeout_s=WATCH_TIMEOUT_S):
                if ev.type == "BOOKMARK":
                    rv = _bookmark_rv(ev.raw) or rv
                    continue
                rv = handle(ev.type, ev.raw) or rv
        except Gone:
            if count_drops:
                log.dropped_events += 1
            items, rv = await client.list(kind)
            for raw in items:
                handle("MODIFIED", raw)
        except (StreamBroken, Unreachable, Throttled):
            await asyncio.sleep(_RETRY_S)


class _BookmarkMeta(msgspec.Struct, frozen=True, rename="camel"):
    resource_version: str = ""


class _Bookmark(msgspec.Struct, frozen=True):
    metadata: _BookmarkMeta = _BookmarkMeta()


_bookmark_decoder = msgspec.json.Decoder(_Bookmark)


def _bookmark_rv(raw: bytes) -> str:
    try:
        return _bookmark_decoder.decode(raw).metadata.resource_version
    except (msgspec.DecodeError, msgspec.ValidationError):
        return ""
