"""The pods-ready shell against a real nats-server: mirror records in, typed commands out.

The Term runs in-process (its core is tested on its own in tests/unit/podsready); Workloads are
published to the mirror as the watcher would. Deadlines are the Admitted condition's time
(whole seconds, as Kubernetes writes it) plus the timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import msgspec
import pytest
from support.wait import eventually

from kq import subjects
from kq.messages import Command, EvictWorkload, Fence, FinishRequeueBackoff, command_decoder
from kq.mirror import mirror_msg_id, record_headers
from kq.runtime import Bus
from services.podsready.core.model import PodsReadyConfig
from services.podsready.handlers import Term, TermSettings

pytestmark = pytest.mark.timeout(60)
C = "c1"
CFG = PodsReadyConfig(timeout_s=2.0, recovery_timeout_s=None, backoff_base_s=30)


def _ts(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(at)))


def workload(name: str, rv: int, *, admitted: str | None = None, ready: bool = False,
             requeue_at: str | None = None) -> dict[str, Any]:
    conds: list[dict[str, Any]] = []
    if admitted is not None:
        conds += [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": admitted}
                  for t in ("QuotaReserved", "Admitted")]
        conds.append({"type": "PodsReady", "status": "True" if ready else "False",
                      "reason": "Started" if ready else "WaitForStart", "message": "", "lastTransitionTime": admitted})
    status: dict[str, Any] = {"conditions": conds}
    if requeue_at is not None:
        conds += [{"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout", "message": "",
                   "lastTransitionTime": _ts(time.time())},
                  {"type": "Requeued", "status": "False", "reason": "PodsReadyTimeout", "message": "",
                   "lastTransitionTime": _ts(time.time())}]
        status["requeueState"] = {"count": 1, "requeueAt": requeue_at}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": str(rv)},
            "spec": {"queueName": "lq"}, "status": status}


async def put(bus: Bus, doc: dict[str, Any], *, delete: bool = False) -> None:
    md = doc["metadata"]
    op: Literal["put", "delete"] = "delete" if delete else "put"
    await bus.publish(subjects.object_subject(C, "workload", "ns", md["name"]), msgspec.json.encode(doc),
                      msg_id=mirror_msg_id(C, "workload", "ns", md["name"], md["resourceVersion"], op),
                      headers=record_headers(op, md["resourceVersion"], md["uid"]))


class Commands:
    """Every command the service sends to cluster c1, with when it was seen."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, Command]] = []

    async def cb(self, msg: Any) -> None:
        self.seen.append((time.time(), command_decoder.decode(msg.data)))

    def of(self, kind: type, name: str | None = None) -> list[tuple[float, Any]]:
        return [(t, c) for t, c in self.seen if isinstance(c, kind) and (name is None or getattr(c, "name", None) == name)]


@asynccontextmanager
async def running(bus: Bus, settings: TermSettings, epoch: int = 5) -> AsyncIterator[tuple[Term, Commands]]:
    cmds = Commands()
    sub = await bus.nc.subscribe(subjects.command_filter(C), cb=cmds.cb)
    term = Term(bus, (C,), CFG, epoch, settings)
    task = asyncio.create_task(term.run())
    try:
        await eventually(lambda: term.acting or task.done(), timeout=15, what="the term to start acting")
        assert not task.done(), task.exception()
        yield term, cmds
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await sub.unsubscribe()


async def _next_second() -> float:
    """Start just after a whole second, so the admission time written is that second."""
    now = time.time()
    await asyncio.sleep(int(now) + 1.02 - now)
    return float(int(time.time()))


@pytest.mark.parametrize("local", [True, False], ids=["local-timers", "bus-timers-alone"])
async def test_timeout_evicts_the_unready_only_on_time(bus: Bus, local: bool) -> None:
    async with running(bus, TermSettings(local_timers=local)) as (_term, cmds):
        await eventually(lambda: cmds.of(Fence), timeout=5, what="the fence (epoch 5) before any decision")
        admitted = await _next_second()
        await put(bus, workload("slow", 1, admitted=_ts(admitted)))
        await put(bus, workload("quick", 1, admitted=_ts(admitted)))
        await put(bus, workload("quick", 2, admitted=_ts(admitted), ready=True))
        deadline = admitted + CFG.timeout_s
        [(seen, ev)] = await eventually(lambda: cmds.of(EvictWorkload, "slow"), timeout=10, what="slow's eviction")
        assert 0 <= seen - deadline < 1.0, f"{seen - deadline:.3f}s after the deadline"
        assert ev.reason == "PodsReadyTimeout" and ev.epoch == 5 and ev.uid == "uid-slow"
        assert ev.message == "Exceeded the PodsReady timeout ns/slow"
        assert ev.requeue_state is not None and ev.requeue_state.count == 1
        assert not cmds.of(EvictWorkload, "quick")


async def test_deleted_workload_stops_its_timer(bus: Bus) -> None:
    async with running(bus, TermSettings()) as (_term, cmds):
        admitted = await _next_second()
        gone = workload("gone", 1, admitted=_ts(admitted))
        await put(bus, gone)
        await put(bus, workload("later", 1, admitted=_ts(admitted + 1)))
        await put(bus, {**gone, "metadata": {**gone["metadata"], "resourceVersion": "2"}}, delete=True)
        await eventually(lambda: cmds.of(EvictWorkload, "later"), timeout=10, what="the later deadline's eviction")
        assert not cmds.of(EvictWorkload, "gone")


async def test_backoff_end_is_a_command(bus: Bus) -> None:
    async with running(bus, TermSettings()) as (_term, cmds):
        at = await _next_second() + 1
        await put(bus, workload("waiting", 3, requeue_at=_ts(at)))
        [(seen, cmd)] = await eventually(lambda: cmds.of(FinishRequeueBackoff, "waiting"), timeout=10,
                                          what="the end of the backoff")
        assert cmd.requeue_at == _ts(at) and 0 <= seen - at < 1.0


async def test_overdue_after_a_restart_is_decided_at_once(bus: Bus) -> None:
    admitted = time.time() - 10
    await put(bus, workload("overdue", 1, admitted=_ts(admitted)))
    t0 = time.time()
    async with running(bus, TermSettings(), epoch=9) as (_term, cmds):
        [(seen, ev)] = await eventually(lambda: cmds.of(EvictWorkload, "overdue"), timeout=10, what="the eviction")
        assert ev.epoch == 9 and seen - t0 < 5
