"""List+watch of one kind in one cluster, feeding the mirror and the typed cache.

The informer pattern, with kubernetes-asyncio's wire quirks handled in kq.kube:
list (everything, and the list's resourceVersion) -> publish what changed
against the mirror index, tombstone what vanished, then a SyncMarker -> watch
from that resourceVersion (bookmarks keep it fresh) -> on a clean end or a cut
stream, watch again from the last resourceVersion seen -> on 410 Gone, list
again. API errors back off and retry; nothing here gives up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec

from kq.clock import SYSTEM_CLOCK, Clock
from kq.kube import Gone, KubeClient, KubeError, NotFound, StreamBroken, retry_delay
from kq.mirror import SyncMarker
from kq.obs import get_logger
from services.watcher.core.invalid import SpecSeen, decode_or_error, spec_seen
from services.watcher.core.versions import already_held
from services.watcher.invalid import InvalidObjects
from services.watcher.mirror import MirrorIndex, MirrorPublisher, Record, head_decoder
from services.watcher.objects import ClusterObjects

OnChange = Callable[[str, Any, Any], None]  # (kind, old typed object | None, new typed object | None)


class KindLoop:
    def __init__(
        self,
        client: KubeClient,
        cluster: str,
        kind: str,
        *,
        namespace: str | None,
        index: MirrorIndex,
        publisher: MirrorPublisher,
        objects: ClusterObjects,
        on_change: OnChange,
        watch_timeout_s: float,
        retry_base_s: float,
        retry_max_s: float,
        clock: Clock = SYSTEM_CLOCK,
        invalid: InvalidObjects | None = None,
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.kind = kind
        self.namespace = namespace
        self.index = index
        self.publisher = publisher
        self.objects = objects
        self.on_change = on_change
        self.watch_timeout_s = watch_timeout_s
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self.clock = clock
        self.last_rv = ""
        self.lists = 0  # full lists done (tests watch re-lists)
        self.unserved = False  # the kind was not served at the first list
        self.log = get_logger("kq.watcher.listwatch", cluster=cluster, kind=kind)
        self._typed = objects.caches(kind)
        self.invalid = invalid
        # Decoded here: the kinds the watcher acts on, and every Kueue kind (said so on when it does not fit).
        self._checked = self._typed or (invalid is not None and invalid.checks(kind))
        self._spec_good: dict[tuple[str, str], SpecSeen] = {}  # objects whose quantities were checked

    async def run(self) -> None:
        delay = self.retry_base_s
        while True:
            try:
                await self._list()
                delay = self.retry_base_s
                await self._watch_until_gone()
            except asyncio.CancelledError:
                raise
            except NotFound as e:  # the kind is not served (no such CRD): none exist; look again later
                await self._unserved(str(e))
                await self.clock.sleep(self.retry_max_s)
            except KubeError as e:
                wait = retry_delay(e, delay)
                self.log.warning("list failed; retrying", error=str(e), delay_s=wait)
                await self.clock.sleep(wait)
                delay = min(delay * 2, self.retry_max_s)

    # --- list ---

    async def _list(self) -> None:
        items, rv = await self.client.list(self.kind, namespace=self.namespace)
        records: list[Record] = []
        typed: list[Any] = []
        for raw in items:
            head = head_decoder.decode(raw).metadata
            records.append(Record(self.kind, head.namespace, head.name, head.uid, head.resource_version, False, raw))
            obj = self._decode(head.namespace, head.name, head.uid, raw) if self._checked else None
            if self._typed and obj is not None:
                typed.append(obj)
        present = {(r.namespace, r.name) for r in records}
        for r in records:
            if self.index.get(r.key) != (r.uid, r.resource_version):
                await self._enqueue(r)
        for ns, name in self.index.keys(self.kind):
            if (ns, name) not in present:
                uid, old_rv = self.index.get((self.kind, ns, name)) or ("", "")
                body = await self.publisher.last_known(self.kind, ns, name, uid, old_rv)
                if self.invalid is not None:
                    self.invalid.gone(self.kind, ns, name)
                await self._enqueue(Record(self.kind, ns, name, uid, rv, True, body))
        if self._typed:
            before = {(o.metadata.namespace, o.metadata.name): o for o in self.objects.all(self.kind)}
            for gone in self.objects.replace_all(self.kind, typed):
                self.on_change(self.kind, gone, None)
            for obj in typed:
                old = before.get((obj.metadata.namespace, obj.metadata.name))
                if old is None or old.metadata.resource_version != obj.metadata.resource_version:
                    self.on_change(self.kind, old, obj)
            self.on_change(self.kind, None, None)  # listed: the cache of this kind is complete
        await self.publisher.put(
            SyncMarker(cluster=self.cluster, kind=self.kind, resource_version=rv, count=len(records))
        )
        self.last_rv = rv
        self.lists += 1
        self.log.info("listed", count=len(records), resource_version=rv)

    def _decode(self, namespace: str, name: str, uid: str, raw: bytes) -> Any | None:
        obj, error = decode_or_error(self.kind, raw, self._spec_good.get((namespace, name)))
        if obj is not None and (seen := spec_seen(self.kind, obj)) is not None:
            self._spec_good[(namespace, name)] = seen
        else:
            self._spec_good.pop((namespace, name), None)
        if self.invalid is not None:
            self.invalid.seen(self.kind, namespace, name, uid, raw, obj, error)
        elif error is not None:
            self.log.error("cannot decode object; the integration ignores it", name=name, error=error)
        return obj

    async def _unserved(self, error: str) -> None:
        """A kind the cluster does not serve (a framework whose CRD is not installed) has no objects:
        said once, and counted as listed so that the watcher's readiness does not wait for it."""
        if self.lists or self.unserved:
            return
        self.unserved = True
        self.log.info("kind not served; counted as empty, looking again later", error=error)
        if self._typed:
            for gone in self.objects.replace_all(self.kind, []):
                self.on_change(self.kind, gone, None)
            self.on_change(self.kind, None, None)
        await self.publisher.put(SyncMarker(cluster=self.cluster, kind=self.kind, resource_version="", count=0))

    async def _enqueue(self, r: Record) -> None:
        if r.deleted:
            self.index.remove(r.key)
        else:
            self.index.set(r.key, r.uid, r.resource_version)
        await self.publisher.put(r)

    # --- watch ---

    async def _watch_until_gone(self) -> None:
        delay = self.retry_base_s
        while True:
            try:
                async for ev in self.client.watch(self.kind, self.last_rv, namespace=self.namespace,
                                                  timeout_s=self.watch_timeout_s):
                    await self._event(ev.type, ev.raw)
                    delay = self.retry_base_s
            except Gone:
                self.log.info("watch history expired; listing again", resource_version=self.last_rv)
                return
            except StreamBroken as e:
                self.log.info("watch cut; resuming", resource_version=self.last_rv, error=str(e))
            except KubeError as e:
                wait = retry_delay(e, delay)
                self.log.warning("watch failed; retrying", error=str(e), delay_s=wait)
                await self.clock.sleep(wait)
                delay = min(delay * 2, self.retry_max_s)

    async def _event(self, etype: str, raw: bytes) -> None:
        try:
            head = head_decoder.decode(raw).metadata
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            self.log.error("undecodable watch object; skipped", error=str(e))
            return
        if etype == "BOOKMARK":
            self.last_rv = head.resource_version or self.last_rv
            return
        deleted = etype == "DELETED"
        if not deleted and already_held(self.index.get((self.kind, head.namespace, head.name)), head.uid,
                                        head.resource_version):
            self.last_rv = head.resource_version
            return  # listed already at this state or a newer one (see core/versions.py)
        await self._enqueue(Record(self.kind, head.namespace, head.name, head.uid, head.resource_version, deleted, raw))
        if deleted:
            self._spec_good.pop((head.namespace, head.name), None)
        if deleted and self.invalid is not None:
            self.invalid.gone(self.kind, head.namespace, head.name)
        if not deleted and self._checked:
            old = self.objects.get(self.kind, head.namespace, head.name) if self._typed else None
            held = (old.metadata.uid, old.metadata.resource_version) if old is not None else None
            if held == (head.uid, head.resource_version):
                obj = old  # the echo of a write of ours: the cache has it already, as the server answered
            else:
                obj = self._decode(head.namespace, head.name, head.uid, raw)
            if self._typed and obj is not None:
                self.objects.put(self.kind, obj)
                self.on_change(self.kind, old, obj)
        elif deleted and self._typed:
            old = self.objects.remove(self.kind, head.namespace, head.name)
            self.on_change(self.kind, old, None)
        self.last_rv = head.resource_version
