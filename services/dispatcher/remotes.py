"""The dispatcher's connections to worker clusters: one RemoteCluster per MultiKueueCluster.

Each loads its kubeconfig (from a Secret in kq's namespace, read straight from the manager's API
server, or from a file path), builds its own Kubernetes client and keeps the worker's copies
(Workloads and the objects of every kind MultiKueue runs, core/kinds.py, carrying our origin label)
listed and watched. It is `available` only while
connected and fully listed: only then is what it holds the truth about that worker. Failures
reconnect with doubling backoff. Kubeconfig content is never logged or published: errors carry
only the reason (kq.kube and core.clusters strip it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from kq.api.constants import MULTIKUEUE_ORIGIN_LABEL, PREBUILT_WORKLOAD_LABEL
from kq.api.kueue import KubeConfig, Workload
from kq.api.registry import decode_object
from kq.kube import Gone, KubeClient, KubeError, NotFound
from kq.kubeconfigs import KubeconfigError
from kq.obs import get_logger
from kq.remote_clusters import KubeconfigSource
from services.dispatcher.core.clusters import BAD_KUBECONFIG, CONNECTED, CONNECTING, CONNECTION_FAILED, ClusterState
from services.dispatcher.core.kinds import ADAPTERS_BY_TOKEN, JOB_TOKENS, RemoteJob

NsName = tuple[str, str]
OnChange = Callable[[str, set[NsName]], None]  # cluster, manager workload keys touched
OnState = Callable[[str], None]


class _ListedMeta(msgspec.Struct, frozen=True, rename="camel"):
    namespace: str = ""
    name: str = ""
    resource_version: str = ""


class _Listed(msgspec.Struct, frozen=True):
    metadata: _ListedMeta = _ListedMeta()


_listed = msgspec.json.Decoder(_Listed)  # a resync compares versions without decoding every object
_CATCH_UP_POLL_S = 0.25  # a resync waits for the watch to reach its list's version, looking this often


def decision_inputs_differ(kind: str, held: Any, obj: Any) -> bool:
    """Whether a new version of a copy (Workload) or of its Job differs in what the dispatcher's
    decisions read (core/flow.py): status, annotations, deletion, and a Job's labels (the
    prebuilt-workload label ties it to its copy). An adoption (owner reference and the job-uid
    label on the copy: one reconcile a job for nothing), a finalizer or the Job's spec
    (unsuspended by the worker) are not read."""
    a, b = held.metadata, obj.metadata
    return (held.status != obj.status or a.deletion_timestamp != b.deletion_timestamp
            or a.annotations != b.annotations or (kind != "workload" and a.labels != b.labels))


def progress_only(kind: str, held: Any, obj: Any) -> bool:
    """Whether a new version of a worker's Job (or other kind MultiKueue runs) only moved its status
    along (pods started, ready, done) without finishing it: all that reads it is the copy of the
    status onto the manager's object, which can wait a moment (Term, progress_batch_s); a finish,
    a deletion or a change of labels or annotations cannot."""
    if kind == "workload" or held.status == obj.status:
        return False
    a, b = held.metadata, obj.metadata
    return (a.deletion_timestamp == b.deletion_timestamp and a.annotations == b.annotations
            and a.labels == b.labels and ADAPTERS_BY_TOKEN[kind].finish(obj) is None)


def _rv(text: str) -> int | None:
    """A resourceVersion as the number it is on API servers (etcd's revision) and kubesim, where
    one cluster's versions are ordered across its objects; None when it is not one."""
    return int(text) if text.isdigit() else None


class RemoteCluster:
    def __init__(self, name: str, source: KubeConfig | None, loader: KubeconfigSource, origin: str,
                 on_change: OnChange, on_state: OnState, *, retry_base_s: float, retry_max_s: float,
                 watch_timeout_s: float, kinds: tuple[str, ...] = JOB_TOKENS, call_timeout_s: float = 30.0,
                 resync_s: float = 0.0, on_progress: OnChange | None = None) -> None:
        self.name = name
        self.source = source
        self.loader = loader
        self.origin = origin
        self.on_change = on_change
        self.on_progress = on_progress or on_change  # a change progress_only() says can wait
        self.on_state = on_state
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self.watch_timeout_s = watch_timeout_s
        self.call_timeout_s = call_timeout_s  # bounds a connect and a list (the client bounds each request)
        self.resync_s = resync_s  # how often the view is checked against a list (0: never)
        self.state: ClusterState = CONNECTING
        self.available = False
        self.lost_since: float | None = None  # wall time it was last known connected
        self.client: KubeClient | None = None
        self.workloads: dict[NsName, Workload] = {}
        self.job_kinds = kinds  # what runs a copy: MultiKueue's adapters the manager enables
        self.jobs: dict[str, dict[NsName, RemoteJob]] = {kind: {} for kind in kinds}
        self._job_index: dict[NsName, set[tuple[str, str, str]]] = {}  # workload -> (kind, ns, name); may be stale
        self._seen: dict[str, int] = {}  # kind -> the newest resourceVersion its list or watch delivered
        self.kinds: tuple[str, ...] = kinds  # job kinds the worker serves (no JobSet CRD: no "jobset")
        self._own: dict[tuple[str, str, str], int] = {}  # (kind, ns, name) -> our creates/deletes of it in flight
        self.log = get_logger("kq.dispatcher.remote", cluster=name)

    @property
    def selector(self) -> str:
        return f"{MULTIKUEUE_ORIGIN_LABEL}={self.origin}"

    def job_for(self, namespace: str, workload: str) -> tuple[str, RemoteJob] | None:
        """The (kind, object) running this workload's copy (by its prebuilt-workload label)."""
        for kind, ns, name in sorted(self._job_index.get((namespace, workload), ())):
            job = self.jobs[kind].get((ns, name))
            if job is not None and job.metadata.labels.get(PREBUILT_WORKLOAD_LABEL) == workload:
                return kind, job
        return None

    def _index_job(self, kind: str, job: RemoteJob) -> None:
        self._job_index.setdefault(self._wl_key(job), set()).add((kind, job.metadata.namespace, job.metadata.name))

    def _all_jobs(self) -> list[RemoteJob]:
        return [j for table in self.jobs.values() for j in table.values()]

    def _set_state(self, state: ClusterState, available: bool) -> None:
        if self.available and not available:
            self.lost_since = time.time()
        changed = state != self.state or available != self.available
        self.state, self.available = state, available
        if changed:
            self.log.info("connection", active=state.active, reason=state.reason, message=state.message)
            self.on_state(self.name)
            self.on_change(self.name, set(self.workloads) | {self._wl_key(j) for j in self._all_jobs()})

    @staticmethod
    def _wl_key(job: RemoteJob) -> NsName:
        return job.metadata.namespace, job.metadata.labels.get(PREBUILT_WORKLOAD_LABEL, job.metadata.name)

    async def run(self) -> None:
        delay = self.retry_base_s
        while True:
            try:
                async with asyncio.timeout(self.call_timeout_s):  # a kubeconfig's exec plugin may hang
                    self.client = await self.loader.connect(self.source, self.origin)
            except (KubeconfigError, ValueError) as e:
                self._set_state(ClusterState(active=False, reason=BAD_KUBECONFIG,
                                             message=f"load client config failed: {e}"), False)
                await asyncio.sleep(self.retry_max_s)
                continue
            except TimeoutError:
                self._set_state(ClusterState(active=False, reason=CONNECTION_FAILED,
                                             message="load client config timed out"), False)
                await asyncio.sleep(self.retry_max_s)
                continue
            try:
                await self._connected()
            except (KubeError, msgspec.ValidationError, msgspec.DecodeError) as e:
                msg = f"{type(e).__name__}: HTTP {e.status}" if isinstance(e, KubeError) else "undecodable object"
                self._set_state(ClusterState(active=False, reason=CONNECTION_FAILED, message=msg), False)
            except Exception as e:  # noqa: BLE001 - ending here would leave the view frozen and `available` for good
                self.log.warning("connection failed unexpectedly; reconnecting", error=type(e).__name__)
                self._set_state(ClusterState(active=False, reason=CONNECTION_FAILED, message=type(e).__name__), False)
            finally:
                client, self.client = self.client, None
                if client is not None:
                    await client.close()
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.retry_max_s)
            if self.available:
                delay = self.retry_base_s

    async def _connected(self) -> None:
        assert self.client is not None
        rvs = {"workload": await self._relist("workload")}

        async def served(kind: str) -> str | None:
            try:
                return await self._relist(kind)
            except NotFound:  # the worker has no such API (no JobSet CRD): nothing of that kind runs there
                self.jobs[kind] = {}
                return None

        # One list per kind, at once: with every kind MultiKueue runs, one after another made a
        # (re)connection as slow as a dozen round trips.
        results = await asyncio.gather(*(served(kind) for kind in self.job_kinds), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        found = [r for r in results if not isinstance(r, BaseException)]
        rvs.update({kind: rv for kind, rv in zip(self.job_kinds, found, strict=True) if rv is not None})
        self.kinds = tuple(kind for kind, rv in zip(self.job_kinds, found, strict=True) if rv is not None)
        self._set_state(CONNECTED, True)
        tasks = [asyncio.create_task(self._watch(kind, rv)) for kind, rv in rvs.items()]
        if self.resync_s > 0:
            tasks.append(asyncio.create_task(self._resync()))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for t in done:
            if (e := t.exception()) is not None:
                raise e

    async def _relist(self, kind: str) -> str:
        assert self.client is not None
        async with asyncio.timeout(self.call_timeout_s):
            raws, rv = await self.client.list(kind, label_selector=self.selector)
        self._seen.pop(kind, None)  # assigned, not raised: a worker's API server may have started over
        self._saw(kind, rv)
        table: dict[NsName, Any] = {}
        for raw in raws:
            obj = decode_object(kind, raw)
            table[(obj.metadata.namespace, obj.metadata.name)] = obj
        old = self.workloads if kind == "workload" else self.jobs[kind]
        touched = self._keys(kind, list(old.values()) + list(table.values()))
        if kind == "workload":
            self.workloads = table
        else:
            self.jobs[kind] = table
            self._job_index = {}
            for jkind, t in self.jobs.items():
                for job in t.values():
                    self._index_job(jkind, job)
        if self.available:
            self.on_change(self.name, touched)
        return rv

    def _keys(self, kind: str, objs: list[Any]) -> set[NsName]:
        if kind == "workload":
            return {(o.metadata.namespace, o.metadata.name) for o in objs}
        return {self._wl_key(o) for o in objs}

    async def _watch(self, kind: str, rv: str) -> None:
        assert self.client is not None
        while True:
            try:
                async for ev in self.client.watch(kind, rv, label_selector=self.selector,
                                                  timeout_s=self.watch_timeout_s):
                    # The event's name and version first: an object is decoded only when the view
                    # takes it (a deletion, or the echo of a version it holds already, is not).
                    head = _listed.decode(ev.raw).metadata
                    rv = head.resource_version or rv
                    self._saw(kind, rv)
                    if ev.type == "BOOKMARK":
                        continue
                    table: dict[NsName, Any] = self.workloads if kind == "workload" else self.jobs[kind]
                    key = (head.namespace, head.name)
                    # Only a change of the view that a decision reads is worth a reconcile: not the
                    # echoes of our own creates and deletes (remembered, forgotten, or still in
                    # flight: the echo can come before the answer), nor a change of what no
                    # decision reads (an adoption, a finalizer, the Job's spec).
                    own = (kind, *key) in self._own
                    held = table.get(key)
                    if ev.type == "DELETED":
                        obj = table.pop(key, None)
                        changed = obj is not None and not own
                    elif held is not None and held.metadata.resource_version == head.resource_version:
                        continue  # the version our own write's answer gave (remembered): nothing new
                    else:
                        obj = decode_object(kind, ev.raw)
                        changed = not own if held is None else decision_inputs_differ(kind, held, obj)
                        table[key] = obj
                        if kind != "workload":
                            self._index_job(kind, obj)
                        if changed and held is not None and progress_only(kind, held, obj):
                            self.on_progress(self.name, self._keys(kind, [obj]))
                            continue
                    if changed:
                        self.on_change(self.name, self._keys(kind, [obj]))
            except Gone:
                rv = await self._relist(kind)

    async def _resync(self) -> None:
        """Kubernetes' resync, as a check: every resync_s each kind is listed again and compared
        with what the watch gave. Only where the watch has gone past the list's version can they
        disagree, so a difference is an event lost or overwritten: it is logged, corrected, and its
        workloads are reconciled. A failed list waits for the next round (the watch is the feed)."""
        while True:
            await asyncio.sleep(self.resync_s)
            for kind in ("workload", *self.kinds):
                try:
                    names, touched = await self._check(kind)
                except (KubeError, TimeoutError, msgspec.ValidationError, msgspec.DecodeError) as e:
                    self.log.info("resync skipped", kind=kind, error=type(e).__name__)
                    continue
                if names:
                    self.log.warning("view of the worker differed from its API server; corrected", kind=kind,
                                     objects=len(names), first=names[:3])
                    self.on_change(self.name, touched)

    async def _check(self, kind: str) -> tuple[list[str], set[NsName]]:
        """(ns/name of the objects the view had wrong, their workload keys), the view corrected."""
        assert self.client is not None
        async with asyncio.timeout(self.call_timeout_s):
            raws, rv = await self.client.list(kind, label_selector=self.selector)
        list_rv = _rv(rv)
        if list_rv is None:
            return [], set()
        # Compared once the watch has reached the list's point (a bookmark at the latest); then a
        # held version older than the listed one, or an object held that the list no longer has
        # at a version before it, is wrong, whatever the watch delivered since.
        async with asyncio.timeout(self.call_timeout_s):
            while self._seen.get(kind, -1) < list_rv:
                await asyncio.sleep(_CATCH_UP_POLL_S)
        table: dict[NsName, Any] = self.workloads if kind == "workload" else self.jobs[kind]
        listed: set[NsName] = set()
        wrong: dict[NsName, Any] = {}  # key -> the listed object, or None: gone
        for raw in raws:
            meta = _listed.decode(raw).metadata
            key = (meta.namespace, meta.name)
            listed.add(key)
            held = table.get(key)
            held_rv = _rv(held.metadata.resource_version) if held is not None else None
            if held_rv is not None and (got := _rv(meta.resource_version)) is not None and held_rv < got:
                wrong[key] = decode_object(kind, raw)  # older than a version the watch went past
        for key, held in table.items():
            held_rv = _rv(held.metadata.resource_version)
            if key not in listed and held_rv is not None and held_rv <= list_rv:
                wrong[key] = None  # deleted before the list, yet still held
        touched: set[NsName] = set()
        for key, obj in wrong.items():
            touched |= self._keys(kind, [o for o in (table.get(key), obj) if o is not None])
            if obj is None:
                table.pop(key, None)
            else:
                table[key] = obj
                if kind != "workload":
                    self._index_job(kind, obj)
        return sorted(f"{ns}/{name}" for ns, name in wrong), touched

    async def delete_copy(self, namespace: str, name: str) -> None:
        """Delete a workload's copy and the object running it (that first, so it never runs without
        its copy), each left out of the view at once. A copy its object adopted (its controller
        owner) is left to the garbage collector, as Kubernetes removes the dependents of a
        Background deletion: deleting it too found it already gone (404) for ~0.85 of the jobs of a
        MultiKueue bench pass. Should a collector not remove it, the next resync shows it again and
        the copy is then deleted on its own."""
        assert self.client is not None
        found = self.job_for(namespace, name)
        if found is not None:
            job_kind, job = found
            with self.own_write(job_kind, namespace, job.metadata.name):
                with contextlib.suppress(NotFound):
                    await self.client.delete(job_kind, namespace, job.metadata.name, propagation="Background")
                self.forget(job_kind, namespace, job.metadata.name)
            copy = self.workloads.get((namespace, name))
            owner = copy.metadata.controller_ref() if copy is not None else None
            if owner is not None and owner.uid == job.metadata.uid:
                self.forget("workload", namespace, name)
                return
        with self.own_write("workload", namespace, name):
            with contextlib.suppress(NotFound):
                await self.client.delete("workload", namespace, name, propagation="Background")
            self.forget("workload", namespace, name)

    @contextlib.contextmanager
    def own_write(self, kind: str, namespace: str, name: str) -> Iterator[None]:
        """Around our own create or delete of an object: its watch echo, should it come before the
        answer is remembered (or the object forgotten), is not taken for someone else's change."""
        key = (kind, namespace, name)
        self._own[key] = self._own.get(key, 0) + 1
        try:
            yield
        finally:
            if self._own[key] <= 1:
                del self._own[key]
            else:
                self._own[key] -= 1

    def remember(self, kind: str, raw: bytes) -> bool:
        """What our own create or patch returned, so a decision before the watch's echo sees it.

        The answer can be read after the watch delivered later versions (the worker admitted the
        copy within the few milliseconds the dispatcher took to read its answer): written over
        them, the copy looked pending for good, as nothing else happens to an admitted copy until
        it wins. So it never replaces a newer version, and an object the watch went past without
        holding was deleted. Returns whether it was taken."""
        obj = decode_object(kind, raw)
        table: dict[NsName, Any] = self.workloads if kind == "workload" else self.jobs[kind]
        key = (obj.metadata.namespace, obj.metadata.name)
        if not self._newer(kind, table.get(key), obj.metadata.resource_version):
            return False
        table[key] = obj
        if kind != "workload":
            self._index_job(kind, obj)
        return True

    def forget(self, kind: str, namespace: str, name: str) -> None:
        """Our own delete went through (or found nothing): the object is gone from the view now, not
        when the watch says so, so a decision in between does not delete it again (a 404 each time).
        A copy kept by a finalizer comes back with the watch, marked deleted."""
        table: dict[NsName, Any] = self.workloads if kind == "workload" else self.jobs[kind]
        table.pop((namespace, name), None)

    def _newer(self, kind: str, held: Any, resource_version: str) -> bool:
        """Whether an object at this resourceVersion is newer than what the list and watch gave."""
        rv = _rv(resource_version)
        if held is not None:  # the watch's (or an earlier answer's) version stands unless this one is later
            held_rv = _rv(held.metadata.resource_version)
            return rv is not None and held_rv is not None and rv > held_rv
        seen = self._seen.get(kind)
        return rv is None or seen is None or rv > seen

    def _saw(self, kind: str, resource_version: str) -> None:
        rv = _rv(resource_version)
        if rv is not None and rv > self._seen.get(kind, -1):
            self._seen[kind] = rv

