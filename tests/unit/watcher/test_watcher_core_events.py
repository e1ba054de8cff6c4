"""services.watcher.core.events: Events created once, repeats counted on them, redeliveries no-ops, spam limited."""

from __future__ import annotations

import msgspec
import pytest

from kq.api.events import Event, ObjectReference
from kq.api.meta import ObjectMeta
from kq.messages import RecordEvent
from services.watcher.core.events import EventBudget, event_name, event_namespace, plan_event
from services.watcher.core.writes import Create, Skip, Write

WL = ObjectReference(api_version="kueue.x-k8s.io/v1beta2", kind="Workload", namespace="ns", name="w", uid="u1")


def cmd(message: str = "no room", at: str = "2026-01-01T00:00:00.000Z", involved: ObjectReference = WL,
        reason: str = "Pending") -> RecordEvent:
    return RecordEvent(id=f"e-{at}", cluster="c", writer="admission", epoch=1, involved=involved,
                       event_type="Warning", reason=reason, message=message, at=at)


def test_a_new_event_is_created_with_kubectls_fields() -> None:
    plan = plan_event(cmd(), None, "i0")
    assert isinstance(plan, Create)
    ev = msgspec.json.decode(plan.body, type=Event)
    assert (plan.kind, plan.namespace, plan.name) == ("event", "ns", event_name(cmd()))
    assert (ev.involved_object, ev.type, ev.reason, ev.message, ev.count, ev.first_timestamp, ev.last_timestamp,
            ev.source.component, ev.reporting_instance) == (WL, "Warning", "Pending", "no room", 1,
                                                            "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z",
                                                            "kq-watcher", "i0")


def test_the_name_aggregates_identical_events_only() -> None:
    assert event_name(cmd(at="2026-01-01T00:00:09.000Z")) == event_name(cmd())
    assert event_name(cmd(message="other")) != event_name(cmd())
    assert event_name(cmd(reason="Admitted")) != event_name(cmd())
    assert event_name(cmd(involved=msgspec.structs.replace(WL, uid="u2"))) != event_name(cmd())


def test_cluster_scoped_objects_get_their_events_in_default() -> None:
    cq = ObjectReference(api_version="kueue.x-k8s.io/v1beta2", kind="ClusterQueue", name="cq", uid="u")
    assert event_namespace(cmd(involved=cq)) == "default"


def existing(count: int = 1, last: str = "2026-01-01T00:00:00.000Z") -> Event:
    created = msgspec.json.decode(plan_event(cmd(), None, "i0").body, type=Event)  # type: ignore[union-attr]
    return msgspec.structs.replace(created, metadata=ObjectMeta(name=created.metadata.name, namespace="ns",
                                                                resource_version="7"),
                                   count=count, last_timestamp=last)


def test_a_repeat_is_counted_on_the_event_conditionally() -> None:
    plan = plan_event(cmd(at="2026-01-01T00:01:00.000Z"), existing(), "i0")
    assert isinstance(plan, Write)
    assert msgspec.json.decode(plan.patch) == {"count": 2, "lastTimestamp": "2026-01-01T00:01:00.000Z",
                                               "metadata": {"resourceVersion": "7"}}


def test_a_redelivered_command_writes_nothing() -> None:
    assert plan_event(cmd(), existing(), "i0") == Skip(reason="AlreadyApplied")


@pytest.mark.parametrize(("burst", "refill", "times", "allowed"), [
    (3, 300.0, [0, 0, 0, 0, 1], [True, True, True, False, False]),
    (2, 10.0, [0, 0, 5, 10, 10], [True, True, False, True, False]),
], ids=["burst-then-drop", "refills-over-time"])
def test_the_budget_is_a_token_bucket_per_object(burst: int, refill: float, times: list[float],
                                                  allowed: list[bool]) -> None:
    b = EventBudget(burst=burst, refill_s=refill)
    assert [b.allow("w", t) for t in times] == allowed
    assert b.allow("other", times[-1])  # another object has its own bucket


def test_the_budget_forgets_refilled_buckets_so_churn_does_not_grow_it() -> None:
    """Bounded memory (issue 12): every Job of a long run is a new key (the uid); the table holds only
    the objects whose bucket has not refilled yet, never every object that ever had an Event."""
    b = EventBudget(burst=3, refill_s=10.0)
    assert [b.allow("drained", 0.0) for _ in range(4)] == [True, True, True, False]
    most = 0
    for i in range(20_000):  # one new object a second, one Event each: refilled 10 s later
        b.allow(("job", i), 1.0 + i)
        most = max(most, len(b))
        if i == 5:
            assert not b.allow("drained", 1.0 + i)  # a drained bucket is not forgotten early
    assert most <= 2 * 10 + 1024, most
