"""Where each Job ran: watches batch/v1 Jobs on every worker cluster and records, per Job, every
cluster it was created in and whether it was ever running (unsuspended, not finished) in two
clusters at the same moment.

Used by the MultiKueue benchmark and tests to check "a job never runs in two workers at once"
and "every workload runs exactly once" from the workers' own API servers (watch events in order
per cluster).
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


class _Spec(msgspec.Struct, frozen=True):
    suspend: bool | None = None


class _Cond(msgspec.Struct, frozen=True):
    type: str = ""
    status: str = ""


class _Status(msgspec.Struct, frozen=True):
    conditions: tuple[_Cond, ...] = ()


class _Obj(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()
    spec: _Spec = _Spec()
    status: _Status = _Status()

    @property
    def running(self) -> bool:
        """Unsuspended and not finished: its pods may run."""
        done = any(c.type in ("Complete", "Failed") and c.status == "True" for c in self.status.conditions)
        return self.spec.suspend is not True and not done


_decoder = msgspec.json.Decoder(_Obj)


class JobLedger:
    def __init__(self, clients: dict[str, KubeClient]) -> None:
        self.clients = clients
        self.created: dict[Key, list[str]] = defaultdict(list)  # job -> clusters it was created in, in order
        self.seen: dict[Key, set[str]] = defaultdict(set)  # clusters where the Job exists now
        self.live: dict[Key, set[str]] = defaultdict(set)  # clusters where it is running now
        self.overlaps: list[tuple[Key, tuple[str, ...]]] = []  # a job running in two clusters at once
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

    def _seen(self, cluster: str, obj: _Obj) -> None:
        key = (obj.metadata.namespace, obj.metadata.name)
        if cluster not in self.seen[key]:
            self.seen[key].add(cluster)
            self.created[key].append(cluster)
        if not obj.running:
            self.live[key].discard(cluster)
        elif cluster not in self.live[key]:
            self.live[key].add(cluster)
            if len(self.live[key]) > 1:
                self.overlaps.append((key, tuple(sorted(self.live[key]))))

    def _gone(self, cluster: str, key: Key) -> None:
        self.seen[key].discard(cluster)
        self.live[key].discard(cluster)

    async def _follow(self, cluster: str, client: KubeClient, ready: asyncio.Event) -> None:
        rv = ""
        while True:
            try:
                if not rv:
                    raws, rv = await client.list("job")
                    for raw in raws:
                        self._seen(cluster, _decoder.decode(raw))
                    ready.set()
                async for ev in client.watch("job", rv, timeout_s=60):
                    obj = _decoder.decode(ev.raw)
                    rv = obj.metadata.resource_version or rv
                    if ev.type in ("ADDED", "MODIFIED"):
                        self._seen(cluster, obj)
                    elif ev.type == "DELETED":
                        self._gone(cluster, (obj.metadata.namespace, obj.metadata.name))
            except Gone:
                rv = ""  # a re-list after a gap: Jobs seen again are not counted twice while live
            except KubeError:
                await asyncio.sleep(0.2)

    def ran_more_than_once(self) -> dict[Key, list[str]]:
        return {k: v for k, v in self.created.items() if len(v) > 1}
