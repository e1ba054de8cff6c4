"""What sharded admission replicas tell each other, in the KQ_LEASES KV bucket (beside the leases).

- `admission-replica.<instance>`: a replica's heartbeat, rewritten every ttl/3 with a per-message
  TTL, so a replica that stopped (or was killed) drops out of the count within `replica_ttl_s`.
- `admission-position.<slot>`: how far a slot's term has decided: every decision it took on the
  mirror up to that KQ_OBJECTS sequence is published (see handover.py). Rewritten while the term
  runs; kept (up to the bucket's max age, 300 s) after it ends, since what it says stays true.

The values are small JSON documents; nothing reads meaning out of the keys but the slot number.
"""

from __future__ import annotations

import msgspec
from nats.js.errors import NotFoundError

from kq import subjects
from kq.runtime import Bus
from kq.runtime.streams import LEASE_PREFIX, LEASE_STREAM

_REPLICA = "admission-replica"
_POSITION = "admission-position"
_KV_OP = "KV-Operation"


class Heartbeat(msgspec.Struct, frozen=True, kw_only=True):
    instance: str
    holder: str
    slots: tuple[int, ...]  # held when written (for `kq status` and logs; the leases are the truth)


class Position(msgspec.Struct, frozen=True, kw_only=True):
    slot: int
    epoch: int
    seq: int  # KQ_OBJECTS sequence


_heartbeat = msgspec.json.Decoder(Heartbeat)
_position = msgspec.json.Decoder(Position)
_encode = msgspec.json.encode


def _subject(service: str, partition: str) -> str:
    return LEASE_PREFIX + subjects.lease_key(service, partition)


class Board:
    def __init__(self, bus: Bus, replica_ttl_s: int) -> None:
        self.bus = bus
        self.replica_ttl_s = replica_ttl_s

    async def announce(self, beat: Heartbeat) -> None:
        await self.bus.js.publish(_subject(_REPLICA, beat.instance), _encode(beat),
                                  headers={"Nats-TTL": f"{self.replica_ttl_s}s"})

    async def withdraw(self, instance: str) -> None:
        """A replica that stops says so, so the others rebalance without waiting for the TTL."""
        await self.bus.js.publish(_subject(_REPLICA, instance), b"", headers={_KV_OP: "DEL"})

    async def replicas(self) -> list[Heartbeat]:
        """The live replicas (heartbeats not yet expired), walking the replica keys in order."""
        pattern = LEASE_PREFIX + f"{subjects.escape(_REPLICA)}.>"
        out: list[Heartbeat] = []
        seq = 1
        while True:
            try:
                raw = await self.bus.js.get_msg(LEASE_STREAM, seq=seq, subject=pattern, next=True, direct=True)
            except NotFoundError:
                return out
            seq = int(raw.seq or seq) + 1
            if raw.data and (raw.headers or {}).get(_KV_OP) not in ("DEL", "PURGE"):
                try:
                    out.append(_heartbeat.decode(raw.data))
                except msgspec.DecodeError:
                    continue

    async def report(self, pos: Position) -> None:
        await self.bus.js.publish(_subject(_POSITION, str(pos.slot)), _encode(pos))

    async def position(self, slot: int) -> Position | None:
        try:
            raw = await self.bus.js.get_msg(LEASE_STREAM, subject=_subject(_POSITION, str(slot)), direct=True)
        except NotFoundError:
            return None
        if not raw.data:
            return None
        try:
            return _position.decode(raw.data)
        except msgspec.DecodeError:
            return None
