"""kq bench --workers: which finished manager Workloads count as not saying where they ran."""

from __future__ import annotations

import msgspec

from kq.bench.multikueue import _Wl


def _seen(conditions: list[dict[str, str]], cluster: str | None = None):
    status: dict[str, object] = {"conditions": conditions}
    if cluster:
        status["clusterName"] = cluster
    raw = msgspec.json.encode({"metadata": {"namespace": "ns", "name": "w"}, "status": status})
    return msgspec.json.decode(raw, type=_Wl).seen()


FINISHED = {"type": "Finished", "status": "True", "reason": "Succeeded"}


def test_a_finished_workload_without_its_cluster_counts_unless_an_eviction_cleared_it() -> None:
    assert _seen([FINISHED]).unrecorded
    assert not _seen([FINISHED], cluster="worker-3").unrecorded
    assert not _seen([]).unrecorded  # not finished yet
    # Kueue's eviction clears clusterName (evict.go resetClusterNomination); a job that finished on its
    # worker while the eviction was under way finishes the Workload without it.
    assert not _seen([{"type": "Evicted", "status": "True", "reason": "Preempted"}, FINISHED]).unrecorded
    assert _seen([{"type": "Evicted", "status": "False", "reason": "Preempted"}, FINISHED]).unrecorded
