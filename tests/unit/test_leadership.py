"""The active/standby loop (kq.runtime.leadership) on fake time: a held term ends by its work, by
losing the lease or by cancellation, each releasing the lease the right way; `lead` starts the
work anew with a higher epoch after a loss; `stand` reports health and backs off between failed
terms. The lease's storage is in memory (tests/support/memory_lease.py)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import pytest
from support.memory_lease import InMemoryLease, Key

from kq.clock import FakeClock
from kq.runtime.leadership import Backoff, Held, hold, lead, stand, why
from kq.runtime.lease import LeaseValue

pytestmark = pytest.mark.timeout(10)


def _taken_by_another(key: Key) -> None:
    key.rev += 3
    key.value = LeaseValue(holder="other", service="admission", partition="p", epoch=key.rev, renewed_at="")


class _Bus:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.status = "starting"


class _Log:
    def __init__(self) -> None:
        self.warnings: list[dict[str, Any]] = []

    def warning(self, event: str, **kw: Any) -> None:
        self.warnings.append({"event": event, **kw})


def test_backoff_doubles_up_to_its_ceiling_and_resets() -> None:
    b = Backoff(0.5, 3.0)
    assert [b.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    b.reset()
    assert b.next() == 0.5


def test_why_names_each_member_of_an_exception_group() -> None:
    e = ExceptionGroup("term", [ValueError("a"), KeyError("b")])
    assert why(e) == "ValueError: a; KeyError: 'b'"


async def test_work_that_returns_releases_the_lease_for_the_standby() -> None:
    clock, key = FakeClock(), Key()
    lease = InMemoryLease(key, clock, "a")
    assert await lease.try_acquire()

    async def work() -> str:
        await clock.sleep(20)  # renewals keep it held meanwhile
        return "done"

    task = asyncio.create_task(hold(lease, work()))
    await clock.advance(20)
    assert task.result() == Held(finished=True, result="done")
    assert key.value is None and not lease.is_held()  # a delete marker: free at once


async def test_lost_lease_cancels_the_work_and_leaves_the_new_holders_key_alone() -> None:
    clock, key = FakeClock(), Key()
    lease = InMemoryLease(key, clock, "a")
    assert await lease.try_acquire()
    cancelled = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = asyncio.create_task(hold(lease, work()))
    await clock.settle()
    _taken_by_another(key)
    await clock.advance(3)  # the next renewal is refused
    assert task.result() == Held(finished=False)
    assert cancelled.is_set() and lease.lost.is_set()
    assert key.value is not None and key.value.holder == "other"


async def test_work_that_fails_raises_and_releases() -> None:
    clock, key = FakeClock(), Key()
    lease = InMemoryLease(key, clock, "a")
    assert await lease.try_acquire()

    async def work() -> None:
        raise RuntimeError("rebuild failed")

    with pytest.raises(RuntimeError, match="rebuild failed"):
        await hold(lease, work())
    assert key.value is None


async def test_cancelled_hold_cancels_the_work_and_hands_over() -> None:
    clock, key = FakeClock(), Key()
    lease = InMemoryLease(key, clock, "a")
    assert await lease.try_acquire()
    task = asyncio.create_task(hold(lease, asyncio.Event().wait()))
    await clock.settle()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled() and key.value is None


async def test_lead_starts_the_work_anew_with_a_higher_epoch_after_a_loss() -> None:
    clock, key = FakeClock(), Key()
    lease = InMemoryLease(key, clock, "a", poll_interval=0.5)
    epochs: list[int] = []

    async def work(epoch: int) -> int:
        epochs.append(epoch)
        if len(epochs) == 1:
            await asyncio.Event().wait()  # until the lease is lost
        return epoch

    task = asyncio.create_task(lead(lease, work))
    await clock.settle()
    assert epochs == [1]
    _taken_by_another(key)
    await clock.advance(3)
    assert not task.done()  # standing by: the other holder has it
    key.value = None  # ... until it lets go
    await clock.advance(0.5)
    assert task.done() and epochs == [1, key.rev - 1] and task.result() == epochs[1] > epochs[0]


async def test_stand_reports_health_and_backs_off_between_failed_terms() -> None:
    clock, key = FakeClock(), Key()
    lease = InMemoryLease(key, clock, "a")
    bus, log = _Bus(clock), _Log()
    seen: list[tuple[int, str]] = []

    async def term(epoch: int) -> None:
        seen.append((epoch, bus.status))
        if len(seen) < 3:
            raise RuntimeError(f"term {len(seen)}")
        await asyncio.Event().wait()

    task = asyncio.create_task(stand(bus, lease, term, log=log, backoff=Backoff(1.0, 8.0)))  # type: ignore[arg-type]  # the loop reads only status and clock
    await clock.settle()
    assert [s for _, s in seen] == ["starting"] and bus.status == "standby"
    assert log.warnings == [{"event": "term ended; standing for the lease again", "epoch": seen[0][0],
                             "reason": "RuntimeError: term 1"}]
    await clock.advance(0.9)
    assert len(seen) == 1
    await clock.advance(0.1)  # first backoff: 1 s
    assert len(seen) == 2 and seen[1][0] > seen[0][0]
    await clock.advance(1.9)
    assert len(seen) == 2
    await clock.advance(0.1)  # doubled: 2 s
    assert len(seen) == 3 and bus.status == "starting" and lease.is_held()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert bus.status == "standby" and key.value is None


async def test_stand_lets_the_service_say_what_health_is_while_idle() -> None:
    clock, key = FakeClock(), Key()
    _taken_by_another(key)
    lease = InMemoryLease(key, clock, "a", poll_interval=0.5)
    bus = _Bus(clock)

    async def idle() -> None:
        bus.status = "standby" if key.value is not None else "starting"

    async def term(epoch: int) -> None:
        await asyncio.Event().wait()

    task = asyncio.create_task(stand(bus, lease, term, log=_Log(), backoff=Backoff(1.0, 1.0),  # type: ignore[arg-type]
                                     idle_status="starting", on_idle=idle))
    await clock.settle()
    assert bus.status == "standby"
    key.value = None
    await clock.advance(0.5)
    assert lease.is_held() and bus.status == "starting"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert bus.status == "starting"  # not leading, and no longer known to be standing by


class _TermState:
    """A term's state in a reference cycle, as a real one is (tasks, callbacks, frames)."""

    def __init__(self) -> None:
        self.me = self
        self.workloads = [object() for _ in range(1000)]


@pytest.mark.parametrize("ending", ["fails", "loses the lease"])
async def test_an_ended_terms_state_is_freed_before_the_next_term_rebuilds(ending: str) -> None:
    """Bounded memory (issue 12): the next term rebuilds all of it, so the ended one's must be gone
    first, even when the cyclic collector would not run for a long time (disabled here)."""
    clock, key = FakeClock(), Key()
    lease = InMemoryLease(key, clock, "a", poll_interval=0.5)
    bus = _Bus(clock)
    states: list[weakref.ref[_TermState]] = []
    alive_at_start: list[bool] = []

    async def term(epoch: int) -> None:
        alive_at_start.append(any(r() is not None for r in states))
        state = _TermState()
        states.append(weakref.ref(state))
        if len(states) == 1 and ending == "fails":
            raise RuntimeError("term 1")
        await asyncio.Event().wait()

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        task = asyncio.create_task(stand(bus, lease, term, log=_Log(), backoff=Backoff(1.0, 1.0)))  # type: ignore[arg-type]
        await clock.settle()
        if ending == "loses the lease":
            _taken_by_another(key)
            await clock.advance(3)
            key.value = None
        await clock.advance(1.0)
        assert alive_at_start == [False, False], "the first term's state outlived it"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        if was_enabled:
            gc.enable()
