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
from kq.clock import Clock
from kq.mirror import MirrorRecordError, decode_marker, decode_record
from kq.placement import (
    HoldRecord,
    PlacementHeld,
    SolveReply,
    SolveRequest,
    encoder,
    hold_decoder,
    hold_subject,
    request_decoder,
)
from kq.runtime import Delivery, PermanentError
from services.tas.world import BASE_KINDS, LATE_KINDS, NEEDED_KINDS, World

__all__ = ["BASE_KINDS", "LATE_KINDS", "NEEDED_KINDS", "SolverInputs", "caught_up", "decode_request", "solve",
           "record_hold"]

_SYNC_PREFIX = f"{subjects.PREFIX}.sync."
MSG_ID_HEADER = "Nats-Msg-Id"


class SolverInputs:
    def __init__(self, clusters: tuple[str, ...], *, hold_ttl_s: float) -> None:
        self.worlds = {c: World(c, hold_ttl_s=hold_ttl_s) for c in clusters}
        self.synced = asyncio.Event()  # every world saw the sync marker of every kind but LATE_KINDS
        self.workloads_synced = asyncio.Event()  # ... and of LATE_KINDS (Pods, Workloads) once they are followed
        self.wants_workloads = asyncio.Event()  # some world has a flavor naming a Topology
        self.workloads_applied = asyncio.Event()  # set after each Workload record (solve requests wait on it)

    def _world(self, cluster: str, subject: str) -> World | None:
        return self.worlds.get(cluster)

    async def on_object(self, d: Delivery) -> None:
        try:
            if d.subject.startswith(_SYNC_PREFIX):
                marker = decode_marker(d.subject, d.data)
                if (w := self.worlds.get(marker.cluster)) is not None:
                    w.apply_marker(marker.kind)
                if not self.synced.is_set() and all(not w.missing_kinds(BASE_KINDS) for w in self.worlds.values()):
                    self.synced.set()
                if not self.workloads_synced.is_set() and all(not w.missing_kinds() for w in self.worlds.values()):
                    self.workloads_synced.set()
                return
            rec = decode_record(d.subject, d.headers, d.data)
        except MirrorRecordError as e:
            raise PermanentError(f"{d.subject} (seq {d.stream_seq}): {e}") from None
        if (w := self.worlds.get(rec.cluster)) is not None:
            try:
                w.apply_record(rec, d.stream_seq)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise PermanentError(f"{d.subject} (seq {d.stream_seq}): {e}") from None
            if rec.kind == "workload":
                self.workloads_applied.set()
            elif rec.kind == "resourceflavor" and not self.wants_workloads.is_set() and w.wants_workloads():
                self.wants_workloads.set()

    async def on_hold(self, d: Delivery) -> None:
        try:
            rec: HoldRecord = hold_decoder.decode(d.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise PermanentError(f"{d.subject} (seq {d.stream_seq}): not a hold record: {e}") from None
        if (w := self.worlds.get(rec.cluster)) is not None:
            w.apply_hold(rec)


def decode_request(data: bytes) -> SolveRequest | SolveReply:
    """The request, or the reply that says why it is not one."""
    try:
        return request_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        return SolveReply(request_id="", placed=False, reason="InvalidRequest", message=f"not a solve request: {e}")


async def caught_up(inputs: SolverInputs, req: SolveRequest, clock: Clock, timeout_s: float) -> bool:
    """Wait (at most `timeout_s`) until the solver's view of Workloads is as new as the asker's
    (SolveRequest.as_of). False when it is still behind: answered anyway, from the older view."""
    world = inputs.worlds.get(req.cluster)
    if world is None or not world.behind(req):
        return True
    deadline = clock.monotonic() + timeout_s
    while world.behind(req):
        left = deadline - clock.monotonic()
        if left <= 0:
            return False
        inputs.workloads_applied.clear()
        await clock.wait(inputs.workloads_applied, left)
    return True


def solve(inputs: SolverInputs, data: bytes | SolveRequest | SolveReply,
          now: float) -> tuple[bytes, PlacementHeld | None]:
    """Solve one request (synchronously, so each request sees the holds of the one before);
    `data` as received or already decoded (a SolveReply: it was not a request)."""
    req = decode_request(data) if isinstance(data, bytes) else data
    if isinstance(req, SolveReply):
        return encoder.encode(req), None
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
