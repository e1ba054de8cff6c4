"""The mirror publisher's pipelined rounds, against a real nats-server: a record is stored while an
earlier round still awaits its acks, yet an object's states and a SyncMarker keep their order."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from nats.js.errors import NotFoundError
from support.wait import eventually

from kq import subjects
from kq.mirror import SyncMarker, decode_record
from kq.runtime import Bus
from services.watcher.mirror import Key, MirrorPublisher, Record

pytestmark = pytest.mark.timeout(60)
C = "c1"


class HeldPublisher(MirrorPublisher):
    """The real publisher; a round holding a held object's state is not sent until released."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.held: set[str] = set()
        self.release = asyncio.Event()
        self.sent: list[list[tuple[str, str]]] = []  # (name, resourceVersion) of each round, as started

    async def _publish_records(self, run: dict[Key, Record]) -> None:
        self.sent.append([(r.name, r.resource_version) for r in run.values()])
        if any(r.name in self.held for r in run.values()):
            await self.release.wait()
        await super()._publish_records(run)


def flavor(name: str, rv: str) -> Record:
    raw = b'{"metadata":{"name":"%s","uid":"u-%s","resourceVersion":"%s"}}' % (name.encode(), name.encode(), rv.encode())
    return Record("resourceflavor", "", name, f"u-{name}", rv, False, raw)


async def stored_rv(bus: Bus, name: str) -> str | None:
    subject = subjects.object_subject(C, "resourceflavor", None, name)
    try:
        msg = await bus.js.get_msg(subjects.OBJECTS_STREAM, subject=subject, direct=True)
    except NotFoundError:
        return None
    return decode_record(subject, msg.headers, msg.data or b"").resource_version


@contextlib.asynccontextmanager
async def publishing(pub: MirrorPublisher):
    task = asyncio.create_task(pub.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_record_is_stored_while_an_earlier_round_awaits_its_acks(bus: Bus) -> None:
    pub = HeldPublisher(bus, C, batch=512, queue_size=100, rounds=4)
    pub.held.add("slow")
    async with publishing(pub):
        await pub.put(flavor("slow", "1"))
        await eventually(lambda: pub.sent, what="the first round started")
        await pub.put(flavor("finish", "2"))  # e.g. a Workload's finish, which frees quota
        assert await eventually(lambda: stored_rv(bus, "finish"), timeout=10) == "2"
        assert await stored_rv(bus, "slow") is None  # its round is still held
        pub.release.set()
        assert await eventually(lambda: stored_rv(bus, "slow"), timeout=10) == "1"


async def test_an_object_in_flight_and_a_marker_wait_for_the_round_before_them(bus: Bus) -> None:
    pub = HeldPublisher(bus, C, batch=512, queue_size=100, rounds=4)
    pub.held.add("a")
    async with publishing(pub):
        await pub.put(flavor("a", "1"))
        await eventually(lambda: pub.sent, what="the first round started")
        await pub.put(flavor("a", "3"))  # the same object: must not overtake its older state
        await pub.put(SyncMarker(cluster=C, kind="resourceflavor", resource_version="3", count=1))
        # taken from the queue and held back (not sent) while its older state awaits its acks
        await eventually(lambda: pub.pending() == 0 and any(key[2] == "a" for key in pub._held),
                         what="the newer state held")
        assert pub.sent == [[("a", "1")]]
        assert "resourceflavor" not in pub.synced
        pub.release.set()
        await eventually(lambda: "resourceflavor" in pub.synced, timeout=10, what="the marker")
        assert pub.sent == [[("a", "1")], [("a", "3")]]
        assert await stored_rv(bus, "a") == "3"


async def test_only_the_object_in_flight_waits_not_the_rest_of_its_round(bus: Bus) -> None:
    pub = HeldPublisher(bus, C, batch=512, queue_size=100, rounds=4)
    pub.held.add("a")
    async with publishing(pub):
        await pub.put(flavor("a", "1"))
        await eventually(lambda: pub.sent, what="the first round started")
        await pub.put(flavor("a", "2"))
        await pub.put(flavor("b", "3"))  # came after a's newer state, which waits: b need not
        assert await eventually(lambda: stored_rv(bus, "b"), timeout=10) == "3"
        assert pub.sent == [[("a", "1")], [("b", "3")]]
        pub.release.set()
        await eventually(lambda: pub.sent == [[("a", "1")], [("b", "3")], [("a", "2")]], timeout=10,
                         what="a's newer state once its older one is stored")

        async def a_is_2() -> bool:
            return await stored_rv(bus, "a") == "2"

        await eventually(a_is_2, timeout=10, what="a's newer state stored")


@pytest.mark.parametrize("turns", range(6))
async def test_a_publisher_waiting_with_a_held_state_stops_when_cancelled(bus: Bus, turns: int) -> None:
    # Found stuck in a test's teardown: cancelled in the loop turns between its round's acks and
    # its Queue.get being cancelled, the publisher swallowed its own cancellation and waited for ever.
    pub = HeldPublisher(bus, C, batch=512, queue_size=100, rounds=4)
    pub.held.add("a")
    task = asyncio.create_task(pub.run())
    try:
        await pub.put(flavor("a", "1"))
        await eventually(lambda: pub.sent, what="the first round started")
        await pub.put(flavor("a", "2"))
        await eventually(lambda: pub.pending() == 0 and any(key[2] == "a" for key in pub._held),
                         what="the newer state held")
        (round_,) = pub._in_flight
        pub.release.set()
        await asyncio.wait({round_})
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=5)
        assert task in done and task.cancelled(), "the publisher did not stop when cancelled"
    finally:
        task.cancel()


def test_rounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="rounds"):
        MirrorPublisher(None, C, batch=1, queue_size=1, rounds=0)  # type: ignore[arg-type]
