"""Supervision of an in-process stack (kq.stack.supervised): what dies comes back where its clients
look for it. Regression: a chaos run killed nats-server while its restart was still starting; the
failed attempt had no port, the next one took a random port, and every service kept reconnecting
to the old one (the whole system stalled)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.wait import eventually

from kq.natsserver import NatsServer, NatsServerError
from kq.stack import Stack
from kq.stack.supervise import RestartPolicy

pytestmark = pytest.mark.timeout(120)


async def test_nats_server_comes_back_on_its_port_after_a_failed_restart(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    stack = Stack(tmp_path / "s", services=[], clusters=(("manager", "manager"),), supervise=True,
                  restart_policy=RestartPolicy(initial_s=0.05, max_s=0.2), log_level="warning")
    async with stack:
        url = stack.nats_url
        real = NatsServer.start_async
        attempts: list[int] = []

        async def first_attempt_fails(self: NatsServer) -> NatsServer:
            attempts.append(self.port)
            if len(attempts) == 1:
                raise NatsServerError("killed while starting")  # as a kill during start-up leaves it: no port
            return await real(self)

        monkeypatch.setattr(NatsServer, "start_async", first_attempt_fails)
        await stack.crash("nats-server")

        async def back() -> bool:
            assert len(attempts) >= 2 and stack.bus.nc.is_connected, attempts
            return True

        await eventually(back, timeout=60, what="nats-server restarted and the stack's client reconnected")
        assert stack.nats_url == url
        assert set(attempts) == {int(url.rsplit(":", 1)[1])}, attempts
        assert [r.error for r in stack.restart_history()][:1] == ["NatsServerError: killed while starting"]
        await stack.bus.nc.flush(timeout=5)


async def test_a_killed_kubesim_is_started_again_on_its_port(tmp_path: Path) -> None:
    stack = Stack(tmp_path / "s", services=[], clusters=(("manager", "manager"),), supervise=True,
                  restart_policy=RestartPolicy(initial_s=0.05), log_level="warning")
    async with stack:
        import aiohttp

        await stack.crash("kubesim")

        async def serving() -> bool:
            async with aiohttp.ClientSession() as http, http.get(f"{stack.kubesim_url}/kubesim/state") as r:
                assert r.status == 200
                return True

        await eventually(serving, timeout=60, what="kubesim serving again")
        assert stack.restarts("kubesim") == 1
