"""The Job integration's shell: a work queue of Jobs (and job-less Workloads) to reconcile.

Watch events mark keys dirty; workers take a key, ask the core (core.jobs) for
the next step, apply it conditionally, and ask again with the server's answer,
until the core says Skip. A 409 means "read it again and decide again". A key
marked dirty while being worked on is worked on again afterwards, so no event
is lost and no key is processed by two workers at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.trace import NoOpTracer, Tracer

from kq.api.constants import PREBUILT_WORKLOAD_LABEL
from kq.api.core import Job
from kq.api.kueue import Workload
from kq.clock import SYSTEM_CLOCK, Clock, rfc3339_seconds
from kq.kube import AlreadyExists, Conflict, KubeClient, KubeError, NotFound, retry_delay
from kq.obs import context_from_annotations, current_span, get_logger
from services.watcher.apply import apply_action, read, with_trace
from services.watcher.core import jobs as core
from services.watcher.core.job_pods import owned_by
from services.watcher.core.managed import JobPolicy, default_selector, manages_unlabelled, namespace_managed
from services.watcher.core.writes import Delete, Skip
from services.watcher.objects import ClusterObjects
from services.watcher.workqueue import KeyedWorkQueue

WorkKey = tuple[str, str, str]  # ("job" | "workload", namespace, name)
NEEDED_KINDS = ("job", "workload", "resourceflavor", "workloadpriorityclass", "priorityclass")


class JobIntegration:
    def __init__(self, client: KubeClient, objects: ClusterObjects, *, workers: int, max_steps: int,
                 retry_base_s: float = 0.2, retry_max_s: float = 5.0, clock: Clock = SYSTEM_CLOCK,
                 wait_for_pods_ready: bool = False, tracer: Tracer | None = None,
                 policy: JobPolicy | None = None) -> None:
        self.client = client
        self.policy = policy or JobPolicy(namespace_selector=default_selector("kueue-system"))
        self.tracer = tracer or NoOpTracer()
        self.clock = clock
        self.wait_for_pods_ready = wait_for_pods_ready  # keep the Workloads' PodsReady condition
        self.objects = objects
        self.workers = workers
        self.max_steps = max_steps
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self.ready = asyncio.Event()
        self.writes = 0
        self.log = get_logger("kq.watcher.jobs", cluster=objects.cluster)
        self.queue: KeyedWorkQueue[WorkKey] = KeyedWorkQueue("jobs", self._reconcile, workers=workers,
                                                              retry_base_s=retry_base_s, retry_max_s=retry_max_s,
                                                              clock=clock, log=self.log)
        self.mark = self.queue.mark
        self.idle = self.queue.idle

    # --- what to look at ---

    def on_change(self, kind: str, old: Any, new: Any) -> None:
        """A cached object changed (old/new None when created/deleted; both None: a list completed)."""
        if not self.ready.is_set() and all(k in self.objects.synced for k in NEEDED_KINDS):
            self.ready.set()
        obj = new if new is not None else old
        if obj is None:
            return
        meta = obj.metadata
        # A Job without its Workload yet waits its turn; one with a Workload, or the Workload itself
        # (admitted, evicted, finished), goes first: under a burst it would wait behind every new Job.
        # (Not "any update": the Job controller's own Suspended condition updates every new Job.)
        if kind == "job":
            self.queue.mark(("job", meta.namespace, meta.name), urgent=self._workload_for(obj) is not None)
        elif kind == "workload":
            key = self._workload_key(obj)
            if key[0] == "workload" and self._nothing_to_do(self.objects.get("workload", key[1], key[2])):
                return
            self.queue.mark(key, urgent=True)
        elif kind in ("resourceflavor", "workloadpriorityclass", "priorityclass"):
            for job in self.objects.all("job"):  # a flavor or class may unblock any waiting job
                self.mark(("job", job.metadata.namespace, job.metadata.name))

    def _nothing_to_do(self, wl: Workload | None) -> bool:
        """A job-less Workload whose reconcile would find nothing to do (most of them: the benchmarks'
        Workloads have no Job, and each of their changes cost a work-queue round, ~5 % of the
        watcher's CPU): decided here on the cached object the worker would read (the cache already
        holds this change), so it is not queued. A later change of it comes here again."""
        if wl is None:
            return True  # deleted: the worker would find no Workload
        ref = wl.metadata.controller_ref()
        if ref is not None and ref.kind != "Job":
            return True  # another integration's (as _steps)
        return isinstance(core.reconcile_unowned_workload(wl, rfc3339_seconds(self.clock.now())), Skip)

    def _workload_key(self, wl: Workload) -> WorkKey:
        ns = wl.metadata.namespace
        ref = wl.metadata.controller_ref()
        if ref is not None and ref.kind == "Job" and self.objects.job(ns, ref.name) is not None:
            return ("job", ns, ref.name)
        if ref is None and (job := self.objects.job_using_prebuilt(ns, wl.metadata.name)) is not None:
            return ("job", ns, job.metadata.name)
        return ("workload", ns, wl.metadata.name)

    # --- workers ---

    async def run(self) -> None:
        await self.ready.wait()
        self.log.info("job integration started", jobs=len(self.objects.all("job")))
        await self.queue.run()

    async def _reconcile(self, key: WorkKey) -> float | None:
        """Steps until the core is satisfied; returns a delay when the key must be looked at again.
        Traced: a Job's first reconcile starts its workload's trace (kq.obs), later ones join it."""
        kind, ns, name = key
        job: Job | None = self.objects.job(ns, name) if kind == "job" else None
        wl: Workload | None = self._workload_for(job) if kind == "job" else self.objects.get("workload", ns, name)
        parent = context_from_annotations(wl.metadata.annotations if wl is not None else None)
        with current_span(self.tracer, f"watcher.reconcile {kind}", context=parent,
                          attributes={"k8s.namespace.name": ns, "kq.object": name}):
            return await self._steps(kind, key, job, wl)

    async def _steps(self, kind: str, key: WorkKey, job: Job | None, wl: Workload | None) -> float | None:
        if kind == "job" and job is None:
            return None
        if job is not None and not namespace_managed(self.policy, job.metadata.namespace,
                                                     self.objects.namespace_labels(job.metadata.namespace)):
            return None  # not Kueue's (managedJobsNamespaceSelector)
        if kind == "workload":
            if wl is None:
                return None
            if (ref := wl.metadata.controller_ref()) is not None and ref.kind != "Job":
                return None  # another integration's workload (JobSet, ...): not ours to drive
        for _ in range(self.max_steps):
            now = rfc3339_seconds(self.clock.now())
            if job is not None:
                step = core.reconcile_job(job, wl, self.objects.flavors(), self.objects.priority_classes(), now,
                                          self.objects.pod_priority_classes(),
                                          wait_for_pods_ready=self.wait_for_pods_ready,
                                          manage_unlabelled=manages_unlabelled(self.policy, job.metadata))
            else:
                assert wl is not None
                step = core.reconcile_unowned_workload(wl, now)
            if isinstance(step, Skip):
                return None
            try:
                result = await apply_action(self.client, with_trace(step))
                self.writes += 1
                self.log.info("applied", key=key, kind=step.kind, name=step.name, why=step.why)
            except (Conflict, NotFound) as e:
                # Decided on a stale view (or the object is gone): read it again and decide again.
                self.log.debug("stale; reading again", key=key, kind=step.kind, error=str(e))
                fresh = await read(self.client, step.kind, step.namespace, step.name)
                if step.kind == "job":
                    if fresh is None:
                        return None
                    job = fresh
                elif (
                    isinstance(e, AlreadyExists) and fresh is not None and job is not None and not owned_by(fresh, job)
                ):
                    self.log.warning("a workload with this job's name belongs to something else", key=key)
                    return self.retry_max_s
                else:
                    wl = fresh
                continue
            except KubeError as e:
                wait = retry_delay(e, self.retry_base_s)
                self.log.warning("write failed; will retry", key=key, error=str(e), delay_s=wait)
                return wait
            if isinstance(step, Delete):
                return None  # the Workload goes through its finalizer; its events bring us back
            # Write-through: the next reconcile of this key may be started by another object's
            # event before this write's echo (the Workload evicted right after its Job was
            # started) and must not decide on the object as it was before our write. A chaos run
            # found an evicted workload's quota released on a cached, still-suspended Job while its
            # pods ran (the cache ignores the echo's older copies: objects.put).
            if result is not None and self.objects.caches(step.kind):
                self.objects.put(step.kind, result)
            if step.kind == "job":
                job = result
            else:
                wl = result
        self.log.warning("job did not settle; looking again later", key=key, steps=self.max_steps)
        return self.retry_base_s

    def _workload_for(self, job: Job | None) -> Workload | None:
        if job is None:
            return None
        if prebuilt := job.metadata.labels.get(PREBUILT_WORKLOAD_LABEL):
            return self.objects.get("workload", job.metadata.namespace, prebuilt)
        owned = [w for w in self.objects.workloads_of(job.metadata.uid) if owned_by(w, job)]
        if not owned:
            return None
        # Prefer a live one; among several, the first by name is as good as Kueue's choice.
        live = [w for w in owned if w.metadata.deletion_timestamp is None]
        return (live or owned)[0]
