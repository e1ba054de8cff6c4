"""The local stack's bus: one nats-server, or (`kq up --nats-cluster 3`) several on loopback that
form one JetStream cluster, kq's streams replicated on each (nats.streamReplicas).

Cluster nodes need each other's route ports before they start (a JetStream cluster will not start
without routes), so the ports are chosen first (free at that moment; a node that finds its port
taken is started again on new ones). Every node gets the same --routes list (a node skips the
route to itself), so a node restarts with the argv it first had and rejoins from its store.
Node 0 is "nats-server" as in a one-node stack; the others "nats-server-1", "nats-server-2".
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
from pathlib import Path

from kq.natsserver import NatsServer, NatsServerError
from kq.stack.process import ProcessRecord, start_ticks

NODE = "nats-server"
CLUSTER_NAME = "kq"
HOST = "127.0.0.1"
_PORT_ATTEMPTS = 3
_IN_USE = "address already in use"


def node_name(index: int) -> str:
    return NODE if index == 0 else f"{NODE}-{index}"


def free_ports(n: int, host: str = HOST) -> list[int]:
    """n ports nothing listens on now (all held open together, so they differ)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class NatsNodes:
    """The stack's nats-server processes, by name; `url` lists every node's client URL."""

    def __init__(self, dir: Path, logs_dir: Path, size: int = 1, *, detach: bool = False,
                 extra_args: tuple[str, ...] = ()) -> None:
        if size < 1:
            raise NatsServerError(f"a bus needs at least one nats-server, got {size}")
        self.dir = dir  # the JetStream stores: dir itself for one node, dir/<node> in a cluster
        self.logs_dir = logs_dir
        self.size = size
        self.detach = detach
        self.extra_args = extra_args  # the closed bus's config file, when there is one
        self.servers: dict[str, NatsServer] = {}
        self._extra: dict[str, tuple[str, ...]] = {}  # each node's own flags (cluster name, routes)
        self._argv: dict[str, tuple[str, ...]] = {}  # what each node restarts with (fixed ports)
        self._port: dict[str, int] = {}

    @property
    def names(self) -> list[str]:
        return [node_name(i) for i in range(self.size)]

    @property
    def url(self) -> str:
        """Every node's client URL, comma-separated (NatsConfig.url takes such a list)."""
        return ",".join(s.url for s in self.servers.values())

    def _store(self, name: str) -> Path:
        return self.dir if self.size == 1 else self.dir / name

    def _log(self, name: str) -> Path:
        return self.logs_dir / f"{name}.log"

    def _server(self, name: str, port: int, extra: tuple[str, ...], timeout_s: float) -> NatsServer:
        self._extra[name] = extra
        return NatsServer(store_dir=self._store(name), log_file=self._log(name), port=port, detach=self.detach,
                          start_timeout=timeout_s, extra_args=(*self.extra_args, *extra))

    def _cluster_args(self, index: int, route_ports: list[int]) -> tuple[str, ...]:
        routes = ",".join(f"nats://{HOST}:{p}" for p in route_ports)
        return ("-n", f"kq-{index}", "--cluster_name", CLUSTER_NAME,
                "--cluster", f"nats://{HOST}:{route_ports[index]}", "--routes", routes)

    async def start(self, timeout_s: float) -> None:
        if self.size == 1:
            self.servers[NODE] = self._server(NODE, 0, (), timeout_s)
            await self.servers[NODE].start_async()
        else:
            await self._start_cluster(timeout_s)
        for name, s in self.servers.items():
            assert s.client_port is not None
            self._port[name] = s.client_port
            self._argv[name] = _with_port(s.argv, s.client_port)

    async def _start_cluster(self, timeout_s: float) -> None:
        for attempt in range(_PORT_ATTEMPTS):
            ports = free_ports(2 * self.size)
            clients, routes = ports[: self.size], ports[self.size :]
            self.servers = {name: self._server(name, clients[i], self._cluster_args(i, routes), timeout_s)
                            for i, name in enumerate(self.names)}
            try:
                await asyncio.gather(*(s.start_async() for s in self.servers.values()))
                return
            except NatsServerError as e:
                await self.stop(grace_s=2.0)
                if _IN_USE not in str(e) or attempt == _PORT_ATTEMPTS - 1:
                    raise

    def running(self, name: str) -> bool:
        s = self.servers.get(name)
        return s is not None and s.running()

    async def restart(self, name: str, timeout_s: float) -> None:
        """Start a dead node again: its ports, store and log (its peers and clients know no other)."""
        old = self.servers[name]
        old.stop(timeout=0.1)  # reaps the dead process
        s = self.servers[name] = self._server(name, self._port[name], self._extra[name], timeout_s)
        await s.start_async()

    def process(self, name: str) -> subprocess.Popen[bytes] | None:
        s = self.servers.get(name)
        return s.popen if s is not None else None

    def records(self) -> list[ProcessRecord]:
        out = []
        for name, s in self.servers.items():
            assert s.pid is not None and s.log_file is not None
            out.append(ProcessRecord(name=name, role="nats", pid=s.pid, argv=self._argv[name], log=str(s.log_file),
                                     start_ticks=start_ticks(s.pid)))
        return out

    async def stop(self, grace_s: float = 10.0) -> None:
        servers, self.servers = list(self.servers.values()), {}
        await asyncio.gather(*(s.stop_async(grace_s) for s in servers))


def _with_port(argv: tuple[str, ...], port: int) -> tuple[str, ...]:
    out = list(argv)
    out[out.index("-p") + 1] = str(port)
    return tuple(out)
