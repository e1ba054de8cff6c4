"""kq.metrics: updates recorded with replica_role, gauge reports replacing a queue's series, bad labels refused."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kq.metric_updates import Gauges, Inc, Observe
from kq.metrics import ProcessMetrics, kueue_buckets


def samples(m: ProcessMetrics, metric: str) -> dict[frozenset[tuple[str, str]], float]:
    text = m.exposition().decode()
    return {frozenset(s.labels.items()): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples if s.name == metric}


def test_kueue_buckets_are_kueues() -> None:
    assert kueue_buckets(4) == (1.0, 2.5, 5.0, 10.0)


def test_counters_and_histograms_carry_the_replica_role() -> None:
    m = ProcessMetrics(role="leader")
    m.apply([Inc("kueue_admitted_workloads_total", {"cluster_queue": "cq", "priority_class": "p"}, 2),
             Observe("kueue_admission_wait_time_seconds", {"cluster_queue": "cq", "priority_class": "p"}, 3.0)])
    labels = frozenset({"cluster_queue": "cq", "priority_class": "p", "replica_role": "leader"}.items())
    assert samples(m, "kueue_admitted_workloads_total") == {labels: 2.0}
    assert samples(m, "kueue_admission_wait_time_seconds_count") == {labels: 1.0}
    assert samples(m, "kueue_admission_wait_time_seconds_sum") == {labels: 3.0}
    assert "kueue_admitted_workloads_created" not in m.exposition().decode()


def test_a_gauge_report_replaces_the_queues_series_and_leaves_others() -> None:
    m = ProcessMetrics()
    fr = "kueue_cluster_queue_nominal_quota"

    def report(cq: str, rows: dict[str, float]) -> None:
        m.apply([Gauges(fr, {"cohort": "", "cluster_queue": cq},
                        tuple(({"flavor": f, "resource": "cpu"}, v) for f, v in rows.items()))])

    report("a", {"x": 1.0, "y": 2.0})
    report("b", {"x": 5.0})
    report("a", {"y": 3.0})  # flavor x left ClusterQueue a
    got = {(dict(k)["cluster_queue"], dict(k)["flavor"]): v for k, v in samples(m, fr).items()}
    assert got == {("a", "y"): 3.0, ("b", "x"): 5.0}
    m.clear_kueue_gauges()
    assert samples(m, fr) == {}


def test_wrong_labels_are_a_bug() -> None:
    m = ProcessMetrics()
    with pytest.raises(ValueError, match="kueue_pending_workloads"):
        m.apply([Gauges("kueue_pending_workloads", {"cluster_queue": "cq"}, (({"state": "active"}, 1.0),))])
    with pytest.raises(ValueError):
        m.apply([Inc("kueue_admitted_workloads_total", {"cluster_queue": "cq"})])


def test_settled_messages_give_lag_and_latency_per_consumer() -> None:
    m = ProcessMetrics()
    m.settled("KQ_CMD", "watcher-cmd", "ack", pending=7, latency_s=0.2)
    m.settled("KQ_CMD", "watcher-cmd", "ack", pending=3, latency_s=0.4)
    key = frozenset({"stream": "KQ_CMD", "consumer": "watcher-cmd", "replica_role": "standalone"}.items())
    assert samples(m, "kq_bus_consumer_pending_messages") == {key: 3.0}
    count = samples(m, "kq_bus_message_latency_seconds_count")
    assert count == {frozenset({**dict(key), "outcome": "ack"}.items()): 2.0}
    ready = samples(m, "kq_service_ready")
    assert list(ready.values()) == [0.0]
    m.set_ready(True)
    assert list(samples(m, "kq_service_ready").values()) == [1.0]


def test_a_gauge_replaced_under_a_wider_scope_drops_every_row_it_covers() -> None:
    m = ProcessMetrics()
    g = "kueue_cluster_queue_nominal_quota"
    for cq in ("a", "b"):
        m.apply([Gauges(g, {"cohort": "c", "cluster_queue": cq}, (({"flavor": "x", "resource": "cpu"}, 1.0),))])
    m.apply([Gauges(g, {"cohort": "c"}, (({"cluster_queue": "z", "flavor": "x", "resource": "cpu"}, 2.0),))])
    assert {dict(k)["cluster_queue"]: v for k, v in samples(m, g).items()} == {"z": 2.0}


def test_repeated_reports_and_counts_keep_their_values_across_a_role_change_and_a_clear() -> None:
    m = ProcessMetrics(role="leader")
    g = Gauges("kueue_pending_workloads", {"cluster_queue": "cq"}, (({"status": "active"}, 3.0),))
    inc = Inc("kueue_admitted_workloads_total", {"cluster_queue": "cq", "priority_class": ""})
    m.apply([g, g, inc, inc])
    m.role = "follower"
    m.apply([inc])
    m.clear_kueue_gauges()
    assert samples(m, "kueue_pending_workloads") == {}
    m.apply([g])  # the same rows as before the clear: reported again
    assert samples(m, "kueue_pending_workloads") == {
        frozenset({"cluster_queue": "cq", "status": "active", "replica_role": "follower"}.items()): 3.0}
    counts = samples(m, "kueue_admitted_workloads_total")
    assert {dict(k)["replica_role"]: v for k, v in counts.items()} == {"leader": 2.0, "follower": 1.0}


def test_a_queue_reported_many_times_between_scrapes_is_written_once_with_its_last_report(monkeypatch) -> None:
    m = ProcessMetrics()
    g = "kueue_pending_workloads"
    writes: list[str] = []
    replace = m._gauges.replace

    def counted(metric: str, *args: Any) -> None:
        writes.append(metric)
        replace(metric, *args)

    monkeypatch.setattr(m._gauges, "replace", counted)

    def report(cq: str, active: float) -> Gauges:
        return Gauges(g, {"cluster_queue": cq}, (({"status": "active"}, active),))

    m.apply([report("a", 0.0)])  # the first of its kind goes into the table at once
    writes.clear()
    m.apply([report("a", float(n)) for n in range(1, 1000)] + [report("b", 7.0)])
    assert writes == []
    got = {dict(k)["cluster_queue"]: v for k, v in samples(m, g).items()}
    assert got == {"a": 999.0, "b": 7.0}
    assert writes == [g, g]
    m.apply([report("a", 999.0)])  # what the table holds already: nothing to write at the next scrape
    assert samples(m, g)[frozenset({"cluster_queue": "a", "status": "active", "replica_role": "standalone"}.items())] == 999.0
    assert writes == [g, g]


def test_a_held_report_with_wrong_labels_is_refused_when_it_comes() -> None:
    m = ProcessMetrics()
    m.apply([Gauges("kueue_pending_workloads", {"cluster_queue": "a"}, (({"status": "active"}, 1.0),))])
    with pytest.raises(ValueError, match="kueue_pending_workloads"):
        m.apply([Gauges("kueue_pending_workloads", {"cluster_queue": "b"}, (({"state": "active"}, 1.0),))])


def test_reports_of_one_scope_in_either_label_order_keep_the_last() -> None:
    m = ProcessMetrics()
    g = "kueue_cluster_queue_nominal_quota"

    def report(scope: dict[str, str], v: float) -> Gauges:
        return Gauges(g, scope, (({"flavor": "x", "resource": "cpu"}, v),))

    m.apply([report({"cohort": "c", "cluster_queue": "a"}, 1.0), report({"cohort": "c", "cluster_queue": "a"}, 2.0),
             report({"cluster_queue": "a", "cohort": "c"}, 3.0)])
    assert list(samples(m, g).values()) == [3.0]
    m.apply([report({"cluster_queue": "a", "cohort": "c"}, 4.0), report({"cohort": "c", "cluster_queue": "a"}, 5.0)])
    assert list(samples(m, g).values()) == [5.0]


def test_a_deferred_report_is_built_only_when_scraped_from_its_last_source_and_dropped_with_the_queues() -> None:
    m = ProcessMetrics()
    g = "kueue_pending_workloads"
    built: list[float] = []

    def source(v: float) -> Any:
        def build() -> list[Gauges]:
            built.append(v)
            return [Gauges(g, {"cluster_queue": "a"}, (({"status": "active"}, v),))]
        return build

    m.defer("kueue_queues:c1", source(1.0))
    m.defer("kueue_queues:c1", source(2.0))  # replaces the first: only the last is built
    assert built == []
    assert samples(m, g) == {frozenset({"cluster_queue": "a", "status": "active", "replica_role": "standalone"}.items()): 2.0}
    assert built == [2.0]
    samples(m, g)
    assert built == [2.0]  # built once: the next scrape needs a new source
    m.defer("kueue_queues:c1", source(3.0))
    m.build_deferred("kueue_queues:c1")  # its owner ends: built now, not held
    assert built == [2.0, 3.0]
    m.defer("kueue_queues:c1", source(4.0))
    m.clear_kueue_gauges()
    assert samples(m, g) == {}
    assert built == [2.0, 3.0]
