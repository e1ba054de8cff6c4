"""Supervision of an in-process Stack (`Stack(supervise=True)`: the chaos run, tests): each child
(nats-server, kubesim, every service instance) watched by a kq.stack.supervise.Supervisor and
started again as it was; `crash()` kills one with SIGKILL and leaves it to the supervisor.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from kq.stack.natsnodes import NatsNodes
from kq.stack.process import ChildProcess, ProcessError
from kq.stack.supervise import Restart, Supervisor


class SupervisedChildren:
    """The Stack's supervision half (the Stack sets these attributes)."""

    supervisor: Supervisor | None
    _supervising: asyncio.Task[None] | None
    _nats: NatsNodes | None
    _nats_held: set[str]  # nats nodes kept down on purpose (a fault): not restarted meanwhile
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
        assert self._nats is not None
        for node in self._nats.names:
            sup.watch(node, self._nats_alive(node), self._nats_restarter(node))
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

    def _nats_alive(self, node: str) -> Callable[[], bool]:
        return lambda: node in self._nats_held or (self._nats is not None and self._nats.running(node))

    def _nats_restarter(self, node: str) -> Callable[[], Awaitable[None]]:
        async def restart() -> None:
            # With the node's store, log and ports (its peers and clients know no other), never the
            # last attempt's: a failed attempt has no port (a chaos run found it restarting on a random one).
            assert self._nats is not None
            await self._nats.restart(node, self.timeout_s)

        return restart

    async def hold_nats(self, nodes: Sequence[str], *, timeout_s: float = 10.0) -> None:
        """SIGKILL these nats nodes and keep them down (the supervisor leaves them) until release_nats."""
        self._nats_held.update(nodes)
        for node in nodes:
            await self.crash(node, timeout_s=timeout_s)

    async def release_nats(self) -> None:
        """Start the held nats nodes again (their stores: they rejoin the cluster)."""
        assert self._nats is not None
        held = sorted(self._nats_held)
        try:
            await asyncio.gather(*(self._nats.restart(node, self.timeout_s) for node in held))
        finally:
            self._nats_held.difference_update(held)

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
        nats = self._nats.process(process) if self._nats is not None else None
        if nats is not None:
            popen = nats
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


