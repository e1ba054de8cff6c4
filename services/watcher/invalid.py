"""Saying so on objects kq cannot read (core/invalid.py decides what), and taking it back when fixed.

The list/watch loops hand over every object of a checked kind as they decode it; this keeps the
latest state per object and writes in its own task, so a slow or failing write never holds up the
mirror or the other objects. A status write is conditional on the resourceVersion it was planned
on: a 409 means the object moved, and its next watch event plans again. Events are recorded once
per object and message while this watcher runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from kq.api.events import ObjectReference
from kq.api.registry import KINDS
from kq.clock import Clock, rfc3339_seconds
from kq.kube import BadRequest, Conflict, Forbidden, KubeClient, KubeError, NotFound, retry_delay
from kq.messages import RecordEvent
from kq.obs import get_logger
from services.watcher.core.invalid import INVALID_SPEC, STATUS_CONDITION, plan_fixed, plan_invalid
from services.watcher.core.writes import Skip, Write
from services.watcher.events import EventWriter

Key = tuple[str, str, str]  # (kind token, namespace, name)
_INVALID_SPEC_BYTES = INVALID_SPEC.encode()  # as it appears in the JSON of a condition carrying it
_INFO = {i.token: i for i in KINDS}
# Every Kueue kind is kq's to read, whether or not the watcher itself caches it.
KUEUE_KINDS = frozenset(i.token for i in KINDS if i.strict)


class _Seen(msgspec.Struct, frozen=True):
    uid: str
    raw: bytes
    typed: Any
    error: str | None


class InvalidObjects:
    def __init__(self, client: KubeClient, cluster: str, clock: Clock, instance: str, *,
                 retry_base_s: float, retry_max_s: float) -> None:
        self.client = client
        self.cluster = cluster
        self.clock = clock
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self.events = EventWriter(client, instance, clock)
        self._pending: dict[Key, _Seen] = {}
        self._wake = asyncio.Event()
        self._marked: dict[Key, str] = {}  # what this watcher said on the object: the error
        self.written = 0  # conditions set or cleared, events recorded (tests, logs)
        self.log = get_logger("kq.watcher.invalid", cluster=cluster)

    @staticmethod
    def checks(kind: str) -> bool:
        """Kueue's kinds; the kinds the watcher itself reads (Jobs and the other frameworks) are
        checked where it decodes them anyway (listwatch.py)."""
        return kind in KUEUE_KINDS

    def seen(self, kind: str, namespace: str, name: str, uid: str, raw: bytes, typed: Any, error: str | None) -> None:
        key = (kind, namespace, name)
        if error is None and key not in self._marked:
            if kind not in STATUS_CONDITION or not self._carries_ours(raw, typed):
                self._pending.pop(key, None)  # fixed before its error was written: nothing to say
                return
        elif error is not None and self._marked.get(key) == error and kind not in STATUS_CONDITION:
            return  # said already
        if error is not None and self._marked.get(key) != error:
            self.log.error("cannot decode object; said so on it", kind=kind, namespace=namespace, name=name,
                           error=error)
        self._pending[key] = _Seen(uid, raw, typed, error)
        self._wake.set()

    @staticmethod
    def _carries_ours(raw: bytes, typed: Any) -> bool:
        """A condition kq set before a restart, on an object fixed while the watcher was away."""
        if _INVALID_SPEC_BYTES not in raw:  # (every Workload seen comes here: a search in C first)
            return False
        conditions = getattr(getattr(typed, "status", None), "conditions", ()) or ()
        return any(c.reason == INVALID_SPEC for c in conditions)

    def gone(self, kind: str, namespace: str, name: str) -> None:
        self._pending.pop((kind, namespace, name), None)
        self._marked.pop((kind, namespace, name), None)

    async def run(self) -> None:
        delay = self.retry_base_s
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, {}
            for key, seen in batch.items():
                try:
                    await self._one(key, seen)
                    delay = self.retry_base_s
                except asyncio.CancelledError:
                    raise
                except KubeError as e:  # the API server is unwell: keep the latest state, try again
                    self._pending.setdefault(key, seen)
                    wait = retry_delay(e, delay)
                    self.log.warning("cannot say so on an invalid object; retrying", key=key, error=str(e),
                                     delay_s=wait)
                    await self.clock.sleep(wait)
                    delay = min(delay * 2, self.retry_max_s)
                    self._wake.set()

    async def _one(self, key: Key, seen: _Seen) -> None:
        kind, ns, name = key
        now = rfc3339_seconds(self.clock.now())
        if seen.error is None:
            write = plan_fixed(kind, seen.typed, marked=key in self._marked) if kind in STATUS_CONDITION else None
            self._marked.pop(key, None)  # an Event stays: it is history
            if write is not None:
                await self._patch(write)
            return
        if kind in STATUS_CONDITION:
            plan = plan_invalid(kind, msgspec.json.decode(seen.raw), seen.error, now)
            if isinstance(plan, Skip):
                self._marked[key] = seen.error
                return
            if isinstance(plan, Write):
                written = await self._patch(plan)
                if written is not None:  # written, or moved meanwhile (its next event plans again)
                    if written:
                        self._marked[key] = seen.error
                    return
                # refused by the API server (its status is beyond repair too): an Event instead
        if self._marked.get(key) == seen.error:
            return
        info = _INFO[kind]
        ev = RecordEvent(id=f"invalid|{kind}|{ns}|{name}|{seen.uid}", cluster=self.cluster, writer="watcher",
                         involved=ObjectReference(api_version=info.api_version, kind=info.kind, namespace=ns,
                                                  name=name, uid=seen.uid),
                         event_type="Warning", reason=INVALID_SPEC, message=seen.error, at=now)
        try:
            applied, _reason = await self.events.record_note(ev)
        except (BadRequest, Forbidden) as e:
            self.log.warning("event refused", kind=kind, name=name, error=str(e))
            applied = False
        self._marked[key] = seen.error
        self.written += applied

    async def _patch(self, write: Write) -> bool | None:
        """True once written, False when the object moved or went meanwhile, None when refused."""
        try:
            await self.client.patch(write.kind, write.namespace or None, write.name, write.patch,
                                    patch_type=write.patch_type, subresource=write.subresource)
        except (Conflict, NotFound):
            return False
        except (BadRequest, Forbidden) as e:  # the server will not take it: retrying would not change that
            self.log.warning("status write refused", kind=write.kind, name=write.name, error=str(e))
            return None
        self.written += 1
        self.log.info("status written", kind=write.kind, namespace=write.namespace, name=write.name, why=write.why)
        return True
