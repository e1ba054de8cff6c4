"""Backpressure on queue status writes (services/admission/plan/status_pacer.py): one write in flight
per queue, a bound on all of them, the newest status of a queue replacing its held one; and a
partition that holds them until outcomes come back."""

from __future__ import annotations

from test_admission_plan import NOW, outcome, workload, world

from services.admission.core.decisions import ClusterQueueStatus, CycleResult, LocalQueueStatus
from services.admission.core.model import SchedulerConfig
from services.admission.plan.outputs import Sent, command_id
from services.admission.plan.partition import Partition
from services.admission.plan.status_pacer import LOST_AFTER_S, StatusPacer

C = "c1"


def _cq(name: str, pending: int) -> ClusterQueueStatus:
    return ClusterQueueStatus(name=name, pending_workloads=pending, reserving_workloads=0, admitted_workloads=0,
                              flavors_reservation=(), flavors_usage=(), active=True, active_reason="Ready",
                              active_message="")


def _lq(key: str, pending: int) -> LocalQueueStatus:
    ns, name = key.split("/")
    return LocalQueueStatus(namespace=ns, name=name, pending_workloads=pending, reserving_workloads=0,
                            admitted_workloads=0, flavors_reservation=(), flavors_usage=(), active=True,
                            active_reason="Ready", active_message="")


def _result(*statuses: ClusterQueueStatus | LocalQueueStatus) -> CycleResult:
    return CycleResult(cycle=1, cluster_queues=tuple(s for s in statuses if isinstance(s, ClusterQueueStatus)),
                       local_queues=tuple(s for s in statuses if isinstance(s, LocalQueueStatus)))


def _sent(results: list[CycleResult]) -> list[str]:
    """The statuses the paced results carry, as queue:pending."""
    statuses: list[ClusterQueueStatus | LocalQueueStatus] = [s for r in results for s in r.cluster_queues]
    statuses += [s for r in results for s in r.local_queues]
    return [f"{s.name}:{s.pending_workloads}" for s in statuses]


def test_one_status_write_in_flight_per_queue_the_newest_replacing_the_held_one() -> None:
    pacer = StatusPacer(max_in_flight=8)
    assert _sent(pacer.pace([_result(_cq("a", 1), _lq("ns/a", 1))], NOW)) == ["a:1", "a:1"]
    assert _sent(pacer.pace([_result(_cq("a", 2), _cq("b", 2))], NOW)) == ["b:2"]
    assert _sent(pacer.pace([_result(_cq("a", 3))], NOW)) == []  # still in flight: the newer one is held
    assert not pacer.has_ready()
    pacer.settled(Sent("cqstatus", "a"))
    assert pacer.has_ready()
    assert _sent(pacer.pace([], NOW)) == ["a:3"]  # only the newest of the held ones
    assert not pacer.held and not pacer.has_ready()


def test_status_writes_past_the_bound_wait_oldest_first_and_decisions_never_wait() -> None:
    pacer = StatusPacer(max_in_flight=2)
    first = CycleResult(cycle=3, pending=(), cluster_queues=(_cq("a", 1), _cq("b", 1), _cq("c", 1), _cq("d", 1)))
    out = pacer.pace([first], NOW)
    assert out[0] == CycleResult(cycle=3) and _sent(out) == ["a:1", "b:1"]  # the decisions stay where they were
    assert _sent(pacer.pace([_result(_cq("c", 2))], NOW)) == []
    pacer.settled(Sent("cqstatus", "b"))
    assert _sent(pacer.pace([], NOW)) == ["c:2"]  # c waited longest (its newest status), then d
    pacer.settled(Sent("cqstatus", "a"))
    pacer.settled(Sent("cqstatus", "c"))
    assert _sent(pacer.pace([], NOW)) == ["d:1"]


def test_a_status_write_whose_outcome_never_comes_stops_holding_its_queue() -> None:
    pacer = StatusPacer(max_in_flight=8)
    assert _sent(pacer.pace([_result(_cq("a", 1))], NOW)) == ["a:1"]
    assert _sent(pacer.pace([_result(_cq("a", 2))], NOW + 1)) == []
    assert pacer.next_due() == NOW + LOST_AFTER_S
    assert _sent(pacer.pace([], NOW + LOST_AFTER_S - 0.1)) == []
    assert _sent(pacer.pace([], NOW + LOST_AFTER_S)) == ["a:2"]


def test_without_a_bound_status_writes_are_not_held() -> None:
    pacer = StatusPacer(None)
    results = [_result(_cq("a", 1)), _result(_cq("a", 2))]
    assert pacer.pace(results, NOW) == results and not pacer.has_ready()


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
    assert [o.msg_id for o in out.commands] == [command_id("cqstatus", 7, C, "cq", "status:3")]
    lq_first = next(i for i in first if i.startswith("lqstatus"))
    assert p.on_outcome(outcome(lq_first, 7, False, "NotFound"))  # refused or not, the next may go
    out, _ = p.plan([], NOW + 1)
    assert [o.msg_id for o in out.commands] == [command_id("lqstatus", 7, C, "demo/lq", "status:4")]
    assert not p.has_due(NOW + 1)


def test_while_writes_are_busy_a_status_is_held_a_moment_and_one_back_to_what_was_sent_is_not_written() -> None:
    pacer = StatusPacer(max_in_flight=2, hold_s=0.5)
    assert _sent(pacer.pace([_result(_cq("a", 0), _cq("x", 1))], NOW)) == ["a:0", "x:1"]  # not busy: at once
    pacer.settled(Sent("cqstatus", "a"))
    assert _sent(pacer.pace([_result(_cq("y", 1))], NOW)) == ["y:1"]
    assert _sent(pacer.pace([_result(_cq("a", 1))], NOW + 1)) == []  # two in flight: busy, so a is held ...
    pacer.settled(Sent("cqstatus", "x"))
    pacer.settled(Sent("cqstatus", "y"))
    assert not pacer.has_ready(NOW + 1) and pacer.has_ready(NOW + 1.5) and pacer.next_due() == NOW + 1.5
    assert _sent(pacer.pace([_result(_cq("a", 0))], NOW + 1.2)) == []  # ... and idle again within the hold
    assert not pacer.held and pacer.next_due() is None and _sent(pacer.pace([], NOW + 2)) == []
    assert _sent(pacer.pace([_result(_cq("b", 0))], NOW + 2)) == ["b:0"]
    pacer.settled(Sent("cqstatus", "b"), applied=False)  # refused: what the API holds is not known
    assert _sent(pacer.pace([_result(_cq("b", 0))], NOW + 2)) == ["b:0"]  # so the same status is written again


def test_a_status_equal_to_one_still_in_flight_waits_for_its_outcome() -> None:
    pacer = StatusPacer(max_in_flight=8)
    assert _sent(pacer.pace([_result(_cq("a", 0))], NOW)) == ["a:0"]
    assert _sent(pacer.pace([_result(_cq("a", 1))], NOW)) == []
    assert _sent(pacer.pace([_result(_cq("a", 0))], NOW)) == []  # a:1 never went: a:0 is held
    pacer.settled(Sent("cqstatus", "a"))
    assert _sent(pacer.pace([], NOW)) == []  # a:0 was applied: nothing to write
    pacer.pace([_result(_cq("a", 1))], NOW)
    pacer.settled(Sent("cqstatus", "a"), applied=False)
    assert _sent(pacer.pace([_result(_cq("a", 1))], NOW)) == ["a:1"]


def test_a_partition_wakes_up_when_a_held_status_is_due() -> None:
    p = Partition(C, 7, SchedulerConfig(), status_in_flight=1, status_hold_s=0.5)
    for rec in world():
        p.apply_record(rec)
    p.mark_rebuilt()
    _, first = _status_ids(p, NOW)
    assert first == [command_id("cqstatus", 7, C, "cq", "status:1")]  # the LocalQueue's waits: busy, so held
    assert p.on_outcome(outcome(first[0], 7, True))
    assert not p.has_due(NOW) and p.next_wakeup() == NOW + 0.5 and p.has_due(NOW + 0.5)
    out, _ = p.plan([], NOW + 0.5)
    assert [o.msg_id for o in out.commands] == [command_id("lqstatus", 7, C, "demo/lq", "status:2")]


def test_a_status_held_behind_its_queues_write_in_flight_sets_no_wake_up_before_that_write_is_lost() -> None:
    pacer = StatusPacer(max_in_flight=8, hold_s=0.5)
    assert _sent(pacer.pace([_result(_cq("a", 1))], NOW)) == ["a:1"]
    assert _sent(pacer.pace([_result(_cq("a", 2))], NOW)) == []  # held behind a's write
    # Its outcome wakes it; a wake-up already due would run the term over and over meanwhile.
    assert pacer.next_due() == NOW + LOST_AFTER_S and not pacer.has_ready(NOW + 1)
    pacer.settled(Sent("cqstatus", "a"))
    assert pacer.has_ready(NOW + 1) and _sent(pacer.pace([], NOW + 1)) == ["a:2"]
