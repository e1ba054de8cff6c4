"""The typed objects the watcher itself acts on, as its own list/watch last delivered them.

Only the kinds the Job integration, the TAS ungater and the command executor read are kept
(Jobs, Workloads, ResourceFlavors, WorkloadPriorityClasses, PriorityClasses, ClusterQueues,
LocalQueues, Pods, Nodes). The cache is a hint for deciding, never the last word: every
write is conditional on the resourceVersion the decision was made on.
"""

from __future__ import annotations

from typing import Any

from kq.api.constants import MULTIKUEUE_JOB_KINDS, PREBUILT_WORKLOAD_LABEL
from kq.api.core import Job, PriorityClass
from kq.api.kueue import ResourceFlavor, Workload, WorkloadPriorityClass
from kq.obs import get_logger

CACHED_KINDS = (
    "job", "workload", "resourceflavor", "workloadpriorityclass", "priorityclass", "clusterqueue", "localqueue",
    "jobset", "pod", "node",  # the framework integrations (frameworks.py), the TAS ungater
    "namespace",  # managedJobsNamespaceSelector
    "pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob", "mpijob", "rayjob", "raycluster",
    "trainjob", "trainingruntime", "clustertrainingruntime", "appwrapper",
)
NsName = tuple[str, str]
# uids of deleted objects remembered: a command about one is refused without asking the server
# (a deletion is final, a uid never returns). MultiKueue's losing copies are deleted while their
# workers' admission is still deciding about them: each such decision cost a GET.
GONE_MEMORY = 20_000
_PREBUILT_KINDS = MULTIKUEUE_JOB_KINDS  # MultiKueue copies: every kind the dispatcher copies to a worker


def _rv(obj: Any) -> int:
    """The resourceVersion as a number, to tell an older copy of one object; -1 when not numeric
    (opaque to clients in general: then every copy is taken as it comes)."""
    rv = obj.metadata.resource_version or ""
    return int(rv) if rv.isdigit() else -1


class ClusterObjects:
    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self._objs: dict[str, dict[NsName, Any]] = {k: {} for k in CACHED_KINDS}
        self._owned: dict[str, set[NsName]] = {}  # controller uid -> workloads it controls
        # (kind, namespace, prebuilt workload) -> names of the Jobs/JobSets labelled with it (MultiKueue copies)
        self._prebuilt: dict[tuple[str, str, str], set[str]] = {}
        self.synced: set[str] = set()
        self._gone: dict[str, None] = {}  # uids of deleted objects, oldest first (GONE_MEMORY)
        self.log = get_logger("kq.watcher.objects", cluster=cluster)

    @staticmethod
    def caches(kind: str) -> bool:
        return kind in CACHED_KINDS

    def put(self, kind: str, obj: Any) -> None:
        key = (obj.metadata.namespace, obj.metadata.name)
        table = self._objs[kind]
        old = table.get(key)
        if old is not None and old.metadata.uid == obj.metadata.uid and _rv(old) > _rv(obj):
            return  # an older copy of what we hold (our own write's answer got here first)
        if old is not None and old.metadata.uid != obj.metadata.uid:
            self._bury(old)  # deleted and created again under the same name
        if kind == "workload":
            self._unindex(table.get(key), key)
            ref = obj.metadata.controller_ref()
            if ref is not None:
                self._owned.setdefault(ref.uid, set()).add(key)
        elif kind in _PREBUILT_KINDS:
            self._unindex_prebuilt(kind, table.get(key))
            if wl := obj.metadata.labels.get(PREBUILT_WORKLOAD_LABEL):
                self._prebuilt.setdefault((kind, key[0], wl), set()).add(key[1])
        table[key] = obj

    def remove(self, kind: str, namespace: str, name: str) -> Any | None:
        key = (namespace, name)
        old = self._objs[kind].pop(key, None)
        if old is not None:
            self._bury(old)
        if kind == "workload":
            self._unindex(old, key)
        elif kind in _PREBUILT_KINDS:
            self._unindex_prebuilt(kind, old)
        return old

    def _bury(self, old: Any) -> None:
        if uid := old.metadata.uid:
            self._gone[uid] = None
            if len(self._gone) > GONE_MEMORY:
                del self._gone[next(iter(self._gone))]

    def gone(self, uid: str) -> bool:
        """The object of this uid was seen deleted (for good: uids are never reused)."""
        return bool(uid) and uid in self._gone

    def _unindex_prebuilt(self, kind: str, old: Any | None) -> None:
        if old is None or not (wl := old.metadata.labels.get(PREBUILT_WORKLOAD_LABEL)):
            return
        ikey = (kind, old.metadata.namespace, wl)
        if (names := self._prebuilt.get(ikey)) is not None:
            names.discard(old.metadata.name)
            if not names:
                del self._prebuilt[ikey]

    def _unindex(self, old: Workload | None, key: NsName) -> None:
        if old is None:
            return
        ref = old.metadata.controller_ref()
        if ref is not None and (owned := self._owned.get(ref.uid)) is not None:
            owned.discard(key)
            if not owned:
                del self._owned[ref.uid]

    def replace_all(self, kind: str, objs: list[Any]) -> list[Any]:
        """After a full list: these are all the objects of the kind. Returns the ones that vanished."""
        table = self._objs[kind]
        fresh = {(o.metadata.namespace, o.metadata.name) for o in objs}
        gone = [table[k] for k in sorted(table) if k not in fresh]
        for o in gone:
            self.remove(kind, o.metadata.namespace, o.metadata.name)
        for o in objs:
            self.put(kind, o)
        self.synced.add(kind)
        return gone

    def get(self, kind: str, namespace: str, name: str) -> Any | None:
        return self._objs[kind].get((namespace, name))

    def all(self, kind: str) -> list[Any]:
        table = self._objs[kind]
        return [table[k] for k in sorted(table)]

    def namespace_labels(self, name: str) -> dict[str, str] | None:
        ns = self._objs["namespace"].get(("", name))
        return dict(ns.metadata.labels) if ns is not None else None

    def job(self, namespace: str, name: str) -> Job | None:
        return self._objs["job"].get((namespace, name))

    def job_using_prebuilt(self, namespace: str, workload: str) -> Job | None:
        """The Job labelled with this prebuilt Workload name, if any (MultiKueue workers)."""
        return self.using_prebuilt("job", namespace, workload)

    def any_prebuilt(self) -> bool:
        """Whether any cached object is labelled with a prebuilt Workload (none outside MultiKueue workers)."""
        return bool(self._prebuilt)

    def using_prebuilt(self, kind: str, namespace: str, workload: str) -> Any | None:
        """The object of `kind` labelled with this prebuilt Workload name, if any (the first by name)."""
        names = self._prebuilt.get((kind, namespace, workload))
        if not names:
            return None
        return self._objs[kind].get((namespace, min(names)))

    def workloads_of(self, owner_uid: str) -> list[Workload]:
        table = self._objs["workload"]
        return [table[k] for k in sorted(self._owned.get(owner_uid, ())) if k in table]

    def flavors(self) -> dict[str, ResourceFlavor]:
        return {name: f for (_, name), f in self._objs["resourceflavor"].items()}

    def priority_classes(self) -> dict[str, WorkloadPriorityClass]:
        return {name: c for (_, name), c in self._objs["workloadpriorityclass"].items()}

    def pod_priority_classes(self) -> dict[str, PriorityClass]:
        """scheduling.k8s.io PriorityClasses by name."""
        return {name: c for (_, name), c in self._objs["priorityclass"].items()}
