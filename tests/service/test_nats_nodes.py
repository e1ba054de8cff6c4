"""The local stack's replicated, closed bus without kq's services (`kq up --secure --nats-cluster 3`):
three real nats-server nodes whose routes are mutual TLS form one JetStream cluster; kq's streams
are created R3 through a service's user; with one node killed the other two keep accepting
writes (the stream's leader among them: the publish outlasts the election), and the node started again on its ports and store catches up with what it missed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest
from support.wait import eventually

from kq import subjects
from kq.runtime.bus import Bus
from kq.stack.natsnodes import NatsNodes, node_name
from kq.stack.secure import SecureBus

pytestmark = pytest.mark.timeout(120)


async def _replicas_current(bus: Bus, stream: str) -> bool:
    info = await bus.js.stream_info(stream)
    assert info.cluster is not None and info.cluster.leader is not None
    peers = info.cluster.replicas or []
    return len(peers) == 2 and all(p.current and not p.offline for p in peers)


async def test_a_closed_three_node_bus_keeps_r3_streams_through_a_node_kill(tmp_path: Path) -> None:
    secure = SecureBus(tmp_path).create(cluster=True)
    nodes = NatsNodes(tmp_path / "nats", tmp_path / "logs", 3, extra_args=secure.server_args())
    await nodes.start(60.0)
    try:
        assert len(nodes.url.split(",")) == 3
        cfg = msgspec.structs.replace(secure.nats_config(nodes.url), stream_replicas=3)
        bus = await Bus.connect(cfg, "kq-stack", connect_timeout_s=30.0)  # the stack's own user may set up streams
        try:
            async def streams_created() -> bool:
                await bus.ensure_streams(force=True)
                return True

            await eventually(streams_created, timeout=60.0, interval=0.2,
                             what="R3 streams once the cluster has its meta leader and all peers")
            info = await bus.js.stream_info(subjects.EVENTS_STREAM)
            assert info.config.num_replicas == 3
            subject = subjects.event_subject("manager", "workload", "ns", "w")
            await bus.publish(subject, b"before", msg_id="before")

            # The stream's leader dies: the other two elect a new one and the publish waits for it.
            assert info.cluster is not None and info.cluster.leader is not None
            victim = node_name(int(info.cluster.leader.removeprefix("kq-")))
            popen = nodes.process(victim)
            assert popen is not None
            popen.kill()
            await asyncio.to_thread(popen.wait)
            assert not nodes.running(victim)
            ack = await bus.publish(subject, b"while-down", msg_id="while-down")  # two of three: a quorum
            assert ack.seq == 2

            await nodes.restart(victim, 60.0)
            await eventually(lambda: _replicas_current(bus, subjects.EVENTS_STREAM), timeout=60.0, interval=0.2,
                             what=f"{victim} back in {subjects.EVENTS_STREAM}'s peer set, caught up")
        finally:
            await bus.close()
        # The restarted node joined through TLS routes: its log shows routes and no plaintext ones.
        log = (tmp_path / "logs" / f"{victim}.log").read_text()
        assert "Route connection created" in log
    finally:
        await nodes.stop(5.0)
