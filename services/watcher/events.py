"""RecordEvent commands -> core/v1 Events in the cluster (core/events.py decides what to write)."""

from __future__ import annotations

from collections import OrderedDict

from kq.api.events import Event
from kq.api.registry import decode_object
from kq.clock import Clock
from kq.kube import Conflict, KubeClient, NotFound
from kq.messages import RecordEvent
from services.watcher.apply import apply_raw, read
from services.watcher.core.events import EventBudget, event_name, event_namespace, plan_event
from services.watcher.core.writes import Skip
from services.watcher.mirror import head_decoder


class EventWriter:
    """One per cluster. The budget lives in memory: after a restart an object may get a fresh burst."""

    def __init__(self, client: KubeClient, instance: str, clock: Clock, budget: EventBudget | None = None,
                 max_attempts: int = 5, known_max: int = 8192) -> None:
        self.client = client
        self.instance = instance
        self.clock = clock
        self.budget = budget or EventBudget()
        self.max_attempts = max_attempts
        # The Events this writer wrote last, as the server returned them: most events are new, so
        # reading each one before creating it was a wasted GET. A stale or missing entry costs a
        # conflict (AlreadyExists or resourceVersion) and then the read, as before.
        # Kept as the server's JSON, decoded only when the same Event comes again (most never do).
        self._known: OrderedDict[tuple[str, str], Event | bytes] = OrderedDict()
        self._known_max = known_max

    async def record(self, cmd: RecordEvent) -> tuple[bool, str, str]:
        """(applied, outcome reason, the Event's resourceVersion). Kubernetes errors other than a
        conflict propagate (the command executor maps them to retries or refusals).

        Most events are new: create first and read only when the Event exists already (a repeat
        to count, or this command redelivered), one API call instead of a read and a create."""
        applied, reason, rv, written = await self._record(cmd)
        if written is not None:
            rv = head_decoder.decode(written).metadata.resource_version
        return applied, reason, rv

    async def record_note(self, cmd: RecordEvent) -> tuple[bool, str]:
        """As `record`, for a caller that has no use for the resourceVersion (a command's Events,
        two an admission): the server's answer is kept as bytes, not decoded."""
        applied, reason, _, _ = await self._record(cmd)
        return applied, reason

    async def _record(self, cmd: RecordEvent) -> tuple[bool, str, str, bytes | None]:
        """(applied, reason, the resourceVersion of the Event found, the Event written if any)."""
        ns, name = event_namespace(cmd), event_name(cmd)
        known = self._known.get((ns, name))  # None when unknown: create first
        existing: Event | None = decode_object("event", known) if isinstance(known, bytes) else known
        ref = cmd.involved
        budgeted = False  # one token per occurrence, however many attempts it takes
        for _ in range(self.max_attempts):
            plan = plan_event(cmd, existing, self.instance, name)
            rv = existing.metadata.resource_version or "" if existing is not None else ""
            if isinstance(plan, Skip):
                return True, plan.reason, rv, None
            if not budgeted:
                if not self.budget.allow((ref.kind, ref.namespace, ref.name, ref.uid), self.clock.monotonic()):
                    return False, "RateLimited", rv, None
                budgeted = True
            try:
                written = await apply_raw(self.client, plan)
                if written is None:
                    return True, "", "", None
                self._remember(ns, name, written)
                return True, "", "", written
            except (Conflict, NotFound):  # it exists (AlreadyExists), was counted meanwhile, or is gone
                existing = await read(self.client, "event", ns, name)
        return False, "Rejected", "", None

    def _remember(self, ns: str, name: str, ev: Event | bytes) -> None:
        self._known[(ns, name)] = ev
        self._known.move_to_end((ns, name))
        while len(self._known) > self._known_max:
            self._known.popitem(last=False)
