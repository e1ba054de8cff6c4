"""The mirror record format and MirrorView fed by a replay of KQ_OBJECTS on a real nats-server."""

from __future__ import annotations

import json
from typing import Literal

import msgspec
import pytest
from nats.js.errors import NotFoundError
from support.wait import eventually

from kq import subjects
from kq.mirror import (
    MirrorRecordError,
    MirrorView,
    ObjectRecord,
    SyncMarker,
    decode_record,
    encode_marker,
    mirror_msg_id,
    record_headers,
    sync_msg_id,
)
from kq.runtime import Bus, OutMsg
from kq.subjects import ObjectKey

pytestmark = pytest.mark.timeout(30)

Op = Literal["put", "delete"]


def cq(name: str, rv: str, cohort: str = "root") -> bytes:
    return json.dumps({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                       "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": rv},
                       "spec": {"cohortName": cohort}}).encode()


def wl(ns: str, name: str, rv: str) -> bytes:
    return json.dumps({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                       "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": rv},
                       "spec": {"queueName": "q", "podSets": []}}).encode()


def out(cluster: str, kind: str, ns: str, name: str, rv: str, body: bytes, op: Op = "put", ttl: int | None = None) -> OutMsg:
    return OutMsg(subjects.object_subject(cluster, kind, ns or None, name), body,
                  mirror_msg_id(cluster, kind, ns, name, rv, op),
                  record_headers(op, rv, f"uid-{name}", ttl_s=ttl))


def marker(cluster: str, kind: str, rv: str, count: int) -> OutMsg:
    return OutMsg(subjects.sync_subject(cluster, kind), encode_marker(SyncMarker(cluster=cluster, kind=kind,
                  resource_version=rv, count=count)), sync_msg_id(cluster, kind, rv))


# -- the record format ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key,op",
    [
        pytest.param(ObjectKey("manager", "workload", "team.a", "job.v1"), "put", id="namespaced-dotted"),
        pytest.param(ObjectKey("worker.1", "clusterqueue", "", "cq.gpu"), "delete", id="cluster-scoped-tombstone"),
    ],
)
def test_record_round_trip(key: ObjectKey, op: Op) -> None:
    subject = subjects.object_subject(key.cluster, key.kind, key.namespace or None, key.name)
    rec = decode_record(subject, record_headers(op, "17", "u-1"), b'{"x":1}')
    assert rec == ObjectRecord(cluster=key.cluster, kind=key.kind, namespace=key.namespace, name=key.name,
                               deleted=op == "delete", resource_version="17", uid="u-1", raw=b'{"x":1}')
    assert rec.key == key and rec.subject == subject


@pytest.mark.parametrize(
    "subject,headers,needle",
    [
        pytest.param("kq.v1.cmd.m.workload", {"Kq-Op": "put", "Kq-Rv": "1", "Kq-Uid": "u"}, "not an object subject", id="subject"),
        pytest.param(subjects.object_subject("m", "job", "ns", "a"), {"Kq-Rv": "1", "Kq-Uid": "u"}, "Kq-Op", id="no-op"),
        pytest.param(subjects.object_subject("m", "job", "ns", "a"), {"Kq-Op": "patch", "Kq-Rv": "1", "Kq-Uid": "u"}, "Kq-Op", id="bad-op"),
        pytest.param(subjects.object_subject("m", "job", "ns", "a"), {"Kq-Op": "put", "Kq-Uid": "u"}, "Kq-Rv", id="no-rv"),
        pytest.param(subjects.object_subject("m", "job", "ns", "a"), {"Kq-Op": "put", "Kq-Rv": "1"}, "Kq-Uid", id="no-uid"),
        pytest.param(subjects.object_subject("m", "job", "ns", "a"), None, "Kq-Op", id="no-headers"),
    ],
)
def test_bad_records_name_what_is_wrong(subject: str, headers: dict | None, needle: str) -> None:
    with pytest.raises(MirrorRecordError, match=needle):
        decode_record(subject, headers, b"{}")


@pytest.mark.parametrize(
    "args,needle",
    [
        pytest.param(("upsert", "1", "u"), "Kq-Op", id="op"),
        pytest.param(("put", "", "u"), "Kq-Rv", id="rv"),
        pytest.param(("put", "1", ""), "Kq-Uid", id="uid"),
    ],
)
def test_record_headers_refuse_bad_input(args: tuple[str, str, str], needle: str) -> None:
    with pytest.raises(MirrorRecordError, match=needle):
        record_headers(*args)  # type: ignore[arg-type]  # bad input on purpose


def test_only_tombstones_take_a_ttl() -> None:
    assert record_headers("delete", "5", "u", ttl_s=3600)["Nats-TTL"] == "3600s"
    with pytest.raises(MirrorRecordError, match="Nats-TTL"):
        record_headers("put", "5", "u", ttl_s=60)


def test_msg_ids_are_deterministic_and_distinct() -> None:
    a = mirror_msg_id("m", "Workload", "ns", "a", "5", "put")
    assert a == mirror_msg_id("m", "workload", "ns", "a", "5", "put")
    others = {mirror_msg_id("m", "workload", "ns", "a", "6", "put"), mirror_msg_id("m", "workload", "ns", "a", "5", "delete"),
              mirror_msg_id("m", "workload", "", "a", "5", "put"), mirror_msg_id("w", "workload", "ns", "a", "5", "put")}
    assert a not in others and len(others) == 4


# -- MirrorView on a real stream -------------------------------------------------------------------


async def test_view_replays_last_values_tombstones_and_markers(bus: Bus) -> None:
    await bus.publish_many([
        out("m", "clusterqueue", "", "cq.a", "1", cq("cq.a", "1")),
        out("m", "clusterqueue", "", "cq.b", "2", cq("cq.b", "2")),
        out("m", "workload", "ns.1", "w.1", "3", wl("ns.1", "w.1", "3")),
        out("w1", "clusterqueue", "", "cq.a", "1", cq("cq.a", "1", cohort="worker")),
        out("m", "clusterqueue", "", "cq.a", "4", cq("cq.a", "4", cohort="other")),
        out("m", "clusterqueue", "", "cq.b", "5", cq("cq.b", "2"), op="delete"),
        marker("m", "clusterqueue", "5", 1),
    ])
    view = MirrorView()
    async with view.replay(bus, cluster="m") as r:
        await r.wait_caught_up(5)
        assert [(x.name, x.resource_version) for x in view.items("m", "clusterqueue")] == [("cq.a", "4")]
        assert view.get(ObjectKey("m", "clusterqueue", "", "cq.b")) is None  # tombstoned
        assert view.items("w1", "clusterqueue") == []  # another cluster, not replayed
        assert view.is_synced("m", "clusterqueue") and view.synced[("m", "clusterqueue")].count == 1
        assert not view.is_synced("m", "workload")
        typed = view.typed(ObjectKey("m", "clusterqueue", "", "cq.a"))
        assert typed is not None
        assert typed.spec.cohort_name == "other" and typed.metadata.resource_version == "4"
        (w,) = view.typed_items("m", "workload")
        assert (w.metadata.namespace, w.metadata.name) == ("ns.1", "w.1")
        # live updates keep flowing in
        await bus.publish_many([out("m", "clusterqueue", "", "cq.c", "6", cq("cq.c", "6")),
                                out("m", "clusterqueue", "", "cq.a", "7", cq("cq.a", "7"), op="delete")])
        await eventually(lambda: [x.name for x in view.items("m", "clusterqueue")] == ["cq.c"])
    assert len(view) == 2 and view.kinds() == [("m", "clusterqueue"), ("m", "workload")]


async def test_republishing_the_same_version_stores_nothing(bus: Bus) -> None:
    msg = out("m", "workload", "ns", "a", "9", wl("ns", "a", "9"))
    first, again = await bus.publish_many([msg]), await bus.publish_many([msg])
    assert not first[0].duplicate and again[0].duplicate


async def test_a_bad_record_is_dead_lettered_and_changes_nothing(bus: Bus) -> None:
    good = out("m", "workload", "ns", "good", "1", wl("ns", "good", "1"))
    await bus.publish(subjects.object_subject("m", "workload", "ns", "bad"), b"{}", msg_id="bad", headers={"Kq-Op": "put"})
    await bus.publish_many([good])
    view = MirrorView()
    async with view.replay(bus) as r:
        await r.wait_caught_up(5)
    assert [x.name for x in view.items("m", "workload")] == ["good"]
    dl = await bus.js.get_last_msg(subjects.EVENTS_STREAM, subjects.dead_letter_subject("test"))
    assert b"Kq-Rv" in (dl.data or b"")


async def test_tombstone_with_ttl_leaves_the_stream(bus: Bus) -> None:
    await bus.publish_many([out("m", "workload", "ns", "gone", "1", wl("ns", "gone", "1")),
                            out("m", "workload", "ns", "gone", "2", wl("ns", "gone", "1"), op="delete", ttl=1)])
    subject = subjects.object_subject("m", "workload", "ns", "gone")
    m = await bus.js.get_last_msg(subjects.OBJECTS_STREAM, subject)
    assert m.headers and m.headers["Kq-Op"] == "delete"

    async def gone() -> bool:
        try:
            await bus.js.get_last_msg(subjects.OBJECTS_STREAM, subject)
            return False
        except NotFoundError:
            return True

    await eventually(gone, timeout=5)


def test_view_applies_without_a_bus() -> None:
    view = MirrorView(decoder=lambda kind, raw: msgspec.json.decode(raw))
    s = subjects.object_subject("m", "clusterqueue", None, "x")
    view.apply(s, record_headers("put", "1", "u"), cq("x", "1"))
    assert (view.typed(ObjectKey("m", "clusterqueue", "", "x")) or {})["metadata"]["resourceVersion"] == "1"
    view.apply(s, record_headers("put", "2", "u"), cq("x", "2"))
    assert (view.typed(ObjectKey("m", "clusterqueue", "", "x")) or {})["metadata"]["resourceVersion"] == "2"  # cache follows rv
    view.apply(s, record_headers("delete", "3", "u"), cq("x", "2"))
    assert view.typed(ObjectKey("m", "clusterqueue", "", "x")) is None and len(view) == 0
