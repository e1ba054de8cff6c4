"""Fixtures shared by every test: a real nats-server for the session, a clean JetStream per test, and
kubesim with its clients (support/kubesim_fixtures.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from kq.config import NatsConfig
from kq.natsserver import NatsServer
from kq.runtime import Bus, delete_all_streams

# `from support.wait import eventually` works however pytest was started.
_TESTS = os.path.dirname(os.path.abspath(__file__))
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

pytest_plugins = ["support.kubesim_fixtures"]


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    """One nats-server with JetStream for the whole session: random port, temp store."""
    with NatsServer(start_timeout=20.0) as server:
        yield server


@pytest.fixture
def nats_url(nats_server: NatsServer) -> str:
    return nats_server.url


@pytest.fixture
def nats_config(nats_url: str) -> NatsConfig:
    return NatsConfig(url=nats_url)


@pytest.fixture
async def bus(nats_config: NatsConfig) -> AsyncIterator[Bus]:
    """A connected Bus on a clean JetStream: every stream and bucket deleted, then kq's created."""
    b = await Bus.connect(nats_config, "test", connect_timeout_s=10.0)
    try:
        await delete_all_streams(b.js)
        await b.ensure_streams()
        yield b
    finally:
        await b.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How many hostile cases each kind got (support/hostile.py counts them; tests/fuzz, test_secure_bus)."""
    from support.hostile import CASES, EXAMPLES

    if CASES:
        terminalreporter.section("hostile input: generated cases per kind")
        for what, n in sorted(CASES.items()):
            terminalreporter.write_line(f"  {what:<42} {n}")
        terminalreporter.write_line(f"  (KQ_FUZZ_EXAMPLES={EXAMPLES}; set it higher for a long run)")
