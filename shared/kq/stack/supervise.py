"""Supervision of the local stack: a process that dies is started again, with backoff.

As the kubelet restarts a container (CrashLoopBackOff), each restart of the same process waits
twice as long as the previous one, up to a cap, and a process that stayed up long enough is
forgiven its past crashes. Two places use it:

- in-process stacks (`Stack(supervise=True)`: the chaos run, tests) call `Supervisor.run()` as
  a task with callbacks into their own children;
- `kq up` starts `python -m kq.stack --dir D`, a detached process that follows
  stack.json: it restarts what died from the recorded argv and environment and writes the new
  pid, start time and restart count back, which `kq status` shows. `kq down` stops it first.

kubesim keeps its clusters in memory, like an API server without etcd: restarted, it serves the
same URLs with an empty store (the watcher re-lists and mirrors what is there).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from kq.stack.process import ProcessRecord, is_alive, start_ticks
from kq.stack.state import StackState, StateError, read_state, write_state

TICK_S = 0.2


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """Kubernetes waits 10 s, doubling to 5 min, and resets after 10 min up; a local stack is
    restarted sooner so that a chaos run measures kq's recovery, not the wait."""

    initial_s: float = 0.5
    factor: float = 2.0
    max_s: float = 30.0
    reset_after_s: float = 60.0

    def delay(self, crashes_in_a_row: int) -> float:
        """The wait before the n-th restart in a row (n >= 1)."""
        return min(self.max_s, self.initial_s * self.factor ** max(0, crashes_in_a_row - 1))


@dataclass(slots=True)
class Watched:
    """One supervised process: how to tell it runs, how to start it again."""

    name: str
    alive: Callable[[], bool]
    restart: Callable[[], Awaitable[None]]
    started_at: float = field(default_factory=time.monotonic)
    restarts: int = 0
    crashes_in_a_row: int = 0
    due_at: float | None = None  # when it is started again, once seen dead
    died_at: float | None = None


@dataclass(frozen=True, slots=True)
class Restart:
    name: str
    died_at: float  # monotonic, when seen dead
    restarted_at: float
    waited_s: float
    error: str | None = None


class Supervisor:
    def __init__(self, policy: RestartPolicy | None = None,
                 on_restart: Callable[[Restart], None] | None = None) -> None:
        self.policy = policy or RestartPolicy()
        self.watched: dict[str, Watched] = {}
        self.history: list[Restart] = []
        self._on_restart = on_restart or (lambda _r: None)
        self.paused = False

    def watch(self, name: str, alive: Callable[[], bool], restart: Callable[[], Awaitable[None]]) -> None:
        self.watched[name] = Watched(name, alive, restart)

    def forget(self, name: str) -> None:
        self.watched.pop(name, None)

    def restarts(self, name: str) -> int:
        w = self.watched.get(name)
        return w.restarts if w is not None else 0

    async def tick(self, now: float | None = None) -> list[Restart]:
        done: list[Restart] = []
        if self.paused:
            return done
        for w in list(self.watched.values()):
            t = time.monotonic() if now is None else now
            if w.alive():
                if w.crashes_in_a_row and t - w.started_at >= self.policy.reset_after_s:
                    w.crashes_in_a_row = 0
                continue
            if w.due_at is None:
                w.crashes_in_a_row += 1
                w.died_at = t
                w.due_at = t + self.policy.delay(w.crashes_in_a_row)
            if t < w.due_at:
                continue
            error = None
            try:
                await w.restart()
            except Exception as e:  # noqa: BLE001  # a failed start is one more crash, retried later
                error = f"{type(e).__name__}: {e}"
            t2 = time.monotonic()
            died = w.died_at if w.died_at is not None else t
            r = Restart(w.name, died, t2, w.due_at - died, error)
            w.restarts += 1
            w.started_at = t2
            w.due_at = None
            self.history.append(r)
            done.append(r)
            self._on_restart(r)
        return done

    async def run(self, tick_s: float = TICK_S) -> None:
        while True:
            await self.tick()
            await asyncio.sleep(tick_s)


# --- the detached supervisor of `kq up` --------------------------------------------------------------

def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class RecordKeeper:
    """Restarts the processes of stack.json (other than itself) and writes their new records."""

    def __init__(self, stack_dir: Path, policy: RestartPolicy) -> None:
        self.dir = stack_dir
        self.supervisor = Supervisor(policy, on_restart=self._say)
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._state: StackState | None = None  # stack.json as read at this tick

    def _say(self, r: Restart) -> None:
        what = f"failed: {r.error}" if r.error else "restarted"
        print(f"{_now()} {r.name} {what} after {r.waited_s:.1f}s", flush=True)

    def _record(self, name: str) -> ProcessRecord | None:
        return self._state.process(name) if self._state is not None else None

    def _alive(self, name: str) -> bool:
        child = self._children.get(name)
        if child is not None and child.poll() is not None:
            return False  # reaped: no zombie left behind
        rec = self._record(name)
        return rec is None or is_alive(rec)  # a record gone from the file is nobody's to restart

    def _liveness(self, name: str) -> Callable[[], bool]:
        return lambda: self._alive(name)

    def _restarter(self, name: str) -> Callable[[], Awaitable[None]]:
        async def restart() -> None:
            state = read_state(self.dir)
            rec = state.process(name)
            if rec is None:
                return
            env = {k: v for k, v in os.environ.items() if not k.startswith("KQ_")}
            env.update(rec.env or {})
            with open(rec.log, "ab") as out:
                popen = subprocess.Popen(list(rec.argv), stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, env=env, cwd=state.dir, start_new_session=True)
            self._children[name] = popen
            new = msgspec.structs.replace(rec, pid=popen.pid, start_ticks=start_ticks(popen.pid),
                                          restarts=rec.restarts + 1, last_restart=_now())
            procs = tuple(new if p.name == name else p for p in read_state(self.dir).processes)
            write_state(msgspec.structs.replace(state, processes=procs))

        return restart

    async def run(self) -> int:
        me = os.getpid()
        while True:
            try:
                state = self._state = read_state(self.dir)
            except StateError:
                return 0  # the stack is gone (kq down)
            for p in state.processes:
                if p.role != "supervisor" and p.pid != me and p.name not in self.supervisor.watched:
                    self.supervisor.watch(p.name, self._liveness(p.name), self._restarter(p.name))
            await self.supervisor.tick()
            await asyncio.sleep(TICK_S)


def spawn_detached(stack_dir: Path, log: Path, policy_args: Sequence[str] = ()) -> ProcessRecord:
    """Start the supervisor of a detached stack; its record goes into stack.json beside the others."""
    argv = [sys.executable, "-m", "kq.stack", "--dir", str(stack_dir), *policy_args]
    with open(log, "ab") as out:
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 cwd=stack_dir, start_new_session=True)
    popen.returncode = 0  # it outlives us: keep Popen.__del__ quiet
    return ProcessRecord(name="supervisor", role="supervisor", pid=popen.pid, argv=tuple(argv), log=str(log),
                         start_ticks=start_ticks(popen.pid))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kq.stack", description="restart what dies in a kq stack")
    p.add_argument("--dir", required=True)
    default = RestartPolicy()
    p.add_argument("--initial", type=float, default=default.initial_s, help="first restart delay, seconds")
    p.add_argument("--max", type=float, default=default.max_s, help="longest restart delay, seconds")
    ns = p.parse_args(argv)
    keeper = RecordKeeper(Path(ns.dir).resolve(), RestartPolicy(initial_s=ns.initial, max_s=ns.max))
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(keeper.run())
    return 0

