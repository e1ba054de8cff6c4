"""Which mirror records admission applies ahead of a replay backlog (handlers.Inputs.ahead): only
those of workloads holding quota in a rebuilt partition; everything else keeps the stream's order."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from kq import subjects
from kq.api import kueue as api
from kq.config import ConfigError, parse_config
from kq.mirror import ObjectRecord
from kq.runtime import Delivery
from services.admission.core.model import SchedulerConfig
from services.admission.handlers import Inputs
from services.admission.plan.partition import LostLeadership, Partition

C = "c1"
KUEUE = "kueue.x-k8s.io/v1beta2"
ADMITTED = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                            "lastTransitionTime": "2023-11-14T22:10:00Z"}],
            "admission": msgspec.to_builtins(api.Admission(cluster_queue="cq", pod_set_assignments=(
                api.PodSetAssignment(name="main", flavors={"cpu": "default"}, resource_usage={"cpu": "1"}, count=1),)))}


def record(kind: str, ns: str, name: str, body: dict[str, Any], rv: str) -> ObjectRecord:
    meta = {"name": name, "uid": f"uid-{name}", "resourceVersion": rv, "generation": 1,
            "creationTimestamp": "2023-11-14T22:00:00Z", **({"namespace": ns} if ns else {})}
    return ObjectRecord(cluster=C, kind=kind, namespace=ns, name=name, deleted=False, resource_version=rv,
                        uid=f"uid-{name}", raw=json.dumps({**body, "metadata": meta}).encode())


def workload(name: str, rv: str, status: dict[str, Any] | None = None) -> ObjectRecord:
    return record("workload", "demo", name, {"apiVersion": KUEUE, "kind": "Workload", "spec": {
        "queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}, "status": status or {}}, rv)


WORLD = [
    record("namespace", "", "demo", {"apiVersion": "v1", "kind": "Namespace"}, "1"),
    record("resourceflavor", "", "default", {"apiVersion": KUEUE, "kind": "ResourceFlavor"}, "2"),
    record("clusterqueue", "", "cq", {"apiVersion": KUEUE, "kind": "ClusterQueue", "spec": {
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "2"}]}]}]}}, "3"),
    record("localqueue", "demo", "lq", {"apiVersion": KUEUE, "kind": "LocalQueue", "spec": {"clusterQueue": "cq"}}, "4"),
    workload("held", "10", ADMITTED),
    workload("waiting", "11"),
]


def delivery(subject: str) -> Delivery:
    return Delivery(subject=subject, data=b"", headers={}, stream=subjects.OBJECTS_STREAM, consumer="c", stream_seq=99,
                    consumer_seq=1, deliveries=1, pending=0, timestamp_ns=0, reply="")


def lost(e: LostLeadership) -> None:
    raise AssertionError(e)


def inputs(rebuilt: bool = True) -> Inputs:
    p = Partition(C, 7, SchedulerConfig())
    for rec in WORLD:
        p.apply_record(rec)
    if rebuilt:
        p.mark_rebuilt()
    return Inputs({C: p}, lost)


@pytest.mark.parametrize("subject, rebuilt, want", [
    pytest.param(subjects.object_subject(C, "workload", "demo", "held"), True, True, id="holds-quota"),
    pytest.param(subjects.object_subject(C, "workload", "demo", "waiting"), True, False, id="pending"),
    pytest.param(subjects.object_subject(C, "workload", "demo", "new"), True, False, id="unknown-workload"),
    pytest.param(subjects.object_subject(C, "workload", "demo", "held"), False, False, id="still-rebuilding"),
    pytest.param(subjects.object_subject("c2", "workload", "demo", "held"), True, False, id="another-cluster"),
    pytest.param(subjects.object_subject(C, "clusterqueue", None, "cq"), True, False, id="not-a-workload"),
    pytest.param(subjects.sync_subject(C, "workload"), True, False, id="sync-marker"),
])
def test_only_records_of_workloads_holding_quota_go_ahead(subject: str, rebuilt: bool, want: bool) -> None:
    assert inputs(rebuilt).ahead(delivery(subject)) is want


def test_an_assumed_admission_holds_quota_until_refused() -> None:
    i = inputs()
    p = i.partitions[C]
    out, _ = p.plan([p.cycle(0.0)], 0.0)
    assert [s.target for s in out.sent.values() if s.action == "reserve"] == ["demo/waiting"]
    assert i.ahead(delivery(subjects.object_subject(C, "workload", "demo", "waiting")))  # its echo goes ahead
    p.state.forget("demo/waiting")
    assert not i.ahead(delivery(subjects.object_subject(C, "workload", "demo", "waiting")))


def test_the_depth_is_read_from_the_config_and_checked() -> None:
    assert parse_config("admission: {term: {replayAhead: 1000}}").admission.term.replay_ahead == 1000
    assert parse_config("admission: {term: {replayAhead: 0}}").admission.term.replay_ahead == 0  # off
    with pytest.raises(ConfigError, match=r"replay_?[aA]head"):
        parse_config("admission: {term: {replayAhead: -1}}")
