"""The faults a chaos run injects, each with its own undo, through the stack and kubesim's control API.

Process faults are SIGKILLs: the stack's supervisor starts the process again (with backoff),
or, for `takeover-admission`, the hot standby takes the lease. With a NATS cluster (the stack's
nats_cluster >= 3), `kill-nats-node` kills one node (the others keep the streams' quorum: kq keeps
deciding) and `nats-quorum-loss` kills a majority and keeps it down for `hold_s` (JetStream stops
accepting writes: kq must stop safely) before starting it again. API faults go through kubesim's
/kubesim/clusters/<c>/faults and disconnect hooks; windowed ones are undone after `hold_s`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from kq.kube import REMOTE_USER_AGENT
from kq.stack import Stack
from kq.stack.health import instance_status
from kq.stack.natsnodes import node_name

SERVICES = ("watcher", "admission", "tas", "dispatcher", "podsready", "gc")
KILLS = tuple(f"kill-{s}" for s in SERVICES)
API = ("watch-cut", "gone-410", "conflict-409", "throttle-429", "error-500", "unavailable-503", "latency",
       "partition-worker")
ALL = (*KILLS, "takeover-admission", "kill-nats", *API)
NATS_CLUSTER = ("kill-nats-node", "nats-quorum-loss")  # a stack with --nats-cluster 3 only
# The short run of `make test`: one of each family, cheap to recover from.
SHORT = ("kill-watcher", "takeover-admission", "watch-cut", "conflict-409", "kill-nats", "error-500",
         "kill-dispatcher", "gone-410")


@dataclass(frozen=True, slots=True)
class Injected:
    kind: str
    start: float  # unix time, as kubesim's journal stamps changes
    end: float  # when the fault was over (the kill itself, or the undo of a windowed fault)
    detail: str = ""


class FaultError(RuntimeError):
    pass


class Injector:
    def __init__(self, stack: Stack, manager: str = "manager", worker: str = "worker-1", hold_s: float = 3.0) -> None:
        self.stack = stack
        self.manager = manager
        self.worker = worker
        self.hold_s = hold_s
        self._http: aiohttp.ClientSession | None = None
        self._turn = 0  # which NATS node a cluster fault picks next (each in turn)

    async def __aenter__(self) -> Injector:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.close()

    async def _control(self, cluster: str, path: str, body: dict[str, Any] | None = None,
                       method: str = "POST") -> Any:
        assert self._http is not None
        url = f"{self.stack.kubesim_url}/kubesim/clusters/{cluster}/{path}"
        async with self._http.request(method, url, json=body if method == "POST" else None) as r:
            data = await r.json()
            if r.status != 200:
                raise FaultError(f"{method} {path} on {cluster}: {r.status} {data}")
            return data

    async def _leader(self, service: str) -> str:
        for inst in ("0", "1"):
            st = await instance_status(self.stack.bus.nc, service, inst)
            if st is not None and st.status == "ready":
                return inst
        return "0"

    async def inject(self, kind: str) -> Injected:
        start = time.time()
        detail = ""
        if kind in NATS_CLUSTER:
            detail = await self._nats_fault(kind)
        elif kind.startswith("kill-") and kind != "kill-nats":
            service = kind.removeprefix("kill-")
            # With a standby running, the instance killed is the active one's partner: the
            # active instance itself is the takeover fault.
            inst = "0"
            if self.stack.replicas.get(service, 1) > 1:
                inst = "1" if await self._leader(service) == "0" else "0"
            detail = service if inst == "0" else f"{service}-{inst}"
            await self.stack.crash(detail)
        elif kind == "takeover-admission":
            inst = await self._leader("admission")
            detail = "admission" if inst == "0" else f"admission-{inst}"
            await self.stack.crash(detail)
        elif kind == "kill-nats":
            await self.stack.crash("nats-server")
        elif kind == "watch-cut":
            await self._control(self.manager, "faults", {"type": "cut-watches", "midStream": True})
        elif kind == "gone-410":
            await self._control(self.manager, "faults", {"type": "expire-history"})
            await self._control(self.manager, "faults", {"type": "cut-watches", "midStream": False})
        elif kind in ("conflict-409", "throttle-429", "error-500", "unavailable-503"):
            code = int(kind.rsplit("-", 1)[1])
            verbs = ["patch", "update"] if code == 409 else None
            body: dict[str, Any] = {"type": "errors", "code": code, "count": 40, "retryAfterSeconds": 0}
            if verbs:
                body["verbs"] = verbs
            await self._control(self.manager, "faults", body)
            await asyncio.sleep(self.hold_s)
            await self._control(self.manager, "faults", method="DELETE")
        elif kind == "latency":
            await self._control(self.manager, "faults", {"type": "latency", "ms": 250})
            await asyncio.sleep(self.hold_s)
            await self._control(self.manager, "faults", method="DELETE")
        elif kind == "partition-worker":
            await self._control(self.worker, "disconnect", {"userAgentPrefix": REMOTE_USER_AGENT})
            await asyncio.sleep(self.hold_s)
            await self._control(self.worker, "reconnect", {})
        else:
            raise FaultError(f"unknown fault {kind!r}; known: {', '.join(ALL + NATS_CLUSTER)}")
        return Injected(kind, start, time.time(), detail)

    async def _nats_fault(self, kind: str) -> str:
        n = self.stack.nats_cluster
        if n < 3:
            raise FaultError(f"{kind}: needs a NATS cluster of at least 3 nodes (this stack has {n})")
        nodes = [node_name((self._turn + i) % n) for i in range(n)]
        self._turn += 1
        if kind == "kill-nats-node":
            await self.stack.crash(nodes[0])
            return nodes[0]
        majority = nodes[: n // 2 + 1]
        await self.stack.hold_nats(majority)
        await asyncio.sleep(self.hold_s)
        await self.stack.release_nats()
        return ",".join(majority)


def check_kinds(kinds: Sequence[str]) -> None:
    unknown = sorted(set(kinds) - set(ALL) - set(NATS_CLUSTER))
    if unknown:
        raise FaultError(f"--faults: unknown {', '.join(unknown)}; known: {', '.join(ALL + NATS_CLUSTER)}")
