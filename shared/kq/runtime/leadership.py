"""Active/standby over a lease (kq.runtime.lease): the loop every leader-elected service runs.

- `hold`: one term on a lease already acquired: the work runs while `keep_alive` renews; the
  first to end decides. Lease lost -> the work is cancelled at once (it must stop deciding).
  The lease is released whenever the term ends, so a standby need not wait out the TTL.
- `lead`: acquire (hot standby polling), hold, and on loss stand again with a new epoch.
- `stand`: a service's whole life on one lease: health says "standby" while waiting, "starting"
  once a term begins (the term marks itself ready); a term that fails is reported and, after
  a doubling backoff, the service stands again.

What a term does (rebuild, fence, decide) is each service's own.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from kq.runtime.lease import Lease

if TYPE_CHECKING:
    from kq.runtime.bus import Bus

T = TypeVar("T")


def holder_name(instance: str) -> str:
    """Who holds a lease: the instance, host and process (a restarted process is a new holder)."""
    return f"{instance}@{socket.gethostname()}:{os.getpid()}"


def why(e: BaseException) -> str:
    """A term's end as one line: type and message, an exception group's members joined."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(why(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}"


async def free_ended_term() -> None:
    """Collect what an ended term held before the next one rebuilds it. A term's state (admission's:
    every workload of the mirror, 300 MiB at 100,000) hangs in reference cycles (tasks, callbacks,
    an exception's frames) that the cache-heavy collector thresholds (kq.gc_tuning) leave for long:
    a term lost under a 100,000-Job burst let the next term's replay double admission's peak."""
    await asyncio.sleep(0)  # the loop step that ended the term still holds its tasks' gather (and so the term)
    gc.collect()


class Backoff:
    """Waits that double from `base` up to `ceiling`; `reset` starts again from `base`."""

    def __init__(self, base: float, ceiling: float) -> None:
        self.base, self.ceiling = base, ceiling
        self.current = base

    def next(self) -> float:
        wait = self.current
        self.current = min(self.current * 2, self.ceiling)
        return wait

    def reset(self) -> None:
        self.current = self.base


@dataclass(frozen=True)
class Held(Generic[T]):
    """How a held term ended without failing: `finished` with work's `result`, or the lease was lost."""

    finished: bool
    result: T | None = None


async def hold(lease: Lease, work: Coroutine[Any, Any, T], *, name: str | None = None) -> Held[T]:
    """Run `work` while `lease` (acquired by the caller) is renewed; release the lease at the end.
    Returns Held(finished=True, result) when the work returned, Held(finished=False) when the
    lease was lost first (the work cancelled); raises what the work raised. Cancelled: both
    are cancelled and the lease handed over at once."""
    worker = asyncio.create_task(work, name=name and f"{name}:term")
    keeper = asyncio.create_task(lease.keep_alive(), name=name and f"{name}:lease")
    try:
        await asyncio.wait({worker, keeper}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # shutting down or giving the lease up: hand over at once
        await _stop(worker, keeper)
        await lease.release()
        raise
    worker_ended = worker.done()
    await _stop(worker, keeper)
    if not worker_ended:
        lease.lost.set()  # whatever ended the keeper, we no longer know that we hold it
    await lease.release()  # a delete marker unless lost: the standby need not wait out the TTL
    if not worker_ended:
        return Held(finished=False)
    return Held(finished=True, result=worker.result())


async def _stop(*tasks: asyncio.Task[Any]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def lead(lease: Lease, work: Callable[[int], Coroutine[Any, Any, T]]) -> T:
    """Hold the lease and run work(epoch) while it is held; if the lease is lost, cancel the
    work, wait to acquire again (hot standby), and start it anew with the new epoch.
    Returns when work returns, raises what it raised (the lease released either way)."""
    while True:
        epoch = await lease.acquire()
        lease._bus.log.info("lease acquired", key=lease.key, epoch=epoch, holder=lease.holder)
        held = await hold(lease, work(epoch))
        if held.finished:
            return cast(T, held.result)  # finished: work's own result
        await free_ended_term()


async def stand(bus: Bus, lease: Lease, term: Callable[[int], Awaitable[None]], *, log: Any, backoff: Backoff,
                idle_status: str = "standby", on_idle: Callable[[], Awaitable[None]] | None = None) -> None:
    """Stand for `lease` for good: run term(epoch) whenever it is held. A failed term is logged and,
    after `backoff`, stood for again; a term that returns ends this (terms run until cancelled).
    Health while not leading is `idle_status`, set before each round by `on_idle` when given."""

    epoch: int | None = None

    async def one_term(term_epoch: int) -> None:
        nonlocal epoch
        epoch = term_epoch
        bus.status = "starting"
        try:
            await term(term_epoch)
        finally:
            bus.status = idle_status

    while True:
        if on_idle is not None:
            await on_idle()
        else:
            bus.status = idle_status
        try:
            await lead(lease, one_term)
            return
        except Exception as e:  # noqa: BLE001 - the term's end is reported, then we stand again
            log.warning("term ended; standing for the lease again", epoch=epoch, reason=why(e))
        await free_ended_term()  # out of the except block: the exception and its frames are let go
        await bus.clock.sleep(backoff.next())
