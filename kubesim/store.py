"""One cluster's object store: the API server's semantics over in-memory dicts.

Objects are plain dicts, stored with their encoded JSON. A stored dict is never
mutated: every write builds a new dict (a private copy is made by decoding the
stored bytes, which is much faster than deepcopy), so the dicts handed to
watchers, listeners and readers stay valid.

Writes are synchronous (one event loop, no locks). After each commit, in-process
listeners (the controllers) are called synchronously and must only enqueue work.
"""

from __future__ import annotations

import builtins
import random
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import msgspec

from kubesim import patches
from kubesim.errors import ApiError, already_exists, bad_request, conflict, invalid, not_found
from kubesim.resources import NAMESPACES, RESOURCES, ResourceType, by_key
from kubesim.validation import check_metadata, check_name, require_map
from kubesim.watch import ADDED, DELETED, MODIFIED, Event, WatchHub

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode

# generateName suffixes use the API server's alphabet (no vowels, no confusable digits).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SERVER_FIELDS = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")
_AUTO_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# RFC 4122 version 4: the variant bits (10) and the version nibble (4), as uuid.UUID(version=4) sets them.
_UUID_CLEAR = ~((0xC000 << 48) | (0xF000 << 64)) & ((1 << 128) - 1)
_UUID_V4 = (0x8000 << 48) | (4 << 76)

Key = tuple[str, str, str]  # (resource key, namespace or "", name)
Listener = Callable[[str, ResourceType, Mapping[str, Any] | None, Mapping[str, Any]], None]


# Kinds written often and read back almost never (Events: kq records ~3 per workload): their
# entries keep only the encoded object and decode it on each read, a fifth of the memory.
_ENCODED_ONLY = frozenset(("events", "events.events.k8s.io"))


class Entry:
    __slots__ = ("_obj", "raw", "rv")

    def __init__(self, obj: dict[str, Any], raw: bytes, rv: int, keep: bool = True) -> None:
        self._obj = obj if keep else None
        self.raw = raw
        self.rv = rv

    @property
    def obj(self) -> dict[str, Any]:
        """The stored object (never to be mutated)."""
        obj = self._obj
        return obj if obj is not None else _decode(self.raw)

    def copy(self) -> dict[str, Any]:
        """A private, mutable deep copy of the object."""
        return _decode(self.raw)


class Admission(Protocol):
    """Per-kind defaulting, mutation and validation (what built-in strategies and webhooks do)."""

    def on_create(self, store: Store, rt: ResourceType, obj: dict[str, Any]) -> None: ...

    def on_update(self, store: Store, rt: ResourceType, old: Mapping[str, Any], new: dict[str, Any]) -> None: ...


_stamp_cache: list[Any] = [-1, ""]  # [whole second, its RFC 3339 text]: many writes share a second


def now_rfc3339(t: float | None = None) -> str:
    sec = int(time.time() if t is None else t)
    if sec != _stamp_cache[0]:
        _stamp_cache[0], _stamp_cache[1] = sec, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(sec))
    return _stamp_cache[1]


def owner_uids(obj: Mapping[str, Any]) -> tuple[str, ...]:
    refs = obj.get("metadata", {}).get("ownerReferences")
    if not refs:
        return ()  # most objects: no generator to build
    return tuple(r["uid"] for r in refs if isinstance(r, dict) and "uid" in r)


def _spec_part(obj: Mapping[str, Any], with_status: bool) -> dict[str, Any]:
    """What generation tracks: everything but metadata (and status, where status is a subresource)."""
    skip = ("metadata", "status") if with_status else ("metadata",)
    return {k: v for k, v in obj.items() if k not in skip}


class Store:
    def __init__(self, *, admission: Admission, rng: random.Random, history_size: int = 10_000,
                 watch_buffer: int = 10_000) -> None:
        self.rv = 0
        self.last_change = time.monotonic()
        self.hub = WatchHub(history_size, watch_buffer)
        self._admission = admission
        self._rng = rng
        self._data: dict[str, dict[str, dict[str, Entry]]] = {r.key: {} for r in RESOURCES}
        self._dependents: dict[str, set[Key]] = {}
        self._uids: dict[str, Key] = {}
        self._listeners: dict[str, list[Listener]] = {}
        # (rv, event type, resource key, encoded object) of every commit: kubesim.journal.
        self.recorder: Callable[[int, str, str, bytes], None] | None = None
        for ns in _AUTO_NAMESPACES:
            self.create(NAMESPACES, "", {"metadata": {"name": ns}})

    # --- reading ---

    def find(self, rt: ResourceType, ns: str, name: str) -> Entry | None:
        by_ns = self._data[rt.key].get(ns)
        return by_ns.get(name) if by_ns else None

    def get(self, rt: ResourceType, ns: str, name: str) -> Entry:
        e = self.find(rt, ns, name)
        if e is None:
            raise not_found(rt, name)
        return e

    def list(self, rt: ResourceType, ns: str | None = None,
             match: Callable[[Mapping[str, Any]], bool] | None = None) -> list[Entry]:
        """Entries sorted by (namespace, name), as etcd keys sort."""
        data = self._data[rt.key]
        spaces = [ns] if ns is not None else sorted(data)
        out: list[Entry] = []
        for space in spaces:
            by_name = data.get(space)
            if not by_name:
                continue
            for name in sorted(by_name):
                e = by_name[name]
                if match is None or match(e.obj):
                    out.append(e)
        return out

    def iter_all(self, rt: ResourceType) -> Iterator[Entry]:
        for by_name in self._data[rt.key].values():
            yield from by_name.values()

    def by_uid(self, uid: str) -> tuple[ResourceType, Entry] | None:
        key = self._uids.get(uid)
        if key is None:
            return None
        rt = by_key(key[0])
        e = self.find(rt, key[1], key[2])
        return (rt, e) if e is not None else None

    def dependents(self, owner_uid: str) -> builtins.list[Key]:
        return sorted(self._dependents.get(owner_uid, ()))

    def namespace_is_empty(self, ns: str) -> bool:
        return not any(self._data[r.key].get(ns) for r in RESOURCES if r.namespaced)

    def namespace_contents(self, ns: str) -> builtins.list[tuple[ResourceType, Entry]]:
        return [(r, e) for r in RESOURCES if r.namespaced for e in self.list(r, ns)]

    def subscribe(self, rt: ResourceType, fn: Listener) -> None:
        self._listeners.setdefault(rt.key, []).append(fn)

    # --- committing (every change goes through here) ---

    def _commit(self, etype: str, rt: ResourceType, ns: str, name: str, old: Entry | None,
                obj: dict[str, Any]) -> Entry:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        raw = _encode(obj)
        entry = Entry(obj, raw, self.rv, rt.key not in _ENCODED_ONLY)
        key = (rt.key, ns, name)
        prev = old.obj if old else None
        if etype == DELETED:
            by_name = self._data[rt.key][ns]
            del by_name[name]
            if not by_name:
                del self._data[rt.key][ns]
            self._uids.pop(obj["metadata"].get("uid", ""), None)
            self._reindex_owners(key, prev, None)
        else:
            self._data[rt.key].setdefault(ns, {})[name] = entry
            if old is None:
                self._uids[obj["metadata"]["uid"]] = key
            self._reindex_owners(key, prev, obj)
        self.last_change = time.monotonic()
        self.hub.publish(Event(self.rv, rt.key, ns, etype, obj, prev, raw, old.raw if old else None))
        if self.recorder is not None:
            self.recorder(self.rv, etype, rt.key, raw)
        for fn in self._listeners.get(rt.key, ()):
            fn(etype, rt, prev, obj)
        return entry

    def _reindex_owners(self, key: Key, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        before = owner_uids(old) if old else ()
        after = owner_uids(new) if new else ()
        if before == after:
            return
        for uid in before:
            if uid not in after:
                deps = self._dependents.get(uid)
                if deps is not None:
                    deps.discard(key)
                    if not deps:
                        del self._dependents[uid]
        for uid in after:
            self._dependents.setdefault(uid, set()).add(key)

    # --- create ---

    def create(self, rt: ResourceType, ns: str, obj: Any) -> Entry:
        obj = self._typed(rt, require_map(obj, "body"))
        meta = require_map(obj.setdefault("metadata", {}), "metadata")
        ns = self._check_namespace(rt, ns, meta)
        if meta.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        for f in _SERVER_FIELDS:
            meta.pop(f, None)
        meta.pop("managedFields", None)
        meta.pop("selfLink", None)
        if rt.status and not rt.keep_status_on_create:
            obj.pop("status", None)
        generate = meta.get("generateName")
        if not meta.get("name"):
            if not generate or not isinstance(generate, str):
                raise invalid(rt, "", "metadata.name", "", "name or generateName is required")
            meta["name"] = self._generate_name(rt, ns, generate)
        name = meta["name"]
        check_name(rt, name)
        check_metadata(rt, name, meta)
        if self.find(rt, ns, name) is not None:
            raise already_exists(rt, name)
        meta["uid"] = self.new_uid()
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        self._admission.on_create(self, rt, obj)
        return self._commit(ADDED, rt, ns, name, None, obj)

    @staticmethod
    def _typed(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The object with apiVersion and kind checked and first, as the API server writes them."""
        av, kind = obj.get("apiVersion"), obj.get("kind")
        if av is not None and av != rt.api_version:
            raise bad_request(
                f"the API version in the data ({av}) does not match the expected API version ({rt.api_version})"
            )
        if kind is not None and kind != rt.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
        if av is not None and kind is not None:
            keys = iter(obj)
            if next(keys) == "apiVersion" and next(keys) == "kind":
                return obj  # already so (most writes): no copy
        out = {"apiVersion": rt.api_version, "kind": rt.kind}
        out.update((k, v) for k, v in obj.items() if k != "apiVersion" and k != "kind")
        return out

    def _check_namespace(self, rt: ResourceType, ns: str, meta: dict[str, Any]) -> str:
        if not rt.namespaced:
            meta.pop("namespace", None)
            return ""
        body_ns = meta.get("namespace")
        if body_ns and body_ns != ns:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        meta["namespace"] = ns
        space = self.find(NAMESPACES, "", ns)
        if space is None:
            raise not_found(NAMESPACES, ns)
        if space.obj["metadata"].get("deletionTimestamp"):
            raise ApiError(403, f"{rt.plural} \"{meta.get('name') or meta.get('generateName', '')}\" is forbidden: "
                           f"unable to create new content in namespace {ns} because it is being terminated",
                           details={"name": meta.get("name", ""), "kind": rt.plural,
                                    "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]})
        return ns

    def _generate_name(self, rt: ResourceType, ns: str, prefix: str) -> str:
        for _ in range(8):
            name = prefix + "".join(self._rng.choice(_NAME_ALPHABET) for _ in range(5))
            if self.find(rt, ns, name) is None:
                return name
        raise already_exists(rt, prefix)

    def new_uid(self) -> str:
        """A version-4 UUID from the seeded PRNG: str(uuid.UUID(int=n, version=4)), formatted
        without building the UUID object (one per created object)."""
        n = (self._rng.getrandbits(128) & _UUID_CLEAR) | _UUID_V4
        h = f"{n:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    # --- update ---

    def replace(self, rt: ResourceType, ns: str, name: str, obj: Any, *, status_only: bool = False) -> Entry:
        """PUT: the body's resourceVersion, when set, must be the current one."""
        old = self.get(rt, ns, name)
        obj = require_map(obj, "body")
        meta = require_map(obj.get("metadata") or {}, "metadata")
        rv = meta.get("resourceVersion")
        if meta.get("uid") and meta["uid"] != old.obj["metadata"]["uid"]:
            raise conflict(rt, name, f"Precondition failed: UID in precondition: {meta['uid']}, "
                                     f"UID in object meta: {old.obj['metadata']['uid']}")
        if rv:
            if rv != old.obj["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
        elif rt.custom:
            raise invalid(rt, name, "metadata.resourceVersion", 0, "must be specified for an update")
        return self._update(rt, ns, name, old, obj, status_only)

    def patch(self, rt: ResourceType, ns: str, name: str, content_type: str, body: bytes, *,
              status_only: bool = False) -> Entry:
        ctype = content_type.split(";", 1)[0].strip().lower()
        if ctype not in (patches.MERGE_PATCH, patches.JSON_PATCH, patches.STRATEGIC_PATCH) or (
            ctype == patches.STRATEGIC_PATCH and rt.custom
        ):
            accepted = "application/json-patch+json, application/merge-patch+json"
            if not rt.custom:
                accepted += ", application/strategic-merge-patch+json"
            raise ApiError(
                415, f"the body of the request was in an unknown format - accepted media types include: {accepted}"
            )
        old = self.get(rt, ns, name)
        try:
            doc = _decode(body)
        except msgspec.DecodeError as e:
            raise bad_request(f"error decoding patch: {e}") from None
        try:
            if ctype == patches.MERGE_PATCH and status_only:
                # Only the status of the result is kept: a merge that shares what it does not
                # change with the stored object (never mutated) saves decoding a private copy.
                result = patches.merged(old.obj, doc)
            elif ctype == patches.MERGE_PATCH:
                result = patches.merge_patch(old.copy(), doc)
            elif ctype == patches.JSON_PATCH:
                result = patches.json_patch(old.copy(), doc)
            else:
                result = patches.strategic_merge(old.copy(), doc)
        except patches.PatchError as e:
            raise ApiError(e.code, f"the server rejected our request due to an error in our request: {e}") from None
        result = require_map(result, "patched object")
        meta = require_map(result.get("metadata") or {}, "metadata")
        # A resourceVersion (or uid) left in the patched object is a precondition.
        if meta.get("resourceVersion") and meta["resourceVersion"] != old.obj["metadata"]["resourceVersion"]:
            raise conflict(rt, name)
        if meta.get("uid") and meta["uid"] != old.obj["metadata"]["uid"]:
            raise conflict(rt, name, f"Precondition failed: UID in precondition: {meta['uid']}, "
                                     f"UID in object meta: {old.obj['metadata']['uid']}")
        return self._update(rt, ns, name, old, result, status_only)

    def modify(self, rt: ResourceType, ns: str, name: str, fn: Callable[[dict[str, Any]], None], *,
               status_only: bool = False) -> Entry | None:
        """For in-process controllers: change a private copy with `fn` and write it (no precondition)."""
        old = self.find(rt, ns, name)
        if old is None:
            return None
        new = old.copy()
        fn(new)
        return self._update(rt, ns, name, old, new, status_only)

    def _update(self, rt: ResourceType, ns: str, name: str, old: Entry, obj: dict[str, Any],
                status_only: bool) -> Entry:
        obj = self._typed(rt, obj)
        meta = require_map(obj.setdefault("metadata", {}), "metadata")
        if meta.get("name", name) != name:
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and meta.get("namespace", ns) != ns:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        prev = old.obj
        if status_only:
            # Only status changes; the rest is shared with the stored object (never mutated).
            new = {k: v for k, v in prev.items() if k != "status"}
            new["metadata"] = dict(prev["metadata"])
            if "status" in obj:
                new["status"] = obj["status"]
        else:
            new = obj
            old_meta = prev["metadata"]
            meta["name"] = name
            if rt.namespaced:
                meta["namespace"] = ns
            for f in _SERVER_FIELDS:
                if f in old_meta:
                    meta[f] = old_meta[f]
                else:
                    meta.pop(f, None)
            meta.pop("managedFields", None)
            if rt.status:
                if "status" in prev:
                    new["status"] = prev["status"]
                else:
                    new.pop("status", None)
            check_metadata(rt, name, meta)
            self._admission.on_update(self, rt, prev, new)
            if _spec_part(new, rt.status) != _spec_part(prev, rt.status):
                meta["generation"] = int(old_meta.get("generation", 1)) + 1
        new["metadata"]["resourceVersion"] = prev["metadata"]["resourceVersion"]
        if new == prev:
            return old  # a no-op write changes nothing, not even the resourceVersion
        entry = self._commit(MODIFIED, rt, ns, name, old, new)
        m = new["metadata"]
        if m.get("deletionTimestamp") and not m.get("finalizers") and not _held(rt, new):
            return self._remove(rt, ns, name, entry)
        return entry

    # --- delete ---

    def delete(self, rt: ResourceType, ns: str, name: str, *, propagation: str | None = None,
               preconditions: Mapping[str, Any] | None = None, grace_seconds: int | None = None) -> tuple[Entry, bool]:
        """Delete or start deleting. Returns the object and whether it is gone."""
        old = self.get(rt, ns, name)
        meta = old.obj["metadata"]
        if preconditions:
            want_uid, want_rv = preconditions.get("uid"), preconditions.get("resourceVersion")
            if want_uid and want_uid != meta["uid"]:
                raise conflict(rt, name, f"Precondition failed: UID in precondition: {want_uid}, "
                                         f"UID in object meta: {meta['uid']}")
            if want_rv and want_rv != meta["resourceVersion"]:
                raise conflict(rt, name, f"Precondition failed: ResourceVersion in precondition: {want_rv}, "
                                         f"ResourceVersion in object meta: {meta['resourceVersion']}")
        if propagation is None:
            # batch/v1 Jobs orphan their pods unless told otherwise (Kubernetes' back-compat default).
            propagation = "Orphan" if rt.key == "jobs.batch" else "Background"
        if propagation not in ("Orphan", "Background", "Foreground"):
            raise bad_request(f"unsupported propagationPolicy {propagation!r}")
        if meta.get("deletionTimestamp"):
            if grace_seconds == 0 and meta.get("deletionGracePeriodSeconds"):
                # The kubelet confirming a graceful pod deletion: shorten the grace to zero.
                new = old.copy()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                if new["metadata"].get("finalizers"):
                    return self._commit(MODIFIED, rt, ns, name, old, new), False
                return self._remove(rt, ns, name, old), True
            return old, False  # already being deleted
        finalizers = list(meta.get("finalizers") or ())
        has_dependents = bool(self._dependents.get(meta["uid"]))
        if propagation == "Orphan" and has_dependents and "orphan" not in finalizers:
            finalizers.append("orphan")
        if propagation == "Foreground" and has_dependents and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        graceful = _grace_period(rt, old.obj, grace_seconds)
        if finalizers or graceful is not None or rt is NAMESPACES:
            new = old.copy()
            m = new["metadata"]
            m["deletionTimestamp"] = now_rfc3339(time.time() + (graceful or 0))
            m["deletionGracePeriodSeconds"] = graceful or 0
            m["generation"] = int(m.get("generation", 1)) + 1
            if finalizers:
                m["finalizers"] = finalizers
            if rt is NAMESPACES:
                new.setdefault("status", {})["phase"] = "Terminating"
            return self._commit(MODIFIED, rt, ns, name, old, new), False
        return self._remove(rt, ns, name, old), True

    def finalize_namespace(self, name: str) -> bool:
        """The namespace controller's last step: an emptied, terminating namespace goes away."""
        e = self.find(NAMESPACES, "", name)
        if e is None or not e.obj["metadata"].get("deletionTimestamp") or not self.namespace_is_empty(name):
            return False
        new = e.copy()
        new.setdefault("spec", {})["finalizers"] = []
        entry = self._commit(MODIFIED, NAMESPACES, "", name, e, new)
        if not new["metadata"].get("finalizers"):
            self._remove(NAMESPACES, "", name, entry)
        return True

    def _remove(self, rt: ResourceType, ns: str, name: str, old: Entry) -> Entry:
        final = dict(old.obj)
        final["metadata"] = dict(old.obj["metadata"])
        return self._commit(DELETED, rt, ns, name, old, final)


def _grace_period(rt: ResourceType, obj: Mapping[str, Any], grace: int | None) -> int | None:
    """Pods running on a node are deleted gracefully (the kubelet confirms); others go at once."""
    if rt.key != "pods" or grace == 0:
        return None
    if not obj.get("spec", {}).get("nodeName"):
        return None
    if obj.get("status", {}).get("phase") in ("Succeeded", "Failed"):
        return None
    if grace is None:
        grace = int(obj.get("spec", {}).get("terminationGracePeriodSeconds", 30))
    return max(grace, 1)


def _held(rt: ResourceType, obj: Mapping[str, Any]) -> bool:
    """Deleting objects that stay without finalizers: a pod the kubelet has not confirmed gone,
    a namespace whose contents are not yet deleted (spec.finalizers)."""
    if rt.key == "pods":
        return bool(obj["metadata"].get("deletionGracePeriodSeconds"))
    if rt is NAMESPACES:
        return bool(obj.get("spec", {}).get("finalizers"))
    return False
