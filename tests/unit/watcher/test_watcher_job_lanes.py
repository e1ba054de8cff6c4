"""Which lane of the Job work queue a change goes to (services/watcher/integration.py): a Job that has
no Workload yet (a burst of new Jobs) waits its turn; a Job with its Workload, or the Workload
itself, goes first. Every new Job gets an update of its own (the Job controller's Suspended
condition): taking any update as urgent put the whole burst in the urgent lane, and an admitted
Job started only once every new Job had its Workload."""

from __future__ import annotations

import asyncio

from msgspec.structs import replace
from unit.watcher.watcher_builders import admitted, evicted, finished, job, plain_workload, reserved, workload_for

from kq.api.meta import Condition
from kq.config import WatcherConfig
from kq.kube import KubeClient
from services.watcher.integration import JobIntegration, WorkKey
from services.watcher.objects import ClusterObjects


def test_new_jobs_wait_their_turn_and_jobs_with_a_workload_go_first() -> None:
    objects = ClusterObjects("c1")
    integration = JobIntegration(KubeClient.__new__(KubeClient), objects, workers=1, max_steps=4)  # no call is made
    lanes = integration.queue.lanes
    new = job("new", uid="u-new")
    objects.put("job", new)
    integration.on_change("job", None, new)
    suspended = replace(new, status=replace(new.status, conditions=(Condition(type="Suspended", status="True"),)),
                        metadata=replace(new.metadata, resource_version="11"))
    objects.put("job", suspended)
    integration.on_change("job", new, suspended)  # the Job controller's update: still no Workload
    assert lanes() == (0, 1)

    started = job("started", uid="u-started")
    objects.put("job", started)
    wl = admitted(workload_for(started))
    objects.put("workload", wl)
    integration.on_change("workload", None, wl)  # admitted: its Job is started first
    assert lanes() == (1, 1)
    other = job("other", uid="u-other")
    objects.put("job", other)
    objects.put("workload", replace(workload_for(other), metadata=replace(workload_for(other).metadata,
                                                                         name="wl-other")))
    integration.on_change("job", other, replace(other, metadata=replace(other.metadata, resource_version="12")))
    assert lanes() == (2, 1)


def test_a_job_less_workload_is_queued_only_when_its_reconcile_has_work() -> None:
    """The benchmarks' Workloads have no Job: each of their changes went through a work-queue round
    to find nothing to do. Now only one with work (an eviction to finish) is queued."""
    objects = ClusterObjects("c1")
    integration = JobIntegration(KubeClient.__new__(KubeClient), objects, workers=1, max_steps=4)  # no call is made
    lanes = integration.queue.lanes
    idle = plain_workload("idle", uid="u-idle")
    objects.put("workload", idle)
    integration.on_change("workload", None, idle)
    done = finished(admitted(plain_workload("done", uid="u-done")))
    objects.put("workload", done)
    integration.on_change("workload", None, done)
    assert lanes() == (0, 0)

    ev = evicted(reserved(plain_workload("ev", uid="u-ev")))
    objects.put("workload", ev)
    integration.on_change("workload", None, ev)  # evicted with its quota held: the eviction is finished
    assert lanes() == (1, 0)
    objects.remove("workload", "ns", "idle")
    integration.on_change("workload", idle, None)
    assert lanes() == (1, 0)


async def test_by_default_as_many_jobs_are_reconciled_at_once_as_commands_are_applied() -> None:
    """A worker is a coroutine awaiting its write, not a thread. At 8 (Kueue's threads), the busiest
    MultiKueue worker cluster (the Incremental dispatcher gives the first clusters most jobs) had all 8
    awaiting writes under load while new copies' Jobs waited up to 5 s to be adopted."""
    settings = WatcherConfig()
    integration = JobIntegration(KubeClient.__new__(KubeClient), ClusterObjects("c1"),
                                 workers=settings.job_workers, max_steps=settings.max_job_steps)
    want = settings.command_concurrency
    running: set[WorkKey] = set()
    all_in = asyncio.Event()
    release = asyncio.Event()

    async def awaiting_its_write(key: WorkKey) -> float | None:
        running.add(key)
        if len(running) == want:
            all_in.set()
        await release.wait()
        return None

    integration.queue.reconcile = awaiting_its_write
    for i in range(want):
        integration.mark(("job", "ns", f"j{i}"), urgent=True)
    worker = asyncio.create_task(integration.queue.run())
    try:
        async with asyncio.timeout(5):
            await all_in.wait()
    finally:
        release.set()
        worker.cancel()
    assert len(running) == want
