"""gc follows the manager's Workloads only for a retention policy (services/gc/service.py): orphans
on a worker need only the Workloads whose copies it holds, read one by one at each pass."""

from __future__ import annotations

import msgspec

from kq import subjects
from kq.mirror import DELETE, PUT, record_headers
from services.gc.service import Sweeper

MKC = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": "w1", "uid": "u1"},
       "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "w1"}}}}


def sweeper(after_finished_s: float | None = None) -> Sweeper:
    return Sweeper(None, "manager", None, "mk", after_finished_s, None)  # type: ignore[arg-type]


def test_without_retention_gc_does_not_follow_workloads_even_with_clusters() -> None:
    s = sweeper()
    assert not s.needs_workloads()
    subject = subjects.object_subject("manager", "multikueuecluster", None, "w1")
    s.view.apply(subject, record_headers(PUT, "1", "u1"), msgspec.json.encode(MKC))
    assert not s.needs_workloads()
    s.view.apply(subject, record_headers(DELETE, "2", "u1"), msgspec.json.encode(MKC))
    assert not s.needs_workloads()


def test_a_retention_policy_needs_the_workloads_from_the_start() -> None:
    assert sweeper(after_finished_s=60.0).needs_workloads()
