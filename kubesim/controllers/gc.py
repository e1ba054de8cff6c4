"""The garbage collector and the namespace controller.

- Background cascade: when an owner is gone, its dependents are deleted (or, when another
  owner of theirs still exists, only the reference to the gone owner is removed). An object
  created with an ownerReference to a uid that does not exist is collected the same way.
- Orphan (finalizer `orphan`): references to the owner are removed from its dependents,
  then the finalizer.
- Foreground (finalizer `foregroundDeletion`): dependents are deleted; the finalizer goes
  when none is left.
- Namespaces: deleting one deletes everything in it; it goes when empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubesim.controllers.workqueue import WorkQueue, per_key
from kubesim.resources import NAMESPACES, RESOURCES, ResourceType, by_key
from kubesim.store import owner_uids
from kubesim.watch import ADDED, DELETED

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

Item = tuple[str, str]  # ("owner", uid) | ("finalize", uid) | ("ns", name)


class GarbageCollector:
    def __init__(self, cluster: Cluster) -> None:
        self._store = cluster.store
        self.queue: WorkQueue[Item] = WorkQueue("gc", per_key(self.reconcile, "gc"))
        for rt in RESOURCES:
            self._store.subscribe(rt, self._on_change)

    def _on_change(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        meta = new["metadata"]
        store = self._store
        if etype == DELETED:
            if store.dependents(meta["uid"]):
                self.queue.add(("owner", meta["uid"]))
            for uid in owner_uids(new):
                found = store.by_uid(uid)
                if found is not None and found[1].obj["metadata"].get("deletionTimestamp"):
                    self.queue.add(("finalize", uid))
            if rt.namespaced:
                space = store.find(NAMESPACES, "", meta["namespace"])
                if space is not None and space.obj["metadata"].get("deletionTimestamp"):
                    self.queue.add(("ns", meta["namespace"]))
            return
        if meta.get("deletionTimestamp"):
            finalizers = meta.get("finalizers") or ()
            if "orphan" in finalizers or "foregroundDeletion" in finalizers:
                self.queue.add(("finalize", meta["uid"]))
            if rt is NAMESPACES:
                self.queue.add(("ns", meta["name"]))
        owners = owner_uids(new)
        if owners and (etype == ADDED or owners != owner_uids(old or {})):
            for uid in owners:
                if store.by_uid(uid) is None:
                    self.queue.add(("owner", uid))

    def reconcile(self, item: Item) -> None:
        what, ident = item
        if what == "owner":
            self._collect_dependents(ident)
        elif what == "finalize":
            self._finalize(ident)
        else:
            self._empty_namespace(ident)

    def _collect_dependents(self, uid: str) -> None:
        store = self._store
        if store.by_uid(uid) is not None:
            return
        for rkey, ns, name in store.dependents(uid):
            rt = by_key(rkey)
            e = store.find(rt, ns, name)
            if e is None:
                continue
            others = [u for u in owner_uids(e.obj) if u != uid and store.by_uid(u) is not None]
            if others:
                store.modify(rt, ns, name, lambda o: _drop_owner(o, uid))
            elif not e.obj["metadata"].get("deletionTimestamp"):
                store.delete(rt, ns, name, propagation="Background")

    def _finalize(self, uid: str) -> None:
        store = self._store
        found = store.by_uid(uid)
        if found is None:
            return
        rt, e = found
        meta = e.obj["metadata"]
        if not meta.get("deletionTimestamp"):
            return
        finalizers = meta.get("finalizers") or []
        ns, name = meta.get("namespace", ""), meta["name"]
        if "orphan" in finalizers:
            for rkey, dns, dname in store.dependents(uid):
                store.modify(by_key(rkey), dns, dname, lambda o: _drop_owner(o, uid))
            store.modify(rt, ns, name, lambda o: _drop_finalizer(o, "orphan"))
        elif "foregroundDeletion" in finalizers:
            deps = store.dependents(uid)
            for rkey, dns, dname in deps:
                dep = store.find(by_key(rkey), dns, dname)
                if dep is not None and not dep.obj["metadata"].get("deletionTimestamp"):
                    store.delete(by_key(rkey), dns, dname, propagation="Background")
            if not store.dependents(uid):
                store.modify(rt, ns, name, lambda o: _drop_finalizer(o, "foregroundDeletion"))

    def _empty_namespace(self, name: str) -> None:
        store = self._store
        space = store.find(NAMESPACES, "", name)
        if space is None or not space.obj["metadata"].get("deletionTimestamp"):
            return
        for rt, e in store.namespace_contents(name):
            if not e.obj["metadata"].get("deletionTimestamp"):
                store.delete(rt, name, e.obj["metadata"]["name"], propagation="Background")
        store.finalize_namespace(name)


def _drop_owner(obj: dict[str, Any], uid: str) -> None:
    refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
    if refs:
        obj["metadata"]["ownerReferences"] = refs
    else:
        obj["metadata"].pop("ownerReferences", None)


def _drop_finalizer(obj: dict[str, Any], finalizer: str) -> None:
    fins = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
    if fins:
        obj["metadata"]["finalizers"] = fins
    else:
        obj["metadata"].pop("finalizers", None)
