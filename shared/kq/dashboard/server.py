"""The dashboard's shell: follow the bus, answer the page (aiohttp).

It follows the object mirror (ClusterQueues, LocalQueues, Cohorts, Workloads) and the decision
log (KQ_EVENTS) of one cluster, and asks the admission leader for positions (the visibility API,
request/reply) when the page asks for a state, at most once a second. It reads only the bus: like
every kq process but the watcher, it never talks to Kubernetes.

    GET /            the page (kq.dashboard.page)
    GET /api/state   kq.dashboard.view.DashboardState as JSON
    GET /livez /readyz
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import msgspec
import nats.errors
import nats.js.errors
from aiohttp import web

from kq import subjects
from kq.config import NatsConfig
from kq.dashboard.page import PAGE
from kq.dashboard.view import DashboardState, dashboard_state
from kq.messages import Decision, WorkloadPendingEvent, decision_decoder
from kq.mirror import MirrorView
from kq.runtime.bus import Bus
from kq.runtime.delivery import Delivery
from kq.visibility import PendingWorkloadsRequest, PendingWorkloadsSummary, answer_decoder

MIRRORED_KINDS = ("clusterqueue", "localqueue", "cohort", "workload")
KEPT_DECISIONS = 200  # newest admissions/preemptions/evictions kept for the page
STATE_TTL_S = 1.0  # a state is reused this long: many open pages cost one round of visibility requests
VISIBILITY_TIMEOUT_S = 2.0
_encoder = msgspec.json.Encoder()


class DashboardFeed:
    """What the bus says about one cluster, kept up to date while running."""

    def __init__(self, bus: Bus, cluster: str) -> None:
        self.bus = bus
        self.cluster = cluster
        self.mirror = MirrorView()
        self.decisions: deque[Decision] = deque(maxlen=KEPT_DECISIONS)
        self.synced = asyncio.Event()  # the mirror replay caught up
        self._state: tuple[float, DashboardState] | None = None

    async def _on_decision(self, d: Delivery) -> None:
        try:
            decision = decision_decoder.decode(d.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return  # a decision of a kind this version does not know: not the dashboard's to judge
        if not isinstance(decision, WorkloadPendingEvent):
            self.decisions.append(decision)

    @asynccontextmanager
    async def following(self) -> AsyncIterator[DashboardFeed]:
        """Follow the mirror and the decisions until the block ends (streams not there yet are retried)."""
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(self._replay_mirror()), tg.create_task(self._replay_decisions())]
            try:
                yield self
            finally:
                for t in tasks:
                    t.cancel()

    async def _retrying(self, stream: str, run: Callable[[], Awaitable[None]]) -> None:
        delay = 0.2
        while True:
            try:
                await run()
                return
            except nats.js.errors.NotFoundError:  # no watcher / no service has made the stream yet
                self.bus.log.info("dashboard waits for a stream", stream=stream)
                await self.bus.clock.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _replay_mirror(self) -> None:
        async def run() -> None:
            async with AsyncExitStack() as stack:
                replays = [await stack.enter_async_context(self.mirror.replay(self.bus, self.cluster, kind))
                           for kind in MIRRORED_KINDS]
                for r in replays:
                    await r.wait_caught_up()
                self.synced.set()
                await asyncio.Event().wait()  # follow until cancelled

        await self._retrying(subjects.OBJECTS_STREAM, run)

    async def _replay_decisions(self) -> None:
        async def run() -> None:
            filt = subjects.event_filter(self.cluster, "workload")
            async with self.bus.replay(subjects.EVENTS_STREAM, filt, self._on_decision):
                await asyncio.Event().wait()

        await self._retrying(subjects.EVENTS_STREAM, run)

    async def _pending(self, cluster_queue: str) -> PendingWorkloadsSummary | None:
        req = PendingWorkloadsRequest(cluster_queue=cluster_queue, limit=100)
        try:
            msg = await self.bus.nc.request(subjects.visibility_subject(self.cluster), msgspec.json.encode(req),
                                            timeout=VISIBILITY_TIMEOUT_S)
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError, TimeoutError):
            return None  # no leader right now: the page says positions are unknown
        return answer_decoder.decode(msg.data).summary

    async def state(self) -> DashboardState:
        now = self.bus.clock.monotonic()  # the one clock
        if self._state is not None and now - self._state[0] < STATE_TTL_S:
            return self._state[1]
        m, c = self.mirror, self.cluster
        cqs = m.typed_items(c, "clusterqueue")
        names = [cq.metadata.name for cq in cqs]
        answers = await asyncio.gather(*(self._pending(n) for n in names))
        state = dashboard_state(
            c, cluster_queues=cqs, local_queues=m.typed_items(c, "localqueue"), cohorts=m.typed_items(c, "cohort"),
            workloads=m.typed_items(c, "workload"), pending=dict(zip(names, answers, strict=True)),
            decisions=list(self.decisions))
        self._state = (now, state)
        return state


def dashboard_app(feed: DashboardFeed) -> web.Application:
    async def page(_req: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def state(_req: web.Request) -> web.Response:
        return web.Response(body=_encoder.encode(await feed.state()), content_type="application/json")

    async def livez(_req: web.Request) -> web.Response:
        return web.Response(text='{"live":true}', content_type="application/json")

    async def readyz(_req: web.Request) -> web.Response:
        ready = feed.synced.is_set() and feed.bus.nc.is_connected
        return web.Response(text=f'{{"ready":{str(ready).lower()}}}', status=200 if ready else 503,
                            content_type="application/json")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/api/state", state)
    app.router.add_get("/livez", livez)
    app.router.add_get("/readyz", readyz)
    return app


@asynccontextmanager
async def serving(nats: NatsConfig, cluster: str, host: str, port: int) -> AsyncIterator[tuple[DashboardFeed, int]]:
    """Connect, follow, serve; yields the feed and the bound port (port 0 picks a free one)."""
    bus = await Bus.connect(nats, "dashboard", connect_timeout_s=10.0)
    try:
        feed = DashboardFeed(bus, cluster)
        async with feed.following():
            runner = web.AppRunner(dashboard_app(feed), access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, host, port)
            await site.start()
            sockets = getattr(site._server, "sockets", None) or ()  # aiohttp keeps the bound sockets there
            bound = sockets[0].getsockname()[1] if sockets else port
            try:
                yield feed, bound
            finally:
                await runner.cleanup()
    finally:
        with contextlib.suppress(Exception):
            await bus.close()
