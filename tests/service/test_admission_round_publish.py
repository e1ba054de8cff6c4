"""Admission's round publishing on a real nats-server: a round's commands are stored when `publish`
returns, its audit events go after them without holding up the next round, in order."""

from __future__ import annotations

import msgspec
import pytest

from kq import subjects
from kq.runtime import Bus
from services.admission.handlers import RoundPublisher
from services.admission.plan.outputs import Outgoing, fence_command

pytestmark = pytest.mark.timeout(30)


class Note(msgspec.Struct, frozen=True):
    text: str


def _event(subject: str, text: str) -> Outgoing:
    return Outgoing(subject, Note(text), f"note:{subject}:{text}")


async def _stored(bus: Bus, stream: str, subject: str) -> list[bytes]:
    out: list[bytes] = []
    seq = 0
    while True:
        try:
            m = await bus.js.get_msg(stream, seq=seq + 1, subject=subject, next=True)
        except Exception:
            return out
        out.append(m.data or b"")
        seq = m.seq or 0


async def test_commands_are_stored_on_return_and_events_follow_in_round_order(bus: Bus) -> None:
    woken: list[bool] = []
    rounds = RoundPublisher(bus, lambda: woken.append(True))
    evt = subjects.event_subject("c1", "workload", "ns", "w")
    cmd = fence_command("c1", 1)
    await rounds.publish([cmd], [_event(evt, "first")])
    assert await _stored(bus, subjects.COMMANDS_STREAM, cmd.subject) != []
    await rounds.publish([], [_event(evt, "second")])
    await rounds.flush()
    texts = [msgspec.json.decode(raw, type=Note).text for raw in await _stored(bus, subjects.EVENTS_STREAM, evt)]
    assert texts == ["first", "second"]
    assert rounds.failed() is None and woken == []


async def test_a_failed_event_publish_does_not_fail_the_round_but_the_next(bus: Bus) -> None:
    """The round that sent the events returns with its commands stored; the failure wakes the decide
    loop (on_done), shows in failed(), and is raised by the next publish of events."""
    bus.publish_retry_s = 0.2  # no stream will ever answer: give up soon
    woken: list[bool] = []
    rounds = RoundPublisher(bus, lambda: woken.append(True))
    cmd = fence_command("c1", 1)
    await rounds.publish([cmd], [_event("kqtest.no-stream.x", "lost")])  # no stream stores it
    assert await _stored(bus, subjects.COMMANDS_STREAM, cmd.subject) != []
    with pytest.raises(Exception):  # noqa: B017 - whatever the bus raised (no responders)
        await rounds.flush()
    assert woken == [True]
    rounds2 = RoundPublisher(bus, lambda: None)
    await rounds2.publish([], [_event("kqtest.no-stream.y", "lost")])
    with pytest.raises(Exception):  # noqa: B017
        await rounds2.publish([], [_event(subjects.event_subject("c1", "workload", "ns", "w"), "next")])
