"""Child processes of the local stack: start with a log file, tell whether alive, stop by pid.

A stack started by `kq up` outlives the command that started it, so `kq down` (another
process) stops it knowing only what stack.json recorded. A pid can be reused once its
process is gone, so each record also keeps the process's start time from /proc: a pid
whose start time differs is another program, and is never signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

TAIL_LINES = 30
_POLL_S = 0.05


class ProcessRecord(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What stack.json keeps about one child process."""

    name: str  # "nats-server", "kubesim", "watcher", "admission-1"
    role: str  # nats | kubesim | service
    pid: int
    argv: tuple[str, ...]
    log: str
    start_ticks: int | None = None  # /proc/<pid>/stat starttime; None where /proc is absent
    service: str | None = None
    instance: str | None = None
    env: dict[str, str] | None = None  # kq's own variables (the rest is the caller's environment)
    restarts: int = 0  # by the supervisor
    last_restart: str | None = None


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), or None when unknown."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may contain spaces: split after it.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 overall
    except (IndexError, ValueError):
        return None


def _state(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split(" ", 1)[0]


def is_alive(rec: ProcessRecord) -> bool:
    """True while the recorded process (the same one, not a reuse of its pid) runs."""
    try:
        os.kill(rec.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # someone else's process now holds that pid
    if rec.start_ticks is not None and start_ticks(rec.pid) != rec.start_ticks:
        return False
    return _state(rec.pid) not in ("Z", "X")  # a zombie has exited; only its parent's wait is missing


def log_tail(path: str | os.PathLike[str], lines: int = TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError as e:
        return f"(cannot read {path}: {e.strerror})"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(empty log)"


class ChildProcess:
    """A process this stack started; its output goes to `log` (appended)."""

    def __init__(self, popen: subprocess.Popen[bytes], record: ProcessRecord) -> None:
        self.popen = popen
        self.record = record

    @classmethod
    def spawn(
        cls,
        name: str,
        role: str,
        argv: Sequence[str],
        log: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        detach: bool = False,
        service: str | None = None,
        instance: str | None = None,
        record_env: Mapping[str, str] | None = None,
    ) -> ChildProcess:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=detach,  # detached: a Ctrl-C in the terminal does not reach it
            )
        rec = ProcessRecord(name=name, role=role, pid=popen.pid, argv=tuple(argv), log=str(log),
                            start_ticks=start_ticks(popen.pid), service=service, instance=instance,
                            env=dict(record_env) if record_env else None)
        return cls(popen, rec)

    @property
    def name(self) -> str:
        return self.record.name

    def exit_code(self) -> int | None:
        return self.popen.poll()

    def release(self) -> None:
        """Forget the child without stopping it (it keeps running after we exit)."""
        self.popen.returncode = 0  # keeps Popen.__del__ from warning about a running child


async def stop_pids(records: Sequence[ProcessRecord], *, grace_s: float = 10.0,
                    owned: Mapping[int, subprocess.Popen[bytes]] | None = None) -> list[str]:
    """SIGTERM every live process, wait up to grace_s, SIGKILL what remains.

    `owned` maps pids that are our own children to their Popen, so they are reaped.
    Returns the names of the processes that had to be killed.
    """
    owned = owned or {}

    def alive(rec: ProcessRecord) -> bool:
        p = owned.get(rec.pid)
        if p is not None:
            return p.poll() is None
        return is_alive(rec)

    live = [r for r in records if alive(r)]
    for rec in live:
        _signal(rec, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(alive(r) for r in live) and time.monotonic() < deadline:
        await asyncio.sleep(_POLL_S)
    killed = [r for r in live if alive(r)]
    for rec in killed:
        _signal(rec, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while any(alive(r) for r in killed) and time.monotonic() < deadline:
        await asyncio.sleep(_POLL_S)
    still = [r.name for r in killed if alive(r)]
    if still:
        raise ProcessError(f"still running after SIGKILL: {', '.join(still)}")
    return [r.name for r in killed]


def _signal(rec: ProcessRecord, sig: signal.Signals) -> None:
    if rec.start_ticks is not None and start_ticks(rec.pid) not in (rec.start_ticks, None):
        return  # the pid now belongs to another process
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(rec.pid, sig)


class ProcessError(RuntimeError):
    pass
