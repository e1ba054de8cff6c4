"""The HTTP probes of a service run by kq.runtime.serve (real nats-server): not ready until the
service says it caught up, ready (and standby counts) after; live throughout; gone when stopped."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from support.wait import eventually

from kq.config import Config, HttpConfig, NatsConfig
from kq.runtime import Bus, serve, wait_healthy

pytestmark = pytest.mark.timeout(60)


async def get(base: str, path: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as s, s.get(f"{base}{path}") as r:
        return r.status, json.loads(await r.text())


async def test_probes_flip_ready_when_the_service_catches_up(bus: Bus, nats_config: NatsConfig) -> None:
    caught_up = asyncio.Event()
    standby = asyncio.Event()

    async def main(b: Bus, _config: Config) -> None:
        await caught_up.wait()
        b.mark_ready()
        await standby.wait()
        b.status = "standby"  # waiting for a lease is ready too: it can take over at once
        await asyncio.Event().wait()

    config = Config(nats=nats_config, http=HttpConfig(port=0, host="127.0.0.1"), instance="p1")
    stop = asyncio.Event()
    task = asyncio.create_task(serve("probed", main, config, ready_when_started=False, stop=stop))
    try:
        st = await wait_healthy(bus.nc, "probed", status="starting", timeout=20)
        assert st.http_port
        base = f"http://127.0.0.1:{st.http_port}"
        assert await get(base, "/livez") == (200, {"service": "probed", "instance": "p1", "status": "starting",
                                                  "live": True, "ready": False})
        assert (await get(base, "/readyz"))[0] == 503
        caught_up.set()

        async def ready() -> bool:
            assert (await get(base, "/readyz"))[0] == 200
            return True

        await eventually(ready, timeout=10, what="/readyz 200 once caught up")
        standby.set()

        async def standing_by() -> bool:
            status, body = await get(base, "/readyz")
            assert (status, body["status"]) == (200, "standby")
            return True

        await eventually(standing_by, timeout=10, what="standby reported ready")
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 20) == 0
    with pytest.raises(aiohttp.ClientConnectionError):
        await get(base, "/livez")


async def test_no_port_no_endpoint(bus: Bus, nats_config: NatsConfig) -> None:
    async def main(_b: Bus, _config: Config) -> None:
        await asyncio.Event().wait()

    stop = asyncio.Event()
    task = asyncio.create_task(serve("quiet", main, Config(nats=nats_config), stop=stop))
    try:
        st = await wait_healthy(bus.nc, "quiet", timeout=20)
        assert st.http_port is None
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 20) == 0
