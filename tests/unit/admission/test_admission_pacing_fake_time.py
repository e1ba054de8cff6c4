"""Pacing of pending conditions on fake time: a loop shaped like the leader term's (pace what the
core decided at `clock.now()`, then wait on the clock until the next held write is due or input
comes) sends each workload's pending condition at most once per interval, the newest held one
exactly when due. No real time passes."""

from __future__ import annotations

import asyncio

import pytest

from kq import subjects
from kq.clock import FakeClock
from kq.messages import SetWorkloadPending
from services.admission.plan.outputs import Outgoing, Outputs, Sent, command_id
from services.admission.plan.pending_pacer import PendingPacer

pytestmark = pytest.mark.timeout(10)
C = "c1"
INTERVAL = 0.25


def pending(key: str, n: int) -> Outputs:
    cid = command_id("pending", 4, C, key, f"pending:{n}")
    ns, name = key.split("/")
    msg = SetWorkloadPending(id=cid, cluster=C, writer="admission", epoch=4, namespace=ns, name=name, uid="u",
                             reason="Pending", message=str(n))
    return Outputs([Outgoing(subjects.command_subject(C, "workload", "admission"), msg, cid)], [], {cid: Sent("pending", key)})


class TermLoop:
    """Pace at the clock's time, publish (record), wait for input or the next due write."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.t0 = clock.now()
        self.pacer = PendingPacer(INTERVAL)
        self.inbox: list[Outputs] = []
        self.changed = asyncio.Event()
        self.sent: list[tuple[float, str]] = []

    def decide(self, outputs: Outputs) -> None:
        self.inbox.append(outputs)
        self.changed.set()

    async def run(self) -> None:
        while True:
            self.changed.clear()
            batch = self.inbox.pop(0) if self.inbox else Outputs([], [], {})
            for o in self.pacer.pace(batch, self.clock.now()).commands:
                assert isinstance(o.message, SetWorkloadPending), o  # the inbox holds only pending conditions
                self.sent.append((round(self.clock.now() - self.t0, 3), f"{o.message.name}:{o.message.message}"))
            if self.inbox:
                continue
            due = self.pacer.next_due()
            await self.clock.wait(self.changed, None if due is None else max(0.0, due - self.clock.now()))


async def test_pending_conditions_go_out_at_most_once_per_interval_on_fake_time() -> None:
    clock = FakeClock()
    term = TermLoop(clock)
    task = asyncio.create_task(term.run())
    try:
        term.decide(pending("ns/a", 1))
        await clock.settle()
        assert term.sent == [(0.0, "a:1")]  # the first one at once
        await clock.advance(0.1)
        term.decide(pending("ns/a", 2))
        term.decide(pending("ns/b", 1))
        await clock.advance(0.1)
        term.decide(pending("ns/a", 3))  # replaces the held "a:2"
        await clock.advance(0.04)
        assert term.sent == [(0.0, "a:1"), (0.1, "b:1")]
        await clock.advance(0.01)  # t = 0.25: a's interval is over
        assert term.sent == [(0.0, "a:1"), (0.1, "b:1"), (0.25, "a:3")]
        await clock.advance(10)
        assert len(term.sent) == 3 and clock.sleepers == 0  # nothing held: the loop waits for input only
    finally:
        task.cancel()
