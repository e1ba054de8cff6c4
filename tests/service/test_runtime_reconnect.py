"""The runtime rides out a nats-server restart (same port, same store): consumers and replays resume."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.wait import eventually

from kq import subjects
from kq.config import NatsConfig
from kq.natsserver import NatsServer
from kq.runtime import Bus, Delivery

pytestmark = pytest.mark.timeout(60)


async def test_consumer_and_replay_resume_after_a_server_restart(tmp_path: Path) -> None:
    store, log = tmp_path / "store", tmp_path / "nats.log"
    server = await NatsServer(store_dir=store, log_file=log).start_async()
    port = server.client_port
    bus = await Bus.connect(NatsConfig(url=server.url), "restart")
    handled: list[bytes] = []
    replayed: list[bytes] = []

    async def handler(d: Delivery) -> None:
        handled.append(d.data)

    async def follow(d: Delivery) -> None:
        replayed.append(d.data)

    cmd = subjects.command_subject("c1", "workload")
    evt = subjects.event_subject("c1", "workload", "ns", "w")
    try:
        await bus.ensure_streams()
        consumer = asyncio.create_task(bus.consume("worker", subjects.COMMANDS_STREAM, cmd, handler))
        async with bus.replay(subjects.EVENTS_STREAM, evt, follow) as r:
            await bus.publish(cmd, b"before", msg_id="1")
            await bus.publish(evt, b"e-before", msg_id="e1")
            await eventually(lambda: handled == [b"before"] and replayed == [b"e-before"])
            await server.stop_async()
            server = await NatsServer(store_dir=store, log_file=log, port=port or 0).start_async()
            await eventually(lambda: bus.nc.is_connected, timeout=10)
            await bus.publish(cmd, b"after", msg_id="2")
            await bus.publish(evt, b"e-after", msg_id="e2")
            await eventually(lambda: handled == [b"before", b"after"], timeout=10)
            await eventually(lambda: replayed == [b"e-before", b"e-after"], timeout=10)
            assert r.caught_up.is_set()
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)
    finally:
        await bus.close()
        await server.stop_async()
