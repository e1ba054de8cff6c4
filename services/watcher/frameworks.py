"""The shell of every job framework behind an Adapter (JobSet, Kubeflow and Ray kinds, plain Pods and
pod groups).

Keys are (framework token, namespace, name): ("jobset", ns, name), ("pytorchjob", ns, name), ...,
("pod", ns, pod name), ("podgroup", ns, group name). Watch events mark keys dirty; a worker builds the
adapter's view from the cache, asks the generic core for the next write, applies it
conditionally and asks again until the core says Skip. A 409 or 404 means the cache
was stale: the next watch event brings the key back. Frameworks switched off by
Kueue's `integrations.frameworks` are not reconciled: a queued object of theirs is
left alone and logged once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kq.api.constants import PREBUILT_WORKLOAD_LABEL, QUEUE_NAME_LABEL
from kq.api.core import Pod
from kq.api.kueue import Workload
from kq.api.meta import ObjectMeta
from kq.api.training import TrainingRuntimeSpec, TrainJob
from kq.clock import SYSTEM_CLOCK, Clock, rfc3339_seconds
from kq.kube import Conflict, KubeClient, KubeError, NotFound, retry_delay
from kq.obs import get_logger
from services.watcher.apply import apply_action
from services.watcher.core import generic
from services.watcher.core.adapter import Adapter
from services.watcher.core.frameworks import appwrapper, kubeflow, ray, trainjob
from services.watcher.core.frameworks.jobset import JobSetAdapter
from services.watcher.core.frameworks.pods import PodAdapter, PodGroup, group_name, is_queued_pod
from services.watcher.core.frameworks.trainjob import TrainJobView
from services.watcher.core.managed import JobPolicy, default_selector, manages_unlabelled, namespace_managed
from services.watcher.core.writes import Skip
from services.watcher.objects import ClusterObjects
from services.watcher.workqueue import KeyedWorkQueue

Key = tuple[str, str, str]
JOBSET_FRAMEWORK = JobSetAdapter.framework
POD_FRAMEWORK = PodAdapter.framework
# Kueue frameworks whose pods run through the pod integration (their webhooks label the pod template).
POD_BASED = ("deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset")
# One object, one Workload: token (the kind in lower case) -> its adapter and whether another controller
# runs it (then it is not queued here). An object managed by MultiKueue is queued on the manager like
# any other, and its copy on a worker (prebuilt-workload label) adopts the Workload the dispatcher made.
OBJECT_ADAPTERS: dict[str, tuple[Adapter[Any], Callable[[Any], bool]]] = {
    "jobset": (JobSetAdapter(), lambda _js: False),
    **{ad.token(): (ad, kubeflow.managed_elsewhere) for ad in kubeflow.KUBEFLOW_ADAPTERS},
    "rayjob": (ray.RayJobAdapter(), lambda j: ray.ray_managed_elsewhere(j.spec.managed_by)),
    "raycluster": (ray.RayClusterAdapter(), lambda c: ray.ray_managed_elsewhere(c.spec.managed_by)),
    "trainjob": (trainjob.TrainJobAdapter(), trainjob.managed_elsewhere),
    "appwrapper": (appwrapper.AppWrapperAdapter(), appwrapper.managed_elsewhere),
}
_BY_KIND = {ad.kind: token for token, (ad, _) in OBJECT_ADAPTERS.items()}
SUPPORTED = (*(ad.framework for ad, _ in OBJECT_ADAPTERS.values()), POD_FRAMEWORK, *POD_BASED)
_BASE_KINDS = ("workload", "resourceflavor", "workloadpriorityclass", "priorityclass")


class FrameworkIntegration:
    def __init__(self, client: KubeClient, objects: ClusterObjects, enabled: frozenset[str], *, workers: int,
                 retry_base_s: float = 0.2, retry_max_s: float = 5.0,
                 clock: Clock = SYSTEM_CLOCK, wait_for_pods_ready: bool = False,
                 policy: JobPolicy | None = None) -> None:
        self.client = client
        self.policy = policy or JobPolicy(namespace_selector=default_selector("kueue-system"))
        self.objects = objects
        self.enabled = enabled
        self.workers = workers
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self.clock = clock
        self.wait_for_pods_ready = wait_for_pods_ready  # keep the Workloads' PodsReady condition
        self.adapters: dict[str, Adapter[Any]] = {token: ad for token, (ad, _) in OBJECT_ADAPTERS.items()}
        self.adapters.update(pod=PodAdapter(), podgroup=PodAdapter())
        self._groups: dict[tuple[str, str], set[str]] = {}  # (ns, group) -> member pod names
        self._said: set[Key] = set()  # keys whose refusal or waiting reason was logged
        self.ready = asyncio.Event()
        self.writes = 0
        self.log = get_logger("kq.watcher.frameworks", cluster=objects.cluster)
        self.queue: KeyedWorkQueue[Key] = KeyedWorkQueue("frameworks", self._reconcile, workers=workers,
                                                          retry_base_s=retry_base_s, retry_max_s=retry_max_s,
                                                          clock=clock, log=self.log)
        self._mark = self.queue.mark
        self.idle = self.queue.idle

    def mark(self, key: Key) -> None:
        """Look at `key` again, if its framework is one integrations.frameworks turns on: every
        path that marks (the object's own event, its Workload's, a flavor or priority class that
        changed) goes through here, so an object of a framework left out is never managed."""
        if self._on(key[0]):
            self._mark(key)

    @property
    def needed_kinds(self) -> tuple[str, ...]:
        return (*_BASE_KINDS, "jobset", "pod")

    def _on(self, token: str) -> bool:
        if token in OBJECT_ADAPTERS:
            return OBJECT_ADAPTERS[token][0].framework in self.enabled
        return POD_FRAMEWORK in self.enabled or any(f in self.enabled for f in POD_BASED)

    # --- what to look at ---

    def on_change(self, kind: str, old: Any, new: Any) -> None:
        if not self.ready.is_set() and all(k in self.objects.synced for k in self.needed_kinds):
            self.ready.set()
        obj = new if new is not None else old
        if obj is None:
            return
        ns, name = obj.metadata.namespace, obj.metadata.name
        if kind in OBJECT_ADAPTERS:
            self._mark_if_on((kind, ns, name), obj)
        elif kind == "pod":
            if old is not None and (g := group_name(old)) and (members := self._groups.get((ns, g))) is not None:
                members.discard(name)
                if not members:
                    del self._groups[(ns, g)]
            if new is not None and (g := group_name(new)):
                self._groups.setdefault((ns, g), set()).add(name)
            if is_queued_pod(obj):
                g = group_name(obj)
                self._mark_if_on(("podgroup", ns, g) if g else ("pod", ns, name), obj)
        elif kind == "workload":
            key = self._workload_key(obj)
            if key is not None:
                self.mark(key)
        elif kind in ("clustertrainingruntime", "trainingruntime"):
            for job in self.objects.all("trainjob"):
                self.mark(("trainjob", job.metadata.namespace, job.metadata.name))
        elif kind in ("resourceflavor", "workloadpriorityclass", "priorityclass"):
            for token in OBJECT_ADAPTERS:
                for obj in self.objects.all(token):
                    self.mark((token, obj.metadata.namespace, obj.metadata.name))

    def _mark_if_on(self, key: Key, obj: Any) -> None:
        if self._on(key[0]):
            self.mark(key)
        elif obj.metadata.labels.get(QUEUE_NAME_LABEL) and key not in self._said:
            self._said.add(key)
            self.log.warning("queued object of a framework kq's integrations.frameworks leaves out: not managed",
                             key=key, queue=obj.metadata.labels[QUEUE_NAME_LABEL])

    def _workload_key(self, wl: Workload) -> Key | None:
        ref = wl.metadata.controller_ref()
        ns = wl.metadata.namespace
        if ref is None:  # a MultiKueue copy not adopted yet: the object labelled with its name
            if not self.objects.any_prebuilt():
                return None  # (most job-less Workloads: not a kind-by-kind look-up each)
            for token in OBJECT_ADAPTERS:
                if (obj := self.objects.using_prebuilt(token, ns, wl.metadata.name)) is not None:
                    return token, ns, obj.metadata.name
            return None
        if ref.kind in _BY_KIND:
            return (_BY_KIND[ref.kind], ns, ref.name)
        if ref.kind == "Pod" and wl.metadata.name == PodAdapter().workload_name(
            PodGroup(namespace=ns, name=ref.name, group=False, pods=(Pod(metadata=ObjectMeta(uid=ref.uid)),))
        ):
            return ("pod", ns, ref.name)
        if ref.kind in ("Pod", "StatefulSet"):
            return ("podgroup", ns, wl.metadata.name)
        return None

    # --- workers ---

    async def run(self) -> None:
        await self.ready.wait()
        self.log.info("framework integrations started", enabled=sorted(self.enabled))
        await self.queue.run()

    def _view(self, key: Key) -> tuple[Any | None, Workload | None]:
        """The adapter's view of the key from the cache, and its Workload."""
        token, ns, name = key
        ad = self.adapters[token]
        if token in OBJECT_ADAPTERS:
            js: Any | None = self.objects.get(token, ns, name)
            if js is None:
                return None, self._orphan(ad.kind, ns, name)
            # A MultiKueue copy on a worker: its Workload is the prebuilt one the dispatcher made.
            prebuilt = js.metadata.labels.get(PREBUILT_WORKLOAD_LABEL)
            if not prebuilt and OBJECT_ADAPTERS[token][1](js):
                return None, None
            uid = js.metadata.uid
            if token == "trainjob":  # the adapter sees the TrainJob with its runtime
                js = TrainJobView(job=js, runtime=self._runtime(js))
            if prebuilt:
                return js, self.objects.get("workload", ns, prebuilt)
            owned = [w for w in self.objects.workloads_of(uid) if ad.owns(w, js)]
            live = [w for w in owned if w.metadata.deletion_timestamp is None]
            found = live or owned
            return js, found[0] if found else None
        if token == "pod":
            pod: Pod | None = self.objects.get("pod", ns, name)
            if pod is None:
                return None, self._orphan("Pod", ns, name)
            if not is_queued_pod(pod) or group_name(pod):
                return None, None
            view = PodGroup(namespace=ns, name=name, group=False, pods=(pod,))
            wl = self.objects.get("workload", ns, ad.workload_name(view))
            return view, wl
        members = sorted(self._groups.get((ns, name), ()))
        pods = tuple(p for m in members if (p := self.objects.get("pod", ns, m)) is not None and is_queued_pod(p))
        wl = self.objects.get("workload", ns, name)
        return (PodGroup(namespace=ns, name=name, group=True, pods=pods) if pods else None), wl

    def _runtime(self, job: TrainJob) -> TrainingRuntimeSpec | None:
        ref = job.spec.runtime_ref
        if ref.kind == "TrainingRuntime":
            found = self.objects.get("trainingruntime", job.metadata.namespace, ref.name)
        else:
            found = self.objects.get("clustertrainingruntime", "", ref.name)
        return found.spec if found is not None else None

    def _orphan(self, kind: str, ns: str, name: str) -> Workload | None:
        """The Workload a vanished object controlled (to release its quota and let it go); a scan,
        but only for objects that are gone."""
        for wl in self.objects.all("workload"):
            ref = wl.metadata.controller_ref()
            if wl.metadata.namespace == ns and ref is not None and ref.kind == kind and ref.name == name:
                return wl
        return None

    async def _reconcile(self, key: Key) -> float | None:
        """One step: the write's own watch event brings the key back for the next one, so every
        decision is made on a cache that already shows our previous write."""
        job, wl = self._view(key)
        now = rfc3339_seconds(self.clock.now())
        if job is None:
            if wl is None:
                return None
            step = generic.reconcile_orphan(wl, now)
        elif not namespace_managed(self.policy, key[1], self.objects.namespace_labels(key[1])):
            return None  # not Kueue's (managedJobsNamespaceSelector)
        else:
            ad = self.adapters[key[0]]
            unlabelled = all(manages_unlabelled(self.policy, p.metadata) for p in job.pods) if isinstance(
                job, PodGroup) else manages_unlabelled(self.policy, ad.meta(job))
            first = generic.prebuilt(ad, job, wl, now) if key[0] in OBJECT_ADAPTERS and _prebuilt_name(
                ad.meta(job)) else None
            step = first if first is not None else generic.reconcile(
                ad, job, wl, self.objects.flavors(), self.objects.priority_classes(),
                self.objects.pod_priority_classes(), now, wait_for_pods_ready=self.wait_for_pods_ready,
                manage_unlabelled=unlabelled)
        if isinstance(step, Skip):
            self._say(key, step.reason)
            return None
        try:
            stored = await apply_action(self.client, step)
            self.writes += 1
            self.log.info("applied", key=key, kind=step.kind, name=step.name, why=step.why)
            # Write-through: the next decision on this key may come from another object's event
            # before this write's own echo (an eviction right after the Job was started), and must
            # not see the object as it was before our write. A chaos run found the quota of an
            # evicted workload released on a cached, still-suspended Job while its pods ran.
            if stored is not None and self.objects.caches(step.kind):
                self.objects.put(step.kind, stored)
        except (Conflict, NotFound) as e:  # decided on a stale cache: the watch is bringing news
            self.log.debug("stale; deciding again", key=key, error=str(e))
            return self.retry_base_s
        except KubeError as e:
            wait = retry_delay(e, self.retry_base_s)
            self.log.warning("write failed; will retry", key=key, error=str(e), delay_s=wait)
            return wait
        return None

    def _say(self, key: Key, reason: str) -> None:
        """Reasons a user must see (a malformed or incomplete pod group): logged once per reason."""
        if reason.split(":", 1)[0] in ("PodGroupTotalCountMismatch", "InvalidPodGroupTotalCount", "PodGroupTooBig",
                                       "CannotCreateWorkload", "WaitingForPodGroup"):
            said = (key[0], key[1], f"{key[2]}|{reason}")
            if said not in self._said:
                self._said.add(said)
                self.log.warning("cannot queue yet", key=key, reason=reason)


def _prebuilt_name(meta: ObjectMeta) -> str:
    return meta.labels.get(PREBUILT_WORKLOAD_LABEL, "")
