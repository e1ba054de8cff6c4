"""A lease whose two storage calls (`_last`, `_write`) use an in-memory key with revisions, for
timing tests on kq.clock's FakeClock; the real KV bucket is tested in tests/service/test_runtime_lease.py."""

from __future__ import annotations

import nats.errors

from kq.clock import FakeClock
from kq.obs import get_logger
from kq.runtime.lease import Lease, LeaseValue


class Key:
    """One KV key: its last revision and value; `fail` makes writes time out (outcome unknown)."""

    def __init__(self) -> None:
        self.rev = 0
        self.value: LeaseValue | None = None
        self.writes = 0
        self.fail = False


class _Stream:
    """The one publish `release` sends: a delete marker, written only at the expected revision."""

    def __init__(self, key: Key) -> None:
        self.key = key

    async def publish(self, subject: str, payload: bytes, headers: dict[str, str]) -> None:
        if int(headers["Nats-Expected-Last-Subject-Sequence"]) == self.key.rev:
            self.key.rev += 1
            self.key.value = None


class _Bus:
    def __init__(self, clock: FakeClock, key: Key) -> None:
        self.clock = clock
        self.js = _Stream(key)
        self.log = get_logger("test.lease")


class InMemoryLease(Lease):
    def __init__(self, key: Key, clock: FakeClock, holder: str, ttl: int = 9, **kw: float) -> None:
        super().__init__(_Bus(clock, key), "admission", "p", holder, ttl=ttl, clock=clock, **kw)  # type: ignore[arg-type]  # a fake bus: the lease reads only its clock and log and releases through js
        self.kv = key

    async def _last(self) -> tuple[int, LeaseValue | None]:
        return self.kv.rev, self.kv.value

    async def _written_since(self, revision: int) -> str | None:
        return None if self.kv.rev == revision else "written since"  # no history kept: any later revision refuses

    async def _write(self, expected: int, epoch: int) -> int | None:
        if self.kv.fail:
            raise nats.errors.TimeoutError
        if expected != self.kv.rev:
            return None
        self.kv.rev += 1
        self.kv.writes += 1
        self.kv.value = LeaseValue(holder=self.holder, service=self.service, partition=self.partition,
                                   epoch=epoch or self.kv.rev, renewed_at="")
        return self.kv.rev
