"""gc: every gcInterval, remove MultiKueue orphans from the workers and apply the manager's
Workload retention policies.

Reads the manager's Workloads and MultiKueueClusters from the bus mirror; talks to each worker
with its own client (kubeconfig from the worker's Secret, read from the manager's API server, or
a file: kq.remote_clusters), listing only objects with our origin label. A worker that cannot be
reached is skipped and swept on a later pass, after it is back. Deleting a manager Workload for
retention is a command to the watcher, like every manager write. Safe to run more than once:
every deletion is idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import AsyncExitStack
from datetime import UTC, datetime

import msgspec
import nats.errors
from nats.js.errors import NotFoundError

from kq import subjects
from kq.api import constants as k
from kq.api.kueue import MultiKueueCluster
from kq.api.registry import decode_object
from kq.config import Config, ConfigError, duration_seconds
from kq.kube import KubeClient, KubeError, NotFound
from kq.kubeconfigs import KubeconfigError
from kq.messages import DeleteWorkload, command_msg_id, command_subject_of
from kq.mirror import MirrorRecordError, MirrorView, decode_record
from kq.obs import get_logger
from kq.remote_clusters import KubeconfigSource
from kq.runtime import Bus, Delivery, OutMsg, Replay
from services.gc.core.sweep import Orphans, confirmed, expired, orphans

NsName = tuple[str, str]
SERVICE = "gc"
WRITER = "gc"
KQ_NAMESPACE = "kq-system"


class GcSettings(msgspec.Struct, frozen=True, kw_only=True):
    kq_namespace: str = KQ_NAMESPACE
    replay_timeout_s: float = 120.0


class Sweeper:
    def __init__(self, bus: Bus, manager: str, loader: KubeconfigSource, origin: str,
                 after_finished_s: float | None, after_deactivated_s: float | None,
                 kinds: tuple[str, ...] = k.MULTIKUEUE_JOB_KINDS) -> None:
        self.bus = bus
        self.manager = manager
        self.loader = loader
        self.origin = origin
        self.kinds = kinds  # what MultiKueue copies to workers (kq.api.constants.multikueue_job_kinds)
        self.after_finished_s = after_finished_s
        self.after_deactivated_s = after_deactivated_s
        self.before: dict[str, Orphans] = {}
        self.clients: dict[str, tuple[object, KubeClient]] = {}
        self.log = get_logger("kq.gc", cluster=manager)
        self.view = MirrorView(on_invalid=lambda key, why: self.log.warning(
            "object skipped: it does not decode", object=f"{key.kind}/{key.namespace}/{key.name}", error=why))

    async def close(self) -> None:
        for _, client in self.clients.values():
            await client.close()

    def needs_workloads(self) -> bool:
        """Every manager Workload matters only to a retention policy. Orphans need only the few whose
        copies a worker holds, read from the mirror's last value at each pass (manager_uids):
        following every change of every Workload cost gc and the bus a delivery per change."""
        return self.after_finished_s is not None or self.after_deactivated_s is not None

    async def sweep(self) -> None:
        for mkc in self.view.typed_items(self.manager, "multikueuecluster"):
            await self._sweep_cluster(mkc)
        await self._retention()

    async def manager_uids(self, keys: set[NsName]) -> dict[NsName, str]:
        """(namespace, name) -> uid of those of `keys` that exist on the manager: from the followed
        Workloads when there are (retention), else each one's last value in the mirror."""
        if self.needs_workloads():
            return {(r.namespace, r.name): r.uid for r in self.view.items(self.manager, "workload")}
        out: dict[NsName, str] = {}
        for ns, name in sorted(keys):
            subject = subjects.object_subject(self.manager, "workload", ns, name)
            try:
                msg = await self.bus.js.get_msg(subjects.OBJECTS_STREAM, subject=subject, direct=True)
            except NotFoundError:  # never mirrored (or long gone from the stream): not on the manager
                continue
            rec = decode_record(subject, msg.headers, bytes(msg.data or b""))
            if not rec.deleted:
                out[(ns, name)] = rec.uid
        return out

    async def _client(self, mkc: MultiKueueCluster) -> KubeClient:
        src = mkc.spec.cluster_source.kube_config
        held = self.clients.get(mkc.metadata.name)
        if held is not None and held[0] == src:
            return held[1]
        if held is not None:
            await held[1].close()
            del self.clients[mkc.metadata.name]
        client = await self.loader.connect(src, self.origin)
        self.clients[mkc.metadata.name] = (src, client)
        return client

    async def _sweep_cluster(self, mkc: MultiKueueCluster) -> None:
        name = mkc.metadata.name
        selector = f"{k.MULTIKUEUE_ORIGIN_LABEL}={self.origin}"
        try:
            client = await self._client(mkc)
            wl_raws, _ = await client.list("workload", label_selector=selector)
            objects = {kind: [decode_object(kind, r) for r in await _list_if_served(client, kind, selector)]
                       for kind in self.kinds}
            remote = [decode_object("workload", r) for r in wl_raws]
            keys = {(w.metadata.namespace, w.metadata.name) for w in remote} | {
                (o.metadata.namespace, o.metadata.labels.get(k.PREBUILT_WORKLOAD_LABEL, o.metadata.name))
                for objs in objects.values() for o in objs}
            manager = await self.manager_uids(keys)
        except (KubeconfigError, ValueError, KubeError, MirrorRecordError, nats.errors.Error) as e:
            self.before.pop(name, None)  # start counting again once it is back
            self.log.info("worker skipped this pass", worker=name, why=type(e).__name__)
            return
        found = orphans(remote, objects, manager)
        doomed = confirmed(found, self.before.get(name))
        self.before[name] = found
        try:
            for kind, ns, obj in doomed.objects:
                await _delete(client, kind, ns, obj)
            for ns, wl in doomed.workloads:
                await _delete(client, "workload", ns, wl)
        except KubeError as e:
            self.log.info("worker sweep interrupted", worker=name, why=type(e).__name__)
            return
        if doomed.objects or doomed.workloads:
            self.log.info("orphans removed", worker=name, workloads=[f"{a}/{b}" for a, b in doomed.workloads],
                          objects=[f"{kind}/{a}/{b}" for kind, a, b in doomed.objects])

    async def _retention(self) -> None:
        if self.after_finished_s is None and self.after_deactivated_s is None:
            return
        wls = self.view.typed_items(self.manager, "workload")
        cmds = []
        for wl, reason in expired(wls, self.after_finished_s, self.after_deactivated_s, datetime.now(UTC)):
            md = wl.metadata
            cmds.append(DeleteWorkload(id=f"gc-retention:{md.uid}", cluster=self.manager, writer=WRITER,
                                       namespace=md.namespace, name=md.name, uid=md.uid, reason=reason))
        if cmds:
            await self.bus.publish_many([OutMsg(command_subject_of(c), c, command_msg_id(c))
                                         for c in cmds])


async def _list_if_served(client: KubeClient, kind: str, selector: str) -> list[bytes]:
    """A worker without the kind's API (no JobSet CRD, no Kubeflow) has none of it."""
    try:
        raws, _ = await client.list(kind, label_selector=selector)
    except NotFound:
        return []
    return raws


async def _delete(client: KubeClient, kind: str, ns: str, name: str) -> None:
    with contextlib.suppress(NotFound):
        await client.delete(kind, ns, name, propagation="Background")


def _seconds(text: str | None, field: str) -> float | None:
    if text is None:
        return None
    try:
        return duration_seconds(text)
    except ConfigError as e:
        raise ConfigError(f"kueue.{field}: {e}") from None


async def main(bus: Bus, config: Config, settings: GcSettings | None = None) -> None:
    settings = settings or GcSettings()
    log = get_logger("kq.gc", instance=config.instance)
    mk = config.kueue.multi_kueue
    interval = _seconds(mk.gc_interval if mk else "1m", "multiKueue.gcInterval") or 60.0
    origin = mk.origin if mk else "multikueue"
    wr = config.kueue.object_retention_policies.workloads if config.kueue.object_retention_policies else None
    after_finished = _seconds(wr.after_finished if wr else None, "objectRetentionPolicies.workloads.afterFinished")
    after_deactivated = _seconds(wr.after_deactivated_by_kueue if wr else None,
                                 "objectRetentionPolicies.workloads.afterDeactivatedByKueue")
    managers = [c for c in config.clusters if c.role == "manager"]
    if not managers:
        log.info("no manager cluster configured; nothing to collect")
        bus.mark_ready()
        await asyncio.Event().wait()
    manager = managers[0]
    async with AsyncExitStack() as stack:
        client = await KubeClient.from_kubeconfig(manager.kubeconfig, user_agent="kq/gc",
                                                  rate=config.kueue.client_rate())
        stack.push_async_callback(client.close)
        sweeper = Sweeper(bus, manager.name, KubeconfigSource(client, settings.kq_namespace), origin,
                          after_finished, after_deactivated, k.multikueue_job_kinds(config.kueue.frameworks()))
        stack.push_async_callback(sweeper.close)

        async def follow(d: Delivery) -> None:
            sweeper.view.apply_delivery(d)

        def replay_of(kind: str) -> Replay:
            return bus.replay(subjects.OBJECTS_STREAM, subjects.object_filter(manager.name, kind), follow,
                              deliver="last_per_subject")

        async with asyncio.TaskGroup() as tg:
            clusters = replay_of("multikueuecluster")
            tg.create_task(clusters.run(), name="gc:mirror:multikueuecluster")
            await clusters.wait_caught_up(timeout=settings.replay_timeout_s)
            bus.mark_ready()
            log.info("collecting", interval_s=interval, origin=origin)
            workloads: Replay | None = None
            while True:
                if workloads is None and sweeper.needs_workloads():
                    # From then on for good: a replay of the last values catches up with every
                    # Workload there is (deleted ones included: they are simply absent).
                    workloads = replay_of("workload")
                    tg.create_task(workloads.run(), name="gc:mirror:workload")
                    await workloads.wait_caught_up(timeout=settings.replay_timeout_s)
                    log.info("following the manager's workloads", workloads=len(sweeper.view.items(manager.name,
                                                                                               "workload")))
                await sweeper.sweep()
                await asyncio.sleep(interval)
