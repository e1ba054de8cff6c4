"""Each process's HTTP endpoint (aiohttp): /metrics for Prometheus, /livez and /readyz for the kubelet.

live:  the service's loops are running (its main task has not ended) and the event loop answers;
ready: live, and caught up with the bus and holding or standing by for its lease (the bus status
       is "ready" or "standby"; kq.runtime.service and the service itself set it).
Both answer 200 or 503 with a one-line JSON body saying why.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
from aiohttp import web

from kq.config import HttpConfig
from kq.metrics import CONTENT_TYPE, ProcessMetrics

READY_STATUSES = frozenset({"ready", "standby"})


class Probe(msgspec.Struct, frozen=True, kw_only=True):
    service: str
    instance: str
    status: str  # the bus status: starting | standby | ready | stopping
    live: bool
    ready: bool


_encoder = msgspec.json.Encoder()


class HttpEndpoint:
    def __init__(self, config: HttpConfig, service: str, instance: str, metrics: ProcessMetrics,
                 status: Callable[[], str], live: Callable[[], bool]) -> None:
        self.config = config
        self.service = service
        self.instance = instance
        self.metrics = metrics
        self._status = status
        self._live = live
        self._runner: web.AppRunner | None = None
        self.port: int | None = None  # bound port, once started

    def probe(self) -> Probe:
        status = self._status()
        live = self._live() and status != "stopping"
        ready = live and status in READY_STATUSES
        self.metrics.set_ready(ready)
        return Probe(service=self.service, instance=self.instance, status=status, live=live, ready=ready)

    async def _livez(self, _req: web.Request) -> web.Response:
        p = self.probe()
        return web.Response(body=_encoder.encode(p), status=200 if p.live else 503, content_type="application/json")

    async def _readyz(self, _req: web.Request) -> web.Response:
        p = self.probe()
        return web.Response(body=_encoder.encode(p), status=200 if p.ready else 503, content_type="application/json")

    async def _metrics(self, _req: web.Request) -> web.Response:
        self.probe()  # kq_service_ready as of this scrape
        resp = web.Response(body=self.metrics.exposition())
        resp.headers["Content-Type"] = CONTENT_TYPE
        return resp

    async def start(self) -> int | None:
        """Serve when a port is configured; returns the bound port (or None when disabled)."""
        if self.config.port is None:
            return None
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/livez", self._livez)
        app.router.add_get("/healthz", self._livez)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port)
        await site.start()
        server = site._server  # aiohttp keeps the bound sockets there; port 0 means "any free one"
        sockets = getattr(server, "sockets", None) or ()
        self.port = sockets[0].getsockname()[1] if sockets else self.config.port
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
