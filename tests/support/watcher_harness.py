"""Running the watcher against an in-process kubesim and a real nats-server, and reading what it did.

Used by tests/service/test_watcher_*.py and tests/reliability/test_watcher_*.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Self

import msgspec

from kq import subjects
from kq.api.registry import decode_object, kind_info
from kq.config import ClusterConfig
from kq.kube import KubeClient, KubeError
from kq.messages import Command, CommandOutcome, command_subject_of
from kq.mirror import MirrorView, ObjectRecord
from kq.runtime import Bus, Replay
from kubesim.server import KubeSim
from services.watcher.service import ClusterWatcher, connect_clusters, run_watchers
from services.watcher.settings import WatcherSettings

Key = tuple[str, str, str]  # (kind, namespace, name)

# Fast settings: short watches and backoffs so faults heal quickly in tests.
FAST = WatcherSettings(watch_timeout_s=30.0, retry_base_s=0.05, retry_max_s=0.5, publish_batch=256)


def cluster_configs(sim: KubeSim, tmp: Path, clusters: list[str]) -> tuple[ClusterConfig, ...]:
    return tuple(ClusterConfig(name=c, kubeconfig=str(sim.kubeconfig(c, tmp / f"{c}.kubeconfig"))) for c in clusters)


@asynccontextmanager
async def running_watcher(bus: Bus, sim: KubeSim, tmp: Path, clusters: list[str],
                          settings: WatcherSettings = FAST, sync_timeout: float = 30.0,
                          frameworks: frozenset[str] = frozenset()) -> AsyncIterator[list[ClusterWatcher]]:
    """The watcher in-process, started and synced (every kind listed into the mirror); stopped after.
    `frameworks`: the job frameworks besides batch/job it integrates (Kueue's names)."""
    async with AsyncExitStack() as stack:
        watchers = await connect_clusters(stack, bus, cluster_configs(sim, tmp, clusters), settings,
                                          frameworks=frameworks)
        task = asyncio.create_task(run_watchers(bus, watchers), name="watcher-under-test")
        try:
            synced: asyncio.Future[list[None]] = asyncio.ensure_future(asyncio.gather(*(w.wait_synced() for w in watchers)))
            waiting: set[asyncio.Future[Any]] = {task, synced}
            done, _ = await asyncio.wait(waiting, timeout=sync_timeout, return_when=asyncio.FIRST_COMPLETED)
            if task in done:
                synced.cancel()
                task.result()
                raise AssertionError("watcher stopped before it synced")
            if synced not in done:
                synced.cancel()
                raise AssertionError(f"watcher not synced within {sync_timeout}s: "
                                     f"{[sorted(w.publisher.synced) for w in watchers]}")
            yield watchers
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await task


async def api_state(client: KubeClient, kinds: list[str], secrets_namespace: str = "kq-system") -> dict[Key, str]:
    """(kind, ns, name) -> resourceVersion of everything the API server holds of these kinds."""
    out: dict[Key, str] = {}
    head = msgspec.json.Decoder(dict)
    for kind in kinds:
        items, _ = await client.list(kind, namespace=secrets_namespace if kind == "secret" else None)
        for raw in items:
            meta = head.decode(raw)["metadata"]
            out[(kind, meta.get("namespace", ""), meta["name"])] = meta["resourceVersion"]
    return out


def mirror_state(view: MirrorView, cluster: str, kinds: list[str]) -> dict[Key, str]:
    out: dict[Key, str] = {}
    for kind in kinds:
        for rec in view.items(cluster, kind):
            out[(kind, rec.namespace, rec.name)] = rec.resource_version
    return out


def diff(want: dict[Key, str], got: dict[Key, str]) -> str:
    """'' when equal, else a short description (for eventually's failure message)."""
    missing = sorted(k for k in want if k not in got)
    extra = sorted(k for k in got if k not in want)
    stale = sorted((k, got[k], want[k]) for k in want if k in got and got[k] != want[k])
    if not (missing or extra or stale):
        return ""
    return f"missing={missing[:5]} extra={extra[:5]} stale={stale[:5]}"


class _Following:
    """A replay started (and caught up) on entry and stopped on exit; subclasses set self._replay."""

    _replay: Replay

    async def __aenter__(self) -> Self:
        await self._replay.__aenter__()
        await self._replay.wait_caught_up(timeout=10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._replay.__aexit__(*exc)


class MirrorFollower(_Following):
    """A MirrorView kept up to date by a replay of the mirror, plus every record stored on the way
    (once per stream sequence: a replay consumer that resets after a gap may deliver one again)."""

    def __init__(self, bus: Bus, cluster: str) -> None:
        self.view = MirrorView()
        self._by_seq: dict[int, ObjectRecord] = {}
        filters = [subjects.object_filter(cluster), subjects.SYNC_ALL]
        self._replay = bus.replay(subjects.OBJECTS_STREAM, filters, self._saw, deliver="last_per_subject")

    async def _saw(self, d: Any) -> None:
        what = self.view.apply_delivery(d)
        if isinstance(what, ObjectRecord):
            self._by_seq[d.stream_seq] = what

    @property
    def seen(self) -> list[ObjectRecord]:
        return [self._by_seq[seq] for seq in sorted(self._by_seq)]


class Outcomes(_Following):
    """Every CommandOutcome a writer gets for a cluster, by command id."""

    def __init__(self, bus: Bus, writer: str, cluster: str) -> None:
        self.by_id: dict[str, CommandOutcome] = {}
        self.count = 0

        async def handle(d: Any) -> None:
            out = msgspec.json.decode(d.data, type=CommandOutcome)
            self.by_id[out.command_id] = out
            self.count += 1

        self._replay = bus.replay(subjects.EVENTS_STREAM, subjects.outcome_subject(writer, cluster), handle)


async def send(bus: Bus, cmd: Command) -> None:
    await bus.publish(command_subject_of(cmd), cmd, msg_id=cmd.id)


async def read_typed(client: KubeClient, kind: str, namespace: str | None, name: str) -> Any:
    """The object as its kq.api Struct, None when absent (typed Any: most tests read what must exist)."""
    raw = await client.get(kind, namespace, name)
    return None if raw is None else decode_object(kind, raw)


async def create(client: KubeClient, doc: dict[str, Any]) -> Any:
    info = kind_info(doc["kind"])
    ns = doc["metadata"].get("namespace") if info.namespaced else None
    return decode_object(info.token, await client.create(info.token, ns, doc))


def workload_doc(name: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": name, "namespace": "demo"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}}


class Churn:
    """Creates, changes and deletes flavors and workloads until stopped (seeded, so reproducible)."""

    def __init__(self, kube: KubeClient, seed: int) -> None:
        self.kube = kube
        self.rng = random.Random(seed)
        self.ops = 0
        self._live: list[tuple[str, str]] = []
        self._n = 0
        self._stop = asyncio.Event()

    async def _one(self) -> None:
        r = self.rng.random()
        if r < 0.5 or len(self._live) < 5:
            self._n += 1
            if self.rng.random() < 0.5:
                name = f"f{self._n}"
                await create(self.kube, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                         "metadata": {"name": name}})
                self._live.append(("resourceflavor", name))
            else:
                name = f"w{self._n}"
                await create(self.kube, workload_doc(name))
                self._live.append(("workload", name))
        elif r < 0.8:
            kind, name = self.rng.choice(self._live)
            body = {"metadata": {"labels": {"touched": str(self.ops)}}}
            await self.kube.patch(kind, "demo" if kind == "workload" else None, name, body, patch_type="merge")
        else:
            kind, name = self._live.pop(self.rng.randrange(len(self._live)))
            await self.kube.delete(kind, "demo" if kind == "workload" else None, name)
        self.ops += 1

    async def run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(KubeError):  # an injected fault hit us too: carry on
                await self._one()
            await asyncio.sleep(0)

    def stop(self) -> None:
        self._stop.set()
