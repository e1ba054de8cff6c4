"""Prometheus metrics of one kq process (prometheus-client), served on /metrics by kq.runtime.http.

Kueue's metrics keep Kueue's names, labels and types (pkg/metrics/metrics.go), `replica_role`
included (leader | follower | standalone); kq's own are named kq_*. Pure code describes what to
record as kq.metric_updates values; `ProcessMetrics.apply` records them. Gauges are kept in a
table collected at scrape time, so a report can replace a queue's series wholesale (Kueue's
DeletePartialMatch).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Literal

import prometheus_client
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from kq.metric_updates import Gauges, Inc, MetricUpdate, Observe

# `_created` series are noise for every dashboard we know of (Kueue's Go client has none).
prometheus_client.disable_created_metrics()

Role = Literal["leader", "follower", "standalone"]
ROLE = "replica_role"


def kueue_buckets(count: int) -> tuple[float, ...]:
    """Kueue's generateExponentialBuckets: 1, then 2.5 doubling (count buckets in all)."""
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


CQ = ("cluster_queue",)
LQ = ("name", "namespace")
CQ_PC = ("cluster_queue", "priority_class")
LQ_PC = ("name", "namespace", "priority_class")
CQ_FR = ("cohort", "cluster_queue", "flavor", "resource")
LQ_FR = ("name", "namespace", "flavor", "resource")

# name -> (help, labels without replica_role)
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "kueue_admission_attempts_total": ("The total number of attempts to admit workloads (result: success | inadmissible).", ("result",)),
    "kueue_quota_reserved_workloads_total": ("The total number of quota reserved workloads per 'cluster_queue'", CQ_PC),
    "kueue_local_queue_quota_reserved_workloads_total": ("The total number of quota reserved workloads per 'local_queue'", LQ_PC),
    "kueue_admitted_workloads_total": ("The total number of admitted workloads per 'cluster_queue'", CQ_PC),
    "kueue_local_queue_admitted_workloads_total": ("The total number of admitted workloads per 'local_queue'", LQ_PC),
    "kueue_evicted_workloads_total": ("The number of evicted workloads per 'cluster_queue', with the eviction 'reason' and 'underlying_cause'",
                                      ("cluster_queue", "reason", "underlying_cause", "priority_class")),
    "kueue_local_queue_evicted_workloads_total": ("The number of evicted workloads per 'local_queue', with the eviction 'reason' and 'underlying_cause'",
                                                  ("name", "namespace", "reason", "underlying_cause", "priority_class")),
    "kueue_preempted_workloads_total": ("The number of preempted workloads per 'preempting_cluster_queue' and preemption 'reason'",
                                        ("preempting_cluster_queue", "reason")),
}

_WAIT = "The time between a workload was created or requeued until "
HISTOGRAMS: dict[str, tuple[str, tuple[str, ...], tuple[float, ...] | None]] = {
    "kueue_admission_attempt_duration_seconds": ("The latency of an admission attempt (result: success | inadmissible).", ("result",), None),
    "kueue_quota_reserved_wait_time_seconds": (_WAIT + "it got quota reservation, per 'cluster_queue'", CQ_PC, kueue_buckets(14)),
    "kueue_local_queue_quota_reserved_wait_time_seconds": (_WAIT + "it got quota reservation, per 'local_queue'", LQ_PC, kueue_buckets(14)),
    "kueue_admission_wait_time_seconds": (_WAIT + "admission, per 'cluster_queue'", CQ_PC, kueue_buckets(16)),
    "kueue_local_queue_admission_wait_time_seconds": (_WAIT + "admission, per 'local_queue'", LQ_PC, kueue_buckets(16)),
    "kueue_admission_checks_wait_time_seconds": ("The time from when a workload got the quota reservation until admission, per 'cluster_queue'", CQ_PC, kueue_buckets(14)),
    "kueue_local_queue_admission_checks_wait_time_seconds": ("The time from when a workload got the quota reservation until admission, per 'local_queue'", LQ_PC, kueue_buckets(14)),
}

GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "kueue_pending_workloads": ("The number of pending workloads, per 'cluster_queue' and 'status' (active | inadmissible)", ("cluster_queue", "status")),
    "kueue_local_queue_pending_workloads": ("The number of pending workloads, per 'local_queue' and 'status' (active | inadmissible)", ("name", "namespace", "status")),
    "kueue_reserving_active_workloads": ("The number of Workloads that are reserving quota, per 'cluster_queue'", CQ),
    "kueue_local_queue_reserving_active_workloads": ("The number of Workloads that are reserving quota, per 'localQueue'", LQ),
    "kueue_admitted_active_workloads": ("The number of admitted Workloads that are active, per 'cluster_queue'", CQ),
    "kueue_local_queue_admitted_active_workloads": ("The number of admitted Workloads that are active, per 'localQueue'", LQ),
    "kueue_cluster_queue_status": ("Reports 'cluster_queue' with its 'status' (pending | active | terminated): 1 for the current one", ("cluster_queue", "status")),
    "kueue_local_queue_status": ("Reports 'localQueue' with its 'active' status (True | False | Unknown): 1 for the current one", ("name", "namespace", "active")),
    "kueue_cluster_queue_resource_reservation": ("Reports the cluster_queue's total resource reservation within all the flavors", CQ_FR),
    "kueue_cluster_queue_resource_usage": ("Reports the cluster_queue's total resource usage within all the flavors", CQ_FR),
    "kueue_cluster_queue_nominal_quota": ("Reports the cluster_queue's resource nominal quota within all the flavors", CQ_FR),
    "kueue_cluster_queue_borrowing_limit": ("Reports the cluster_queue's resource borrowing limit within all the flavors (+Inf: none)", CQ_FR),
    "kueue_cluster_queue_lending_limit": ("Reports the cluster_queue's resource lending limit within all the flavors (+Inf: none)", CQ_FR),
    "kueue_local_queue_resource_reservation": ("Reports the localQueue's total resource reservation within all the flavors", LQ_FR),
    "kueue_local_queue_resource_usage": ("Reports the localQueue's total resource usage within all the flavors", LQ_FR),
    "kueue_cluster_queue_weighted_share": ("Reports the cluster_queue's weighted share (fair sharing; NaN when infinite)", ("cluster_queue", "cohort")),
    "kueue_cohort_subtree_quota": ("Reports the cohort's subtree quota within all the flavors", ("cohort", "flavor", "resource")),
    # kq's own
    "kq_bus_consumer_pending_messages": ("Messages a durable consumer has yet to be sent (its lag), as of its latest delivery", ("stream", "consumer")),
    "kq_service_ready": ("1 while this process is ready (caught up and holding or standing by for its lease)", ()),
}

KQ_COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "kq_decisions_total": ("Decisions a scheduler published, per 'kind' (rate() gives decisions per second)", ("kind",)),
}
KQ_HISTOGRAMS: dict[str, tuple[str, tuple[str, ...], tuple[float, ...] | None]] = {
    "kq_bus_message_latency_seconds": ("From a message's storage in its stream until this consumer settled it (for KQ_CMD: command latency)",
                                       ("stream", "consumer", "outcome"),
                                       (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)),
}


class _GaugeTable(Collector):
    """Gauges kept as rows and turned into families at scrape time.

    Rows are grouped by the scope they were replaced under, so replacing one queue's rows costs
    what that queue has, not what every queue has (a status report per queue would otherwise scan
    the whole table: quadratic in the number of queues)."""

    def __init__(self, families: Mapping[str, tuple[str, tuple[str, ...]]]) -> None:
        self.families = dict(families)
        # metric -> scope (sorted (label, value) pairs) -> label values -> value
        self.groups: dict[str, dict[tuple[tuple[str, str], ...], dict[tuple[str, ...], float]]] = {
            name: {} for name in families}
        self.scope_kinds: dict[str, set[tuple[str, ...]]] = {name: set() for name in families}  # scope label names
        self.names = {name: (*labels, ROLE) for name, (_doc, labels) in families.items()}
        self.checked: set[tuple[str, tuple[str, ...]]] = set()  # (metric, row label names in order) found right

    def labels_of(self, metric: str) -> tuple[str, ...]:
        return self.names[metric]

    def replace(self, metric: str, scope: Mapping[str, str], rows: Iterable[tuple[dict[str, str], float]]) -> None:
        """The rows whose labels match `scope` become `rows` (each of which must match it too)."""
        names = self.labels_of(metric)
        key = tuple(sorted(scope.items()))
        kinds = self.scope_kinds[metric]
        kinds.add(tuple(k for k, _ in key))
        groups = self.groups[metric]
        if len(kinds) > 1:  # one metric replaced under scopes of different labels: look at every row
            idx = [(names.index(k), v) for k, v in key]
            for g in groups.values():
                for values in [vs for vs in g if all(vs[i] == v for i, v in idx)]:
                    del g[values]
        table: dict[tuple[str, ...], float] = {}
        checked = self.checked
        for labels, value in rows:
            order = (metric, tuple(labels))
            if order not in checked:  # a row's label names are checked once per order they come in
                _values(metric, names, labels)
                checked.add(order)
            table[tuple([labels[n] for n in names])] = value
        groups[key] = table

    def mixed(self, metric: str) -> bool:
        """Replaced under scopes of different labels (so one replace may drop another scope's rows)."""
        return len(self.scope_kinds[metric]) > 1

    def rows(self, metric: str) -> dict[tuple[str, ...], float]:
        """Every row of a metric: label values (in labels_of order) -> value."""
        return {values: v for g in self.groups[metric].values() for values, v in g.items()}

    def clear(self, prefix: str) -> None:
        for name, groups in self.groups.items():
            if name.startswith(prefix):
                groups.clear()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for name, (doc, _labels) in self.families.items():
            fam = GaugeMetricFamily(name, doc, labels=self.labels_of(name))
            for values, value in sorted(self.rows(name).items()):
                fam.add_metric(list(values), value)
            yield fam


class _SeriesTable(Collector):
    """Counters and histograms kept as plain rows (label values -> count, or bucket counts and sum)
    and turned into families at scrape time. A new labelled series is a dict entry, where a
    prometheus-client child is an object with a lock per bucket: with thousands of queues each
    queue's first admission created eight of them (a fifth of admission's CPU at 5,000 queues)."""

    def __init__(self, counters: Mapping[str, tuple[str, tuple[str, ...]]],
                 histograms: Mapping[str, tuple[str, tuple[str, ...], tuple[float, ...] | None]]) -> None:
        self.counters = {name: (doc, (*labels, ROLE)) for name, (doc, labels) in counters.items()}
        self.histograms = {name: (doc, (*labels, ROLE), _bounds(buckets))
                           for name, (doc, labels, buckets) in histograms.items()}
        self.counts: dict[str, dict[tuple[str, ...], float]] = {name: {} for name in self.counters}
        # histogram -> label values -> [count per bucket (not cumulative)..., sum]
        self.observed: dict[str, dict[tuple[str, ...], list[float]]] = {name: {} for name in self.histograms}

    def inc(self, metric: str, labels: Mapping[str, str], amount: float) -> None:
        if amount < 0:
            raise ValueError(f"{metric}: counters only go up ({amount})")
        names = self.counters[metric][1]
        values = tuple(labels.values()) if tuple(labels) == names else _values(metric, names, labels)
        rows = self.counts[metric]
        rows[values] = rows.get(values, 0.0) + amount

    def observe(self, metric: str, labels: Mapping[str, str], value: float) -> None:
        _doc, names, bounds = self.histograms[metric]
        values = tuple(labels.values()) if tuple(labels) == names else _values(metric, names, labels)
        rows = self.observed[metric]
        row = rows.get(values)
        if row is None:
            row = rows[values] = [0.0] * (len(bounds) + 1)
        row[bisect_left(bounds, value)] += 1
        row[-1] += value

    def collect(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        for name, (doc, labels) in self.counters.items():
            fam = CounterMetricFamily(name, doc, labels=labels)
            for values, value in self.counts[name].items():
                fam.add_metric(values, value)
            yield fam
        for name, (doc, labels, bounds) in self.histograms.items():
            hist = HistogramMetricFamily(name, doc, labels=labels)
            les = [floatToGoString(b) for b in bounds]
            for values, row in self.observed[name].items():
                total, cumulative = 0.0, []
                for le, n in zip(les, row, strict=False):
                    total += n
                    cumulative.append((le, total))
                hist.add_metric(values, cumulative, row[-1])
            yield hist


def _bounds(buckets: tuple[float, ...] | None) -> tuple[float, ...]:
    b = tuple(float(x) for x in (buckets or Histogram.DEFAULT_BUCKETS))
    return b if b[-1] == float("inf") else (*b, float("inf"))


def _values(metric: str, names: tuple[str, ...], labels: Mapping[str, str]) -> tuple[str, ...]:
    if set(labels) != set(names):
        raise ValueError(f"{metric}: labels {sorted(labels)} are not {sorted(names)}")
    return tuple(labels[n] for n in names)


class ProcessMetrics:
    """Every metric of one process, in its own registry (tests run several in one interpreter)."""

    def __init__(self, role: Role = "standalone") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.role: Role = role
        self._series = _SeriesTable(COUNTERS | KQ_COUNTERS, HISTOGRAMS | KQ_HISTOGRAMS)
        self.registry.register(self._series)
        self._gauges = _GaugeTable(GAUGES)
        self.registry.register(self._gauges)
        self._gauge_rows: dict[tuple[str, tuple[tuple[str, str], ...], str], object] = {}  # rows last replaced
        # Gauge reports held until the next scrape, last one per (metric, scope values, role): a busy
        # queue's status is reported many times between two scrapes (large-scale: ~a quarter of
        # admission's CPU went to replacing rows nobody read). Held only for a report of the scope
        # shape (label names, in order) the metric was first reported with, the metric never
        # mixing shapes: so a held report never changes which rows another one covers.
        self._held: dict[tuple[str, tuple[str, ...], str], tuple[tuple[Mapping[str, str], float], ...]] = {}
        self._shapes: dict[str, tuple[str, ...]] = {}  # metric -> its first scope shape
        self._checked: set[tuple[str, tuple[str, ...], tuple[str, ...]]] = set()  # (metric, shape, row labels)
        # key -> what makes the updates, called only at the next scrape (see defer)
        self._deferred: dict[str, Callable[[], Iterable[MetricUpdate]]] = {}
        self.set_ready(False)

    def apply(self, updates: Iterable[MetricUpdate]) -> None:
        role = {ROLE: self.role}
        series = self._series
        held, shapes, checked = self._held, self._shapes, self._checked
        for u in updates:
            match u:
                case Inc(metric, labels, amount):
                    series.inc(metric, {**labels, **role}, amount)
                case Observe(metric, labels, value):
                    series.observe(metric, {**labels, **role}, value)
                case Gauges(metric, scope, rows):
                    shape = tuple(scope)
                    if shapes.get(metric) == shape and not self._gauges.mixed(metric):
                        for r, _v in rows:  # checked when it comes: a bad report is a bug at its caller
                            if (metric, shape, tuple(r)) not in checked:
                                _values(metric, self._gauges.labels_of(metric), {**scope, **r, ROLE: ""})
                                checked.add((metric, shape, tuple(r)))
                        # One shape per metric: held reports of a metric cover disjoint rows (their
                        # order does not matter), and the scope's values name it.
                        held[(metric, tuple(scope.values()), self.role)] = rows
                        continue
                    self._flush()  # a new kind of report: everything before it goes in first
                    self._replace((metric, tuple(scope.items()), self.role), rows)
                    if not self._gauges.mixed(metric):
                        shapes.setdefault(metric, shape)

    def defer(self, key: str, source: Callable[[], Iterable[MetricUpdate]]) -> None:
        """Updates built only when read: `source()` is applied at the next scrape (the last source
        given per key). For reports dearer to build than to hold, made far more often than they are
        scraped (admission's queue gauges, large-scale: ~13 % of its CPU built every round). A key
        starting "kueue_" is dropped by clear_kueue_gauges."""
        self._deferred[key] = source

    def build_deferred(self, key: str) -> None:
        """Apply the source deferred under `key` now (and forget it): its owner is going away."""
        source = self._deferred.pop(key, None)
        if source is not None:
            self.apply(source())

    def _replace(self, key: tuple[str, tuple[tuple[str, str], ...], str], rows: tuple[tuple[Mapping[str, str], float], ...]) -> None:
        # A queue's report repeats most of its gauges unchanged (quotas, status): skip those.
        metric, items, role = key
        if self._gauge_rows.get(key) == rows and not self._gauges.mixed(metric):
            return
        scope = {**dict(items), ROLE: role}
        self._gauges.replace(metric, scope, [({**scope, **r}, v) for r, v in rows])
        self._gauge_rows[key] = rows

    def _flush(self) -> None:
        """Held gauge reports into the table (at scrape time): a queue reported many times between
        two scrapes is written once, with its last report."""
        if self._held:
            held, self._held = self._held, {}
            for (metric, values, role), rows in held.items():
                self._replace((metric, tuple(zip(self._shapes[metric], values, strict=True)), role), rows)

    def clear_kueue_gauges(self) -> None:
        """A scheduler that stops leading stops reporting its queues (their state is no longer its own)."""
        self._deferred = {k: v for k, v in self._deferred.items() if not k.startswith("kueue_")}
        self._held = {k: v for k, v in self._held.items() if not k[0].startswith("kueue_")}
        self._gauges.clear("kueue_")
        self._gauge_rows = {k: v for k, v in self._gauge_rows.items() if not k[0].startswith("kueue_")}

    # -- kq's own ------------------------------------------------------------------------------

    def set_ready(self, ready: bool) -> None:
        self._gauges.replace("kq_service_ready", {}, [({ROLE: self.role}, 1.0 if ready else 0.0)])

    def settled(self, stream: str, consumer: str, outcome: str, pending: int, latency_s: float) -> None:
        """One message settled by a durable consumer (kq.runtime.consume.settle)."""
        role = self.role
        self._series.observe("kq_bus_message_latency_seconds",
                             {"stream": stream, "consumer": consumer, "outcome": outcome, ROLE: role},
                             max(0.0, latency_s))
        self._gauges.replace("kq_bus_consumer_pending_messages", {"stream": stream, "consumer": consumer},
                             [({"stream": stream, "consumer": consumer, ROLE: role}, float(pending))])

    def exposition(self) -> bytes:
        if self._deferred:
            deferred, self._deferred = self._deferred, {}
            for source in deferred.values():
                self.apply(source())
        self._flush()
        return prometheus_client.generate_latest(self.registry)


CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST
