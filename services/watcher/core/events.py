"""RecordEvent -> a core/v1 Event, the way client-go's recorder writes one. Pure.

Aggregation: an event repeating one already recorded (same object, type, reason and message) is
counted on that Event (count + 1, lastTimestamp) rather than written again, as client-go's
EventCorrelator does; the Event's name is derived from those fields, so the same decision
redelivered finds its own Event. Rate limit: a token bucket per object (client-go's
EventSourceObjectSpamFilter: a burst of 25, then one every 5 minutes); an event over the limit
is dropped (RateLimited), as client-go drops it.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import msgspec

from kq.api.events import Event, EventSource
from kq.api.meta import ObjectMeta
from kq.messages import RecordEvent
from services.watcher.core.writes import Create, Skip, Write, patch_write

COMPONENT = "kq-watcher"  # Event.source.component / reportingComponent (Kueue: "kueue-admission")
MAX_MESSAGE = 1024  # Kueue's api.TruncateEventMessage


def event_namespace(cmd: RecordEvent) -> str:
    """Events of cluster-scoped objects go to "default", as client-go puts them."""
    return cmd.involved.namespace or "default"


def event_name(cmd: RecordEvent) -> str:
    """Deterministic per (object, type, reason, message): the aggregation key."""
    ref = cmd.involved
    digest = hashlib.sha256("\x00".join((ref.uid, ref.kind, cmd.event_type, cmd.reason,
                                         truncate(cmd.message))).encode()).hexdigest()[:16]
    return f"{ref.name[:200]}.{digest}"


def truncate(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def plan_event(cmd: RecordEvent, existing: Event | None, instance: str,
               name: str | None = None) -> Create | Write | Skip:
    """Create the Event, or count this occurrence on the one already there. A redelivered command
    whose occurrence is already counted (lastTimestamp not before its time) writes nothing.
    `name`: event_name(cmd), when the caller has it already (a hash per event)."""
    if existing is None:
        ev = Event(
            api_version="v1", kind="Event",
            metadata=ObjectMeta(name=name or event_name(cmd), namespace=event_namespace(cmd)),
            involved_object=cmd.involved, reason=cmd.reason, message=truncate(cmd.message), type=cmd.event_type,
            count=1, first_timestamp=cmd.at, last_timestamp=cmd.at, source=EventSource(component=COMPONENT),
            action=cmd.action, reporting_component=COMPONENT, reporting_instance=instance,
        )
        return Create(kind="event", namespace=ev.metadata.namespace or "", name=ev.metadata.name or "",
                      body=msgspec.json.encode(ev), why=f"{cmd.reason} on {cmd.involved.kind} {cmd.involved.name}")
    if existing.last_timestamp is not None and existing.last_timestamp >= cmd.at:
        return Skip(reason="AlreadyApplied")
    wanted = msgspec.structs.replace(existing, count=max(existing.count, 1) + 1, last_timestamp=cmd.at)
    write = patch_write("event", existing, wanted, status=False, why=f"{cmd.reason} again")
    return write if write is not None else Skip(reason="AlreadyApplied")


class EventBudget:
    """Token buckets per object key; `now` in seconds on the caller's clock.

    A bucket that has refilled is the same as none, so full ones are dropped whenever the table
    has doubled since the last sweep: the table holds the objects with events in the last
    burst x refill_s, not every object that ever had one (keys carry the uid: churn never repeats)."""

    _FIRST_SWEEP = 1024

    def __init__(self, burst: int = 25, refill_s: float = 300.0) -> None:
        self.burst = burst
        self.refill_s = refill_s
        self._buckets: dict[Any, tuple[float, float]] = {}  # key -> (tokens, as of)
        self._sweep_at = self._FIRST_SWEEP

    def __len__(self) -> int:
        return len(self._buckets)

    def _tokens(self, tokens: float, since: float, now: float) -> float:
        return min(float(self.burst), tokens + (now - since) / self.refill_s if self.refill_s > 0 else math.inf)

    def allow(self, key: Any, now: float) -> bool:
        if len(self._buckets) >= self._sweep_at:
            self._sweep(now)
        tokens, since = self._buckets.get(key, (float(self.burst), now))
        tokens = self._tokens(tokens, since, now)
        if tokens < 1.0:
            self._buckets[key] = (tokens, now)
            return False
        self._buckets[key] = (tokens - 1.0, now)
        return True

    def _sweep(self, now: float) -> None:
        self._buckets = {k: v for k, v in self._buckets.items() if self._tokens(v[0], v[1], now) < self.burst}
        self._sweep_at = max(self._FIRST_SWEEP, 2 * len(self._buckets))  # amortised: O(1) per call
