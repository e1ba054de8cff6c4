"""The supervisor's restart policy: backoff doubling to a cap, forgiven after a long enough run."""

from __future__ import annotations

import pytest

from kq.stack.supervise import RestartPolicy, Supervisor


def test_delay_doubles_up_to_the_cap() -> None:
    p = RestartPolicy(initial_s=1.0, factor=2.0, max_s=10.0)
    assert [p.delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


class Proc:
    def __init__(self) -> None:
        self.up = True
        self.starts = 0

    def alive(self) -> bool:
        return self.up

    async def restart(self) -> None:
        self.starts += 1
        self.up = True


@pytest.mark.asyncio
async def test_a_dead_process_is_restarted_after_its_backoff_and_crash_loops_back_off() -> None:
    sup = Supervisor(RestartPolicy(initial_s=1.0, factor=2.0, max_s=30.0, reset_after_s=60.0))
    proc = Proc()
    sup.watch("watcher", proc.alive, proc.restart)
    await sup.tick(now=0.0)
    assert proc.starts == 0
    proc.up = False
    await sup.tick(now=10.0)  # seen dead: restart due at 11
    await sup.tick(now=10.9)
    assert proc.starts == 0
    await sup.tick(now=11.0)
    assert (proc.starts, sup.restarts("watcher")) == (1, 1)
    # Dies again at once: the second restart in a row waits 2 s.
    proc.up = False
    await sup.tick(now=12.0)
    await sup.tick(now=13.9)
    assert proc.starts == 1
    await sup.tick(now=14.0)
    assert proc.starts == 2
    assert [round(r.waited_s, 3) for r in sup.history] == [1.0, 2.0]


@pytest.mark.asyncio
async def test_a_failed_restart_counts_and_is_retried_with_a_longer_wait() -> None:
    sup = Supervisor(RestartPolicy(initial_s=1.0, factor=2.0, max_s=30.0))
    calls: list[int] = []

    async def broken() -> None:
        calls.append(1)
        raise OSError("no such binary")

    sup.watch("kubesim", lambda: False, broken)
    await sup.tick(now=0.0)
    await sup.tick(now=1.0)
    assert len(calls) == 1 and sup.history[0].error == "OSError: no such binary"
    await sup.tick(now=1.5)  # seen dead again: the next try waits 2 s
    await sup.tick(now=3.4)
    assert len(calls) == 1
    await sup.tick(now=3.5)
    assert len(calls) == 2


@pytest.mark.asyncio
async def test_paused_supervision_restarts_nothing() -> None:
    sup = Supervisor(RestartPolicy(initial_s=0.0))
    proc = Proc()
    proc.up = False
    sup.watch("gc", proc.alive, proc.restart)
    sup.paused = True
    await sup.tick(now=5.0)
    assert proc.starts == 0
