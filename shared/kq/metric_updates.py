"""Metric updates as plain values, so pure code (a service's plan/ helpers) can say what to record
without touching the Prometheus client; the shell hands them to `kq.metrics.ProcessMetrics.apply`.

    Inc("kueue_admitted_workloads_total", {"cluster_queue": "cq", "priority_class": ""})
    Observe("kueue_admission_wait_time_seconds", {...}, 1.5)
    Gauges("kueue_pending_workloads", scope={"cluster_queue": "cq"}, rows=(({"status": "active"}, 3.0),))

`Gauges` replaces every series of the metric whose labels match `scope` by `rows` (each row's
labels are added to the scope's): a ClusterQueue's report drops its flavors that are gone.
`replica_role` is added by the shell, never given here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


class Inc(NamedTuple):
    metric: str
    labels: Mapping[str, str]
    amount: float = 1.0


class Observe(NamedTuple):
    metric: str
    labels: Mapping[str, str]
    value: float


class Gauges(NamedTuple):
    metric: str
    scope: Mapping[str, str]
    rows: tuple[tuple[Mapping[str, str], float], ...]


MetricUpdate = Inc | Observe | Gauges
