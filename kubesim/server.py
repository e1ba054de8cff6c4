"""KubeSim: several simulated clusters behind one HTTP listener.

    sim = KubeSim(clusters=["manager", "worker-1"])
    base = await sim.start()                 # "http://127.0.0.1:PORT"
    sim.kubeconfig("manager", path)          # server: http://127.0.0.1:PORT/clusters/manager
    ...
    await sim.stop()
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from kubesim.api_http import ApiServer
from kubesim.cluster import Cluster
from kubesim.control_http import ControlApi
from kubesim.fast_http import FastPath, FrontProtocol
from kubesim.journal import Journal
from kubesim.kueue_webhooks import KueueOptions

_MAX_BODY = 32 * 1024 * 1024


class KubeSim:
    def __init__(
        self,
        clusters: Sequence[str] = ("manager",),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ready_delay_s: float = 0.1,
        sleep_scale: float = 1.0,
        history_size: int = 10_000,
        bookmark_interval_s: float = 2.0,
        watch_flush_s: float = 0.005,
        watch_buffer: int = 10_000,
        seed: int | None = None,
        advertise_url: str | None = None,
        kueue: KueueOptions | None = None,
        journal: Journal | None = None,
    ) -> None:
        if not clusters:
            raise ValueError("clusters: at least one cluster name is required")
        if len(set(clusters)) != len(clusters):
            raise ValueError(f"clusters: duplicate names in {list(clusters)}")
        for name in clusters:
            if not name or "/" in name:
                raise ValueError(f"clusters: bad cluster name {name!r}")
        self._host, self._port = host, port
        # The base URL written into kubeconfigs, when clients reach us by another name (containers).
        self._advertise_url = advertise_url.rstrip("/") if advertise_url else None
        # One PRNG per process, seeded (generated names and uids); seed=None draws a fresh seed.
        self.rng = random.Random(seed if seed is not None else random.SystemRandom().getrandbits(64))
        self.clusters: dict[str, Cluster] = {
            name: Cluster(
                name,
                rng=self.rng,
                ready_delay_s=ready_delay_s,
                sleep_scale=sleep_scale,
                history_size=history_size,
                watch_buffer=watch_buffer,
                kueue=kueue,
            )
            for name in clusters
        }
        self.journal = journal
        if journal is not None:
            for c in self.clusters.values():
                c.store.recorder = functools.partial(journal.record, c.name)
        self._flushing: asyncio.Task[None] | None = None
        self._bookmark_s = bookmark_interval_s
        self._flush_s = watch_flush_s
        self._runner: web.ServerRunner | None = None
        self._listener: asyncio.Server | None = None
        self._fronts: set[FrontProtocol] = set()
        self.url = ""

    def cluster(self, name: str) -> Cluster:
        return self.clusters[name]

    async def start(self) -> str:
        """Listen on host:port (0: any free port). Returns the base URL."""
        api = ApiServer(self.clusters, bookmark_interval_s=self._bookmark_s, watch_flush_s=self._flush_s)
        control = ControlApi(self.clusters, self.kubeconfig_yaml)

        async def route(request: web.BaseRequest) -> web.StreamResponse:
            # Two prefixes, split by hand: aiohttp's Application (router, web.Request, signals)
            # cost about a tenth of kubesim's CPU per request.
            path = request.path
            if path.startswith("/clusters/"):
                cluster, slash, tail = path[len("/clusters/"):].partition("/")
                if slash:
                    return await api.handle(request, cluster, tail)
            elif path.startswith("/kubesim/"):
                return await control.handle(request)
            return web.Response(status=404, text="404: Not Found")

        loop = asyncio.get_running_loop()

        def make_request(message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
            return web.BaseRequest(message, payload, protocol, writer, task, loop, client_max_size=_MAX_BODY)

        server = web.Server(route, request_factory=make_request, access_log=None)
        self._runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        fast = FastPath(api, self.clusters)
        self._listener = await loop.create_server(lambda: FrontProtocol(fast, server, self._fronts),
                                                  self._host, self._port)
        host, port = self._listener.sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        api.server_address = f"{host}:{port}"
        if self.journal is not None:
            self._flushing = asyncio.get_running_loop().create_task(self._flush_journal())
        return self.url

    async def _flush_journal(self) -> None:
        assert self.journal is not None
        while True:
            await asyncio.sleep(0.5)
            self.journal.flush()

    async def stop(self) -> None:
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None
        if self.journal is not None:
            self.journal.close()
        for c in self.clusters.values():
            c.close()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for front in list(self._fronts):
            front.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- kubeconfigs ---

    def server_url(self, cluster: str) -> str:
        if cluster not in self.clusters:
            raise KeyError(f"no cluster {cluster!r}; have {sorted(self.clusters)}")
        return f"{self._advertise_url or self.url}/clusters/{cluster}"

    def kubeconfig_yaml(self, cluster: str) -> str:
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": {"server": self.server_url(cluster)}}],
            "users": [{"name": "kubesim", "user": {"token": "kubesim"}}],
            "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": "kubesim", "namespace": "default"}}],
            "current-context": cluster,
            "preferences": {},
        }
        return yaml.safe_dump(doc, sort_keys=False)

    def kubeconfig(self, cluster: str, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.kubeconfig_yaml(cluster))
        return p

    def write_kubeconfigs(self, directory: str | Path) -> dict[str, Path]:
        return {name: self.kubeconfig(name, Path(directory) / f"{name}.kubeconfig") for name in self.clusters}
