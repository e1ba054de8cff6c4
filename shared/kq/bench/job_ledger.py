"""Where each Job ran: watches batch/v1 Jobs on every worker cluster and records, per Job, every
cluster it was created in and whether it ever existed in two clusters at the same moment.

Used by the MultiKueue benchmark and tests to check "a job never runs in two workers at once"
and "every workload runs exactly once" from the workers' own API servers (watch events in order
per cluster; a Job is counted from its ADDED to its DELETED event).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import msgspec

from kq.kube import Gone, KubeClient, KubeError

Key = tuple[str, str]  # namespace, name


class _Meta(msgspec.Struct, frozen=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    resource_version: str = ""


class _Obj(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()


_decoder = msgspec.json.Decoder(_Obj)


class JobLedger:
    def __init__(self, clients: dict[str, KubeClient]) -> None:
        self.clients = clients
        self.created: dict[Key, list[str]] = defaultdict(list)  # job -> clusters it was created in, in order
        self.live: dict[Key, set[str]] = defaultdict(set)
        self.overlaps: list[tuple[Key, tuple[str, ...]]] = []  # a job live in two clusters at once
        self._tasks: list[asyncio.Task[None]] = []
        self._ready: list[asyncio.Event] = []

    async def __aenter__(self) -> JobLedger:
        for cluster, client in self.clients.items():
            ready = asyncio.Event()
            self._ready.append(ready)
            self._tasks.append(asyncio.create_task(self._follow(cluster, client, ready)))
        await asyncio.gather(*(r.wait() for r in self._ready))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _added(self, cluster: str, key: Key) -> None:
        if cluster in self.live[key]:
            return
        self.live[key].add(cluster)
        self.created[key].append(cluster)
        if len(self.live[key]) > 1:
            self.overlaps.append((key, tuple(sorted(self.live[key]))))

    async def _follow(self, cluster: str, client: KubeClient, ready: asyncio.Event) -> None:
        rv = ""
        while True:
            try:
                if not rv:
                    raws, rv = await client.list("job")
                    for raw in raws:
                        md = _decoder.decode(raw).metadata
                        self._added(cluster, (md.namespace, md.name))
                    ready.set()
                async for ev in client.watch("job", rv, timeout_s=60):
                    md = _decoder.decode(ev.raw).metadata
                    rv = md.resource_version or rv
                    key = (md.namespace, md.name)
                    if ev.type == "ADDED":
                        self._added(cluster, key)
                    elif ev.type == "DELETED":
                        self.live[key].discard(cluster)
            except Gone:
                rv = ""  # a re-list after a gap: Jobs seen again are not counted twice while live
            except KubeError:
                await asyncio.sleep(0.2)

    def ran_more_than_once(self) -> dict[Key, list[str]]:
        return {k: v for k, v in self.created.items() if len(v) > 1}
