"""The watcher's keyed work queue on fake time: one worker per key at a time, a key marked while busy
is worked again after, delays and failures bring a key back when they should, stopping cancels
the pending looks."""

from __future__ import annotations

import asyncio

import pytest

from kq.clock import FakeClock
from kq.kube import KubeError, ServerError
from kq.obs import get_logger
from services.watcher.workqueue import KeyedWorkQueue

pytestmark = pytest.mark.timeout(10)


class _Reconciler:
    """Records each call; `answers` per key (a delay, None, or an exception), `gate` holds a call open."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.answers: dict[str, list[float | Exception | None]] = {}
        self.gate: asyncio.Event | None = None
        self.running: set[str] = set()
        self.overlap = False

    async def __call__(self, key: str) -> float | None:
        if key in self.running:
            self.overlap = True
        self.running.add(key)
        self.calls.append(key)
        try:
            if self.gate is not None:
                await self.gate.wait()
            answer = self.answers[key].pop(0) if self.answers.get(key) else None
            if isinstance(answer, Exception):
                raise answer
            return answer
        finally:
            self.running.discard(key)


def _queue(r: _Reconciler, clock: FakeClock, workers: int = 2) -> KeyedWorkQueue[str]:
    return KeyedWorkQueue("test", r, workers=workers, retry_base_s=0.2, retry_max_s=5.0, clock=clock,
                          log=get_logger("test.workqueue"))


async def test_a_key_marked_while_busy_is_worked_again_after_never_twice_at_once() -> None:
    clock, r = FakeClock(), _Reconciler()
    q = _queue(r, clock, workers=3)
    runner = asyncio.create_task(q.run())
    r.gate = asyncio.Event()
    q.mark("a")
    await clock.settle()
    q.mark("a")
    q.mark("a")  # de-duplicated while busy
    await clock.settle()
    assert r.calls == ["a"] and not q.idle()
    r.gate.set()
    await clock.settle()
    assert r.calls == ["a", "a"] and not r.overlap and q.idle()
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)


async def test_delays_and_failures_bring_the_key_back_when_due() -> None:
    clock, r = FakeClock(), _Reconciler()
    r.answers = {"later": [1.5], "bug": [RuntimeError("boom")], "api": [ServerError("503", status=503)],
                 "now": [0.0]}
    q = _queue(r, clock)
    runner = asyncio.create_task(q.run())
    for key in ("later", "bug", "api", "now"):
        q.mark(key)
    await clock.settle()
    assert sorted(r.calls) == ["api", "bug", "later", "now", "now"]  # 0: again at once
    await clock.advance(0.25)  # a KubeError: the base backoff (0.2 s)
    assert r.calls.count("api") == 2
    await clock.advance(1.3)
    assert r.calls.count("later") == 2 and r.calls.count("bug") == 1
    await clock.advance(3.5)  # a bug: the longest wait
    assert r.calls.count("bug") == 2 and q.idle()
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)


async def test_stopping_cancels_the_pending_looks() -> None:
    clock, r = FakeClock(), _Reconciler()
    r.answers = {"a": [KubeError("no answer")]}
    q = _queue(r, clock)
    runner = asyncio.create_task(q.run())
    q.mark("a")
    await clock.settle()
    assert clock.sleepers == 1
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)
    await clock.settle()
    assert clock.sleepers == 0
    await clock.advance(10)
    assert r.calls == ["a"]


async def test_a_key_failing_while_events_keep_marking_it_holds_one_delayed_look() -> None:
    """Backpressure (issue 12): under an API server that throttles every write, each failure sets a
    delayed look; the events that keep marking the keys meanwhile must not pile up timers (one per
    failure was O(events)). At most one per key, and each key is still looked at again when due."""
    clock, r = FakeClock(), _Reconciler()
    keys = [f"k{i}" for i in range(8)]
    r.answers = {k: [ServerError("429", status=503)] * 50 for k in keys}
    q = _queue(r, clock, workers=4)
    runner = asyncio.create_task(q.run())
    most = 0
    for _ in range(10):  # events outrun the retries: every key marked again and again
        for k in keys:
            q.mark(k)
        await clock.settle()
        most = max(most, q.delayed(), clock.sleepers)
        await clock.advance(0.05)
    assert most <= len(keys), f"{most} delayed looks for {len(keys)} keys"
    calls = len(r.calls)
    await clock.advance(0.3)  # past the base backoff: every key's one look comes due
    assert all(r.calls[calls:].count(k) >= 1 for k in keys) and q.delayed() <= len(keys)
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)


async def test_urgent_marks_go_before_a_backlog_of_plain_ones_and_entries_stay_bounded() -> None:
    """A burst of new Jobs (plain) must not hold up a decision on a known one (urgent: its Workload
    admitted), and marks that outrun the one worker never give a key more than one entry per lane."""
    clock, r = FakeClock(), _Reconciler()
    q = _queue(r, clock, workers=1)
    r.gate = asyncio.Event()
    runner = asyncio.create_task(q.run())
    q.mark("first")
    await clock.settle()  # the worker holds "first"
    backlog = [f"new{i}" for i in range(50)]
    for _ in range(3):  # every event again, plain and urgent, while nothing is taken
        for k in backlog:
            q.mark(k)
        q.mark("admitted", urgent=True)
        q.mark("new7", urgent=True)  # promoted: its plain entry is left behind, not doubled
    assert q.waiting() <= len(backlog) + 3
    r.gate.set()
    await clock.settle()
    assert r.calls[:3] == ["first", "admitted", "new7"]
    assert sorted(r.calls[3:]) == sorted(k for k in backlog if k != "new7") and q.idle() and q.waiting() == 0
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)
