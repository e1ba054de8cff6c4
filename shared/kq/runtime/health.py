"""Health over NATS request/reply: every instance of a service answers on its health subject."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import msgspec
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from kq import subjects


class HealthStatus(msgspec.Struct, frozen=True, kw_only=True):
    service: str
    instance: str
    status: str  # starting | ready | stopping
    started_at: str  # RFC 3339


_decoder = msgspec.json.Decoder(HealthStatus)
_encoder = msgspec.json.Encoder()


class HealthResponder:
    def __init__(self, nc: Client, service: str, instance: str, started_at: str, status: Callable[[], str]) -> None:
        self._nc = nc
        self._service = service
        self._instance = instance
        self._started_at = started_at
        self._status = status
        self._sub: Subscription | None = None

    async def start(self) -> None:
        self._sub = await self._nc.subscribe(subjects.health_subject(self._service), cb=self._answer)

    async def _answer(self, msg: Msg) -> None:
        if not msg.reply:
            return
        st = HealthStatus(service=self._service, instance=self._instance, status=self._status(),
                          started_at=self._started_at)
        await msg.respond(_encoder.encode(st))

    async def stop(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None


async def health(nc: Client, service: str, timeout: float = 1.0) -> HealthStatus:
    """The first answer from any instance of `service`."""
    msg = await nc.request(subjects.health_subject(service), b"", timeout=timeout)
    return _decoder.decode(msg.data)


async def wait_healthy(nc: Client, service: str, timeout: float = 10.0, *, status: str = "ready") -> HealthStatus:
    """Poll until an instance of `service` reports `status`; fails with what it last saw."""
    deadline = time.monotonic() + timeout
    last: object = "no answer"
    while True:
        try:
            st = await health(nc, service, timeout=min(1.0, max(0.05, deadline - time.monotonic())))
            if st.status == status:
                return st
            last = st
        except (TimeoutError, nats.errors.NoRespondersError, nats.errors.TimeoutError) as e:
            last = f"no answer ({type(e).__name__})"
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{service} not {status} within {timeout}s; last seen: {last}")
        await asyncio.sleep(0.05)
