"""Wiring of the watcher: per configured cluster, the mirror (a list+watch loop per kind and one
publisher), the Job integration, and the command consumer on that cluster's KQ_CMD subjects.

Start order per cluster: rebuild the mirror index from the mirror itself and the writers'
epochs from our past outcomes, then list/watch, reconcile and consume. The service reports
ready once every kind of every cluster has been listed once.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import msgspec

from kq import subjects
from kq.config import ClusterConfig, Config, KueueConfig
from kq.kube import KubeClient
from kq.obs import get_logger
from kq.runtime import Bus
from services.watcher.core.managed import JobPolicy, default_selector
from services.watcher.frameworks import FrameworkIntegration
from services.watcher.handlers import CommandExecutor
from services.watcher.integration import NEEDED_KINDS, JobIntegration
from services.watcher.invalid import InvalidObjects
from services.watcher.listwatch import KindLoop
from services.watcher.mirror import MirrorIndex, MirrorPublisher
from services.watcher.objects import ClusterObjects
from services.watcher.settings import WatcherSettings
from services.watcher.ungater import TopologyUngater

SERVICE = "watcher"


def _ignore(kind: str, old: object, new: object) -> None:
    pass


def command_durable(cluster: str) -> str:
    return f"watcher-{subjects.escape(cluster)}"


class ClusterWatcher:
    """Everything the watcher does for one cluster."""

    def __init__(self, bus: Bus, cluster: str, client: KubeClient, settings: WatcherSettings, *,
                 job_integration: bool = True, frameworks: frozenset[str] = frozenset(),
                 policy: JobPolicy | None = None) -> None:
        self.bus = bus
        self.cluster = cluster
        self.client = client
        self.settings = settings
        self.index = MirrorIndex()
        self.objects = ClusterObjects(cluster)
        self.publisher = MirrorPublisher(bus, cluster, batch=settings.publish_batch, queue_size=settings.publish_queue,
                                         rounds=settings.publish_rounds)
        self.jobs = JobIntegration(client, self.objects, workers=settings.job_workers, max_steps=settings.max_job_steps,
                                   retry_base_s=settings.retry_base_s, retry_max_s=settings.retry_max_s,
                                   clock=bus.clock, wait_for_pods_ready=bool(settings.wait_for_pods_ready),
                                   tracer=bus.tracer, policy=policy)
        self.commands = CommandExecutor(bus, cluster, client, self.objects, concurrency=settings.command_concurrency,
                                        max_replans=settings.max_replans)
        kinds = settings.mirrored_kinds()
        # The Job integration needs Jobs, Workloads, flavors and priority classes; without them it is off.
        # Kueue's integrations.frameworks may leave batch/job out: then it is off too.
        self.integrate = job_integration and all(kind in kinds for kind in NEEDED_KINDS)
        self.frameworks = FrameworkIntegration(client, self.objects, frameworks, workers=settings.job_workers,
                                               retry_base_s=settings.retry_base_s, retry_max_s=settings.retry_max_s,
                                               clock=bus.clock,
                                               wait_for_pods_ready=bool(settings.wait_for_pods_ready),
                                               policy=policy)
        # JobSets, pods and the rest: on when their kinds are mirrored (the switches per framework are inside).
        self.integrate_frameworks = all(kind in kinds for kind in self.frameworks.needed_kinds)
        self.ungater = TopologyUngater(client, self.objects, retry_s=settings.retry_base_s)
        on_job = self.jobs.on_change if self.integrate else _ignore
        on_framework = self.frameworks.on_change if self.integrate_frameworks else _ignore

        def on_change(kind: str, old: object, new: object) -> None:
            on_job(kind, old, new)
            on_framework(kind, old, new)
            self.ungater.on_change(kind, old, new)

        self.invalid = InvalidObjects(client, cluster, bus.clock, bus.instance, retry_base_s=settings.retry_base_s,
                                      retry_max_s=settings.retry_max_s)
        self.loops = [
            KindLoop(client, cluster, kind, namespace=None,
                     index=self.index, publisher=self.publisher, objects=self.objects, on_change=on_change,
                     watch_timeout_s=settings.watch_timeout_s, retry_base_s=settings.retry_base_s,
                     retry_max_s=settings.retry_max_s, clock=bus.clock, invalid=self.invalid)
            for kind in kinds
        ]
        self.log = get_logger("kq.watcher", cluster=cluster)

    async def wait_synced(self) -> None:
        """Until every mirrored kind's first list is stored (records and SyncMarker)."""
        await self.publisher.wait_synced([loop.kind for loop in self.loops])

    async def run(self) -> None:
        await self.index.rebuild(self.bus, self.cluster)
        await self.commands.restore_epochs()
        self.log.info("state rebuilt", mirrored=len(self.index), writers=self.commands.epochs)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.publisher.run(), name=f"mirror-publisher:{self.cluster}")
            for loop in self.loops:
                tg.create_task(loop.run(), name=f"listwatch:{self.cluster}:{loop.kind}")
            if self.integrate:
                tg.create_task(self.jobs.run(), name=f"jobs:{self.cluster}")
            if self.integrate_frameworks:
                tg.create_task(self.frameworks.run(), name=f"frameworks:{self.cluster}")
            tg.create_task(self.ungater.run(), name=f"ungater:{self.cluster}")
            tg.create_task(self.invalid.run(), name=f"invalid:{self.cluster}")
            tg.create_task(
                self.bus.consume_batches(
                    command_durable(self.cluster), subjects.COMMANDS_STREAM, subjects.command_filter(self.cluster),
                    self.commands.handle_batch, batch=self.settings.command_batch,
                    pipeline=self.settings.command_pipeline,
                    window=self.settings.command_window,
                ),
                name=f"commands:{self.cluster}",
            )


async def _mark_ready_when_synced(bus: Bus, watchers: list[ClusterWatcher]) -> None:
    for w in watchers:
        await w.wait_synced()
    bus.mark_ready()


async def connect_clusters(stack: AsyncExitStack, bus: Bus, clusters: tuple[ClusterConfig, ...],
                           settings: WatcherSettings, *, job_integration: bool = True,
                           frameworks: frozenset[str] = frozenset(),
                           policy: JobPolicy | None = None,
                           rate: tuple[float, int] | None = None) -> list[ClusterWatcher]:
    if not clusters:
        raise ValueError("watcher: no clusters configured (config `clusters`)")
    watchers: list[ClusterWatcher] = []
    for c in clusters:
        client = await KubeClient.from_kubeconfig(c.kubeconfig, user_agent="kq/watcher",
                                                  pipeline=settings.api_pipeline, rate=rate)
        stack.push_async_callback(client.close)
        watchers.append(ClusterWatcher(bus, c.name, client, settings, job_integration=job_integration,
                                       frameworks=frameworks, policy=policy))
    return watchers


async def run_watchers(bus: Bus, watchers: list[ClusterWatcher]) -> None:
    async with asyncio.TaskGroup() as tg:
        for w in watchers:
            tg.create_task(w.run(), name=f"watcher:{w.cluster}")
        tg.create_task(_mark_ready_when_synced(bus, watchers), name="watcher:ready")


def job_policy(kueue: KueueConfig) -> JobPolicy:
    """Kueue's manageJobsWithoutQueueName and managedJobsNamespaceSelector (defaulted as Kueue does)."""
    selector = kueue.managed_jobs_namespace_selector
    return JobPolicy(manage_without_queue_name=kueue.manage_jobs_without_queue_name,
                     namespace_selector=selector if selector is not None
                     else default_selector(kueue.namespace or "kueue-system"))


async def main(bus: Bus, config: Config, settings: WatcherSettings | None = None) -> None:
    settings = settings or config.watcher
    if settings.wait_for_pods_ready is None:
        wfpr = config.kueue.wait_for_pods_ready
        settings = msgspec.structs.replace(settings, wait_for_pods_ready=wfpr is not None and wfpr.enable is not False)
    async with AsyncExitStack() as stack:
        watchers = await connect_clusters(stack, bus, config.clusters, settings,
                                          job_integration=config.kueue.job_integration(),
                                          frameworks=config.kueue.frameworks(), policy=job_policy(config.kueue),
                                          rate=config.kueue.client_rate())
        await run_watchers(bus, watchers)
