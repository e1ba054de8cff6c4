"""Bus deliveries -> the solver's world per cluster, and solve requests -> held placements + replies.

No placement logic here: records are decoded and handed to services/tas/world.py (which feeds
the pure core); a solve request is answered by the core, its hold recorded on the bus
(PlacementHeld, deterministic msg id) and only then replied to.
"""

from __future__ import annotations

import asyncio

import msgspec
from nats.js import JetStreamContext

from kq import subjects
from kq.mirror import MirrorRecordError, decode_marker, decode_record
from kq.placement import (
    HoldRecord,
    PlacementHeld,
    SolveReply,
    encoder,
    hold_decoder,
    hold_subject,
    request_decoder,
)
from kq.runtime import Delivery, PermanentError
from services.tas.world import NEEDED_KINDS, World

__all__ = ["NEEDED_KINDS", "SolverInputs", "solve", "record_hold"]

_SYNC_PREFIX = f"{subjects.PREFIX}.sync."
MSG_ID_HEADER = "Nats-Msg-Id"


class SolverInputs:
    def __init__(self, clusters: tuple[str, ...], *, hold_ttl_s: float) -> None:
        self.worlds = {c: World(c, hold_ttl_s=hold_ttl_s) for c in clusters}
        self.synced = asyncio.Event()

    def _world(self, cluster: str, subject: str) -> World | None:
        return self.worlds.get(cluster)

    async def on_object(self, d: Delivery) -> None:
        try:
            if d.subject.startswith(_SYNC_PREFIX):
                marker = decode_marker(d.subject, d.data)
                if (w := self.worlds.get(marker.cluster)) is not None:
                    w.apply_marker(marker.kind)
                if not self.synced.is_set() and all(not w.missing_kinds() for w in self.worlds.values()):
                    self.synced.set()
                return
            rec = decode_record(d.subject, d.headers, d.data)
        except MirrorRecordError as e:
            raise PermanentError(f"{d.subject} (seq {d.stream_seq}): {e}") from None
        if (w := self.worlds.get(rec.cluster)) is not None:
            try:
                w.apply_record(rec)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise PermanentError(f"{d.subject} (seq {d.stream_seq}): {e}") from None

    async def on_hold(self, d: Delivery) -> None:
        try:
            rec: HoldRecord = hold_decoder.decode(d.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise PermanentError(f"{d.subject} (seq {d.stream_seq}): not a hold record: {e}") from None
        if (w := self.worlds.get(rec.cluster)) is not None:
            w.apply_hold(rec)


def solve(inputs: SolverInputs, data: bytes, now: float) -> tuple[bytes, PlacementHeld | None]:
    """Decode and solve at once (synchronously, so each request sees the holds of the one before)."""
    try:
        req = request_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        return encoder.encode(SolveReply(request_id="", placed=False, reason="InvalidRequest",
                                         message=f"not a solve request: {e}")), None
    world = inputs.worlds.get(req.cluster)
    if world is None:
        return encoder.encode(SolveReply(request_id=req.id, placed=False, reason="InvalidRequest",
                                         message=f"cluster {req.cluster!r} is not served by this solver")), None
    reply, hold = world.solve(req, now)
    return encoder.encode(reply), hold


async def record_hold(js: JetStreamContext, hold: PlacementHeld, timeout_s: float) -> None:
    """The hold on the log before the reply: a replacement replica rebuilds it (deduplicated by id)."""
    await js.publish(hold_subject(hold.cluster, hold.namespace, hold.name), encoder.encode(hold),
                     headers={MSG_ID_HEADER: f"hold.{hold.request_id}"}, timeout=timeout_s)
