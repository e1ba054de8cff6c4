"""Supervision of an in-process Stack (`Stack(supervise=True)`: the chaos run, tests): each child
(nats-server, kubesim, every service instance) watched by a kq.stack.supervise.Supervisor and
started again as it was; `crash()` kills one with SIGKILL and leaves it to the supervisor.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence
from pathlib import Path

from kq.natsserver import NatsServer
from kq.stack.process import ChildProcess, ProcessError
from kq.stack.supervise import Restart, Supervisor


class SupervisedChildren:
    """The Stack's supervision half (the Stack sets these attributes)."""

    supervisor: Supervisor | None
    _supervising: asyncio.Task[None] | None
    _nats: NatsServer | None
    _nats_url: str | None
    _kubesim: ChildProcess | None
    _services: dict[str, ChildProcess]
    detach: bool
    timeout_s: float
    dir: Path

    def _kubesim_port(self) -> int:
        raise NotImplementedError

    def _spawn_service(self, service: str, instance: str) -> ChildProcess:
        raise NotImplementedError

    def _env(self, instance: str | None = None) -> dict[str, str]:
        raise NotImplementedError

    def _own_env(self, instance: str | None = None) -> dict[str, str]:
        raise NotImplementedError

    def log_path(self, process: str) -> Path:
        raise NotImplementedError

    def _supervise(self) -> None:
        sup = self.supervisor
        if sup is None:
            return
        sup.watch("nats-server", lambda: self._nats is not None and self._nats.running(), self._restart_nats)
        sup.watch("kubesim", lambda: self._kubesim is not None and self._kubesim.exit_code() is None,
                  self._restart_kubesim)
        for name in self._services:
            self._watch_service(name)
        self._supervising = asyncio.get_running_loop().create_task(sup.run(), name="kq-supervisor")

    def _watch_service(self, name: str) -> None:
        if self.supervisor is None:
            return

        def alive() -> bool:
            child = self._services.get(name)
            return child is not None and child.exit_code() is None

        async def restart() -> None:
            child = self._services[name]
            assert child.record.service is not None and child.record.instance is not None
            self._spawn_service(child.record.service, child.record.instance)

        self.supervisor.watch(name, alive, restart)

    async def _restart_nats(self) -> None:
        if self._nats is not None:
            self._nats.stop(timeout=0.1)  # reaps the dead process
        # With the stack's store, log and port (its clients know no other), never the last attempt's:
        # a failed attempt has no port (a chaos run found it restarting on a random port).
        assert self._nats_url is not None
        port = int(self._nats_url.rsplit(":", 1)[1])
        self._nats = NatsServer(store_dir=self.dir / "nats", log_file=self.log_path("nats-server"), port=port,
                                detach=self.detach, start_timeout=self.timeout_s)
        await self._nats.start_async()

    async def _restart_kubesim(self) -> None:
        old = self._kubesim
        assert old is not None
        argv = with_port(old.record.argv, "--port", self._kubesim_port())
        self._kubesim = ChildProcess.spawn("kubesim", "kubesim", argv, self.log_path("kubesim"), env=self._env(),
                                           cwd=self.dir, detach=self.detach, record_env=self._own_env())

    def restarts(self, process: str) -> int:
        return self.supervisor.restarts(process) if self.supervisor is not None else 0

    def restart_history(self) -> list[Restart]:
        return list(self.supervisor.history) if self.supervisor is not None else []

    async def crash(self, process: str, *, timeout_s: float = 10.0) -> None:
        """SIGKILL one process (a service instance, "kubesim" or "nats-server") and wait until it
        is gone; a supervised stack starts it again."""
        if process == "nats-server":
            assert self._nats is not None and self._nats._proc is not None
            popen = self._nats._proc
        elif process == "kubesim":
            assert self._kubesim is not None
            popen = self._kubesim.popen
        else:
            child = self._services.get(process)
            if child is None:
                raise ProcessError(f"no process {process} in this stack ({', '.join(self._services) or 'none'})")
            popen = child.popen
        if popen.poll() is None:
            popen.send_signal(signal.SIGKILL)
        try:
            await asyncio.wait_for(asyncio.to_thread(popen.wait), timeout_s)
        except TimeoutError:
            raise ProcessError(f"{process} still running {timeout_s}s after SIGKILL") from None


def with_port(argv: Sequence[str], flag: str, port: int | None) -> tuple[str, ...]:
    """argv with the value after `flag` set to the port the process listens on."""
    out = list(argv)
    if port is not None and flag in out:
        out[out.index(flag) + 1] = str(port)
    return tuple(out)


