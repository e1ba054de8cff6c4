"""The nats-server launcher: readiness from its log, its errors shown, a store that survives restarts."""

from __future__ import annotations

from pathlib import Path

import nats
import pytest

from kq.natsserver import NatsServer, NatsServerError

pytestmark = pytest.mark.timeout(60)


async def test_async_start_serves_jetstream_and_stop_cleans_up() -> None:
    async with NatsServer() as server:
        assert server.running() and server.url.startswith("nats://127.0.0.1:")
        assert server.client_port and server.client_port > 0
        nc = await nats.connect(server.url)
        info = await nc.jetstream().account_info()
        await nc.close()
        tmp = server.store_dir
        assert info is not None and tmp is not None and tmp.exists()
    assert not server.running() and not tmp.exists()


async def test_fixed_store_dir_survives_a_restart(tmp_path: Path) -> None:
    store, log = tmp_path / "store", tmp_path / "nats.log"
    async with NatsServer(store_dir=store, log_file=log) as s1:
        nc = await nats.connect(s1.url)
        await nc.jetstream().add_stream(name="KEEP", subjects=["keep.>"])
        await nc.jetstream().publish("keep.a", b"x")
        await nc.close()
    async with NatsServer(store_dir=store, log_file=log) as s2:
        nc = await nats.connect(s2.url)
        si = await nc.jetstream().stream_info("KEEP")
        await nc.close()
    assert si.state.messages == 1
    assert log.read_text().count("Server is ready") == 2  # one log file for both runs


def test_a_server_that_cannot_start_shows_its_errors(tmp_path: Path) -> None:
    with NatsServer() as running:
        clash = NatsServer(port=running.client_port or 0, log_file=tmp_path / "clash.log", start_timeout=10)
        with pytest.raises(NatsServerError) as err:
            clash.start()
    text = str(err.value)
    assert "exited with code" in text and ("[FTL]" in text or "[ERR]" in text)
    assert str(running.client_port) in text


def test_missing_binary_is_a_clear_error() -> None:
    server = NatsServer(binary="/nonexistent/nats-server")
    with pytest.raises(NatsServerError, match="/nonexistent/nats-server"):
        server.start()
    assert not server.running()
