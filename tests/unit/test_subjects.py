"""Subjects round-trip for every kind of name Kubernetes allows, and refuse what NATS cannot carry."""

from __future__ import annotations

import pytest

from kq import subjects
from kq.subjects import ObjectKey

ROUND_TRIP = [
    pytest.param(ObjectKey("manager", "workload", "default", "job-a"), id="plain"),
    pytest.param(ObjectKey("manager", "clusterqueue", "", "cq-1"), id="cluster-scoped"),
    pytest.param(ObjectKey("worker.eu-1", "workload", "team.a", "job.v1.2"), id="dots-everywhere"),
    pytest.param(ObjectKey("manager", "resourceflavor", "", "nvidia.com-a100"), id="dotted-cluster-scoped"),
    pytest.param(ObjectKey("m", "job", "ns", "a" * 253), id="longest-name"),
]


@pytest.mark.parametrize("key", ROUND_TRIP)
def test_object_subject_round_trip(key: ObjectKey) -> None:
    subject = subjects.object_subject(key.cluster, key.kind, key.namespace or None, key.name)
    assert len(subject.split(".")) == 7, subject
    assert subjects.parse_object_subject(subject) == key


@pytest.mark.parametrize("key", ROUND_TRIP)
def test_object_subject_matches_its_filters(key: ObjectKey) -> None:
    subject = subjects.object_subject(key.cluster, key.kind, key.namespace or None, key.name)
    for flt in (subjects.object_filter(), subjects.object_filter(key.cluster),
                subjects.object_filter(key.cluster, key.kind)):
        assert _matches(flt, subject), (flt, subject)
    assert not _matches(subjects.object_filter(key.cluster + "x", key.kind), subject)


@pytest.mark.parametrize(
    "cluster,kind",
    [pytest.param("manager", "workload", id="plain"), pytest.param("w.1", "clusterqueue", id="dotted-cluster")],
)
def test_sync_subject_round_trip(cluster: str, kind: str) -> None:
    subject = subjects.sync_subject(cluster, kind)
    assert subjects.parse_sync_subject(subject) == (cluster, kind)
    assert _matches(subjects.SYNC_ALL, subject)


@pytest.mark.parametrize(
    "build,stream_filter",
    [
        pytest.param(lambda: subjects.command_subject("w.1", "Workload"), subjects.COMMANDS_ALL, id="command"),
        pytest.param(lambda: subjects.event_subject("w.1", "workload", "a.b", "c.d"), subjects.EVENTS_ALL, id="event"),
        pytest.param(lambda: subjects.outcome_subject("admission", "w.1"), subjects.OUTCOMES_ALL, id="outcome"),
        pytest.param(lambda: subjects.dead_letter_subject("tas"), subjects.DEAD_LETTERS_ALL, id="dead-letter"),
    ],
)
def test_subjects_land_in_their_stream(build, stream_filter: str) -> None:
    assert _matches(stream_filter, build())


def test_command_filter_selects_one_cluster() -> None:
    assert _matches(subjects.command_filter("w.1"), subjects.command_subject("w.1", "workload"))
    assert not _matches(subjects.command_filter("w.2"), subjects.command_subject("w.1", "workload"))


def test_event_filter_selects_one_object() -> None:
    s = subjects.event_subject("m", "workload", "ns.x", "wl.1")
    assert _matches(subjects.event_filter("m", "workload", "ns.x", "wl.1"), s)
    assert not _matches(subjects.event_filter("m", "workload", "ns.x", "wl.2"), s)


@pytest.mark.parametrize(
    "bad",
    [pytest.param("", id="empty"), pytest.param("a b", id="space"), pytest.param("a*", id="star"),
     pytest.param("a>", id="gt"), pytest.param("a~b", id="tilde"), pytest.param("a\tb", id="tab"),
     pytest.param("a\rb", id="cr"), pytest.param("a\nb", id="lf")],
)
def test_unusable_tokens_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        subjects.object_subject("m", "workload", "ns", bad)


@pytest.mark.parametrize(
    "subject",
    [pytest.param("kq.v1.obj.m.workload.ns", id="short"), pytest.param("kq.v2.obj.m.w.ns.n", id="version"),
     pytest.param("kq.v1.cmd.m.w.ns.n", id="not-obj")],
)
def test_parse_refuses_foreign_subjects(subject: str) -> None:
    with pytest.raises(ValueError):
        subjects.parse_object_subject(subject)


def test_lease_key_keeps_partition_readable() -> None:
    assert subjects.lease_key("admission", "manager.root-a") == "admission.manager~root-a"


def _matches(flt: str, subject: str) -> bool:
    """NATS subject matching: '*' one token, '>' the rest."""
    f, s = flt.split("."), subject.split(".")
    for i, tok in enumerate(f):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(f) == len(s)
