"""Backpressure on queue status writes (services/admission/plan/status_pacer.py): one write in flight
per queue, a bound on all of them, the newest status of a queue replacing its held one; and a
partition that holds them until outcomes come back."""

from __future__ import annotations

from test_admission_plan import NOW, outcome, workload, world

from kq.messages import SetWorkloadPending
from services.admission.core.model import SchedulerConfig
from services.admission.plan.outputs import Action, Outgoing, Outputs, Sent, command_id
from services.admission.plan.partition import Partition
from services.admission.plan.status_pacer import LOST_AFTER_S, StatusPacer

C = "c1"


def _batch(*decisions: tuple[Action, str, int]) -> Outputs:
    """(action, target, n) as commands; the message is a stand-in (the pacer reads only what it is for)."""
    commands, sent = [], {}
    for action, target, n in decisions:
        cid = command_id(action, 4, C, target, f"status:{n}")
        msg = SetWorkloadPending(id=cid, cluster=C, writer="admission", epoch=4, namespace="ns", name="x", uid="u",
                                 reason="Pending", message=str(n))
        commands.append(Outgoing("subject", msg, cid))
        sent[cid] = Sent(action, target)
    return Outputs(commands, [], sent)


def _ids(out: Outputs) -> list[str]:
    assert set(out.sent) == {o.msg_id for o in out.commands}
    return [f"{out.sent[o.msg_id].action}:{out.sent[o.msg_id].target}:{o.msg_id.rsplit(':', 1)[1]}"
            for o in out.commands]


def test_one_status_write_in_flight_per_queue_the_newest_replacing_the_held_one() -> None:
    pacer = StatusPacer(max_in_flight=8)
    assert _ids(pacer.pace(_batch(("cqstatus", "a", 1), ("lqstatus", "ns/a", 1)), NOW)) == ["cqstatus:a:1", "lqstatus:ns/a:1"]
    assert _ids(pacer.pace(_batch(("cqstatus", "a", 2), ("cqstatus", "b", 2)), NOW)) == ["cqstatus:b:2"]
    assert _ids(pacer.pace(_batch(("cqstatus", "a", 3)), NOW)) == []  # still in flight: the newer one is held
    assert not pacer.has_ready()
    pacer.settled(Sent("cqstatus", "a"))
    assert pacer.has_ready()
    assert _ids(pacer.pace(_batch(), NOW)) == ["cqstatus:a:3"]  # only the newest of the held ones
    assert not pacer.held and not pacer.has_ready()


def test_status_writes_past_the_bound_wait_oldest_first_and_workload_commands_never_wait() -> None:
    pacer = StatusPacer(max_in_flight=2)
    out = pacer.pace(_batch(("cqstatus", "a", 1), ("reserve", "ns/w", 1), ("cqstatus", "b", 1), ("cqstatus", "c", 1),
                            ("cqstatus", "d", 1)), NOW)
    assert _ids(out) == ["reserve:ns/w:1", "cqstatus:a:1", "cqstatus:b:1"]
    assert _ids(pacer.pace(_batch(("cqstatus", "c", 2), ("evict", "ns/v", 2)), NOW)) == ["evict:ns/v:2"]
    pacer.settled(Sent("cqstatus", "b"))
    assert _ids(pacer.pace(_batch(), NOW)) == ["cqstatus:c:2"]  # c waited longest (its newest status), then d
    pacer.settled(Sent("cqstatus", "a"))
    pacer.settled(Sent("cqstatus", "c"))
    assert _ids(pacer.pace(_batch(), NOW)) == ["cqstatus:d:1"]


def test_a_status_write_whose_outcome_never_comes_stops_holding_its_queue() -> None:
    pacer = StatusPacer(max_in_flight=8)
    assert _ids(pacer.pace(_batch(("cqstatus", "a", 1)), NOW)) == ["cqstatus:a:1"]
    assert _ids(pacer.pace(_batch(("cqstatus", "a", 2)), NOW + 1)) == []
    assert pacer.next_due() == NOW + LOST_AFTER_S
    assert _ids(pacer.pace(_batch(), NOW + LOST_AFTER_S - 0.1)) == []
    assert _ids(pacer.pace(_batch(), NOW + LOST_AFTER_S)) == ["cqstatus:a:2"]


def test_without_a_bound_status_writes_are_not_held() -> None:
    pacer = StatusPacer(None)
    batch = _batch(("cqstatus", "a", 1), ("cqstatus", "a", 2))
    assert pacer.pace(batch, NOW) == batch and not pacer.has_ready()


def _status_ids(p: Partition, now: float) -> tuple[list[str], list[str]]:
    """Plan one cycle: (all command ids sent, the queue status ids among them)."""
    out, errors = p.plan([p.cycle(now)], now)
    assert errors == []
    ids = [o.msg_id for o in out.commands]
    return ids, [i for i in ids if p.inflight[i].action in ("cqstatus", "lqstatus")]


def test_a_partition_holds_a_queue_status_until_the_previous_one_came_back() -> None:
    p = Partition(C, 7, SchedulerConfig(), status_in_flight=8)
    for rec in world():
        p.apply_record(rec)
    p.mark_rebuilt()
    _, first = _status_ids(p, NOW)
    assert sorted(first) == [command_id("cqstatus", 7, C, "cq", "status:1"),
                             command_id("lqstatus", 7, C, "demo/lq", "status:1")]
    p.apply_record(workload("a", "10", cpu="1"))
    ids, statuses = _status_ids(p, NOW + 1)
    assert len(ids) == 1 and statuses == []  # the admission goes out; the queues' new statuses are held
    assert not p.has_due(NOW + 1)
    cq_first = next(i for i in first if i.startswith("cqstatus"))
    assert p.on_outcome(outcome(cq_first, 7, True))  # the ClusterQueue's held status can go now
    assert p.has_due(NOW + 1)
    out, _ = p.plan([], NOW + 1)
    assert [o.msg_id for o in out.commands] == [command_id("cqstatus", 7, C, "cq", "status:2")]
    lq_first = next(i for i in first if i.startswith("lqstatus"))
    assert p.on_outcome(outcome(lq_first, 7, False, "NotFound"))  # refused or not, the next may go
    out, _ = p.plan([], NOW + 1)
    assert [o.msg_id for o in out.commands] == [command_id("lqstatus", 7, C, "demo/lq", "status:2")]
    assert not p.has_due(NOW + 1)
