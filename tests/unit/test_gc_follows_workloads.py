"""gc follows the manager's Workloads only when they can matter (services/gc/service.py): a retention
policy, or a MultiKueueCluster whose worker may hold orphans."""

from __future__ import annotations

import msgspec

from kq import subjects
from kq.mirror import DELETE, PUT, record_headers
from services.gc.service import Sweeper

MKC = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": "w1", "uid": "u1"},
       "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "w1"}}}}


def sweeper(after_finished_s: float | None = None) -> Sweeper:
    return Sweeper(None, "manager", None, "mk", after_finished_s, None)  # type: ignore[arg-type]


def test_without_retention_or_clusters_gc_does_not_follow_workloads() -> None:
    s = sweeper()
    assert not s.needs_workloads()
    subject = subjects.object_subject("manager", "multikueuecluster", None, "w1")
    s.view.apply(subject, record_headers(PUT, "1", "u1"), msgspec.json.encode(MKC))
    assert s.needs_workloads()
    s.view.apply(subject, record_headers(DELETE, "2", "u1"), msgspec.json.encode(MKC))
    assert not s.needs_workloads()  # (once started, the workload replay stays: main never stops it)


def test_a_retention_policy_needs_the_workloads_from_the_start() -> None:
    assert sweeper(after_finished_s=60.0).needs_workloads()
