"""Queue gauges (services/admission/plan/metrics.py): a report re-emits only the gauges whose inputs
changed, and the series say the same as when every gauge is emitted every time."""

from __future__ import annotations

import msgspec
from test_admission_plan import NOW, world

from kq.metric_updates import MetricUpdate
from kq.metrics import ProcessMetrics
from services.admission.core.decisions import CycleResult
from services.admission.core.model import SchedulerConfig
from services.admission.core.state import SchedulerState
from services.admission.plan import metrics
from services.admission.plan.partition import Partition


def _first_report() -> tuple[Partition, CycleResult]:
    p = Partition("c1", 7, SchedulerConfig())
    for rec in world():
        p.apply_record(rec)
    p.mark_rebuilt()
    result = p.cycle(NOW)
    assert result.cluster_queues and result.local_queues
    return p, result


def _reserving(r: CycleResult, n: int) -> CycleResult:
    return CycleResult(cycle=r.cycle,
                       cluster_queues=tuple(msgspec.structs.replace(s, reserving_workloads=n) for s in r.cluster_queues),
                       local_queues=tuple(msgspec.structs.replace(s, reserving_workloads=n) for s in r.local_queues))


def _gauges(results: list[CycleResult], state: SchedulerState,
            gauged: metrics.Gauged | None = None) -> list[MetricUpdate]:
    reported = metrics.ReportedStatuses()
    reported.add(results)
    return reported.take_gauges(state, gauged)


def test_a_report_emits_only_the_gauges_that_changed_and_the_series_agree() -> None:
    p, first = _first_report()
    gauged = metrics.Gauged()
    every, only_changed = ProcessMetrics(), ProcessMetrics()
    full = _gauges([first], p.state, gauged)
    assert {u.metric for u in full} >= {"kueue_cluster_queue_nominal_quota", "kueue_local_queue_status"}
    every.apply(full)
    only_changed.apply(full)
    for n in (1, 0, 2):
        report = [_reserving(first, n)]
        changed = _gauges(report, p.state, gauged)
        assert {u.metric for u in changed} == {"kueue_reserving_active_workloads",
                                               "kueue_local_queue_reserving_active_workloads"}
        every.apply(_gauges(report, p.state))
        only_changed.apply(changed)
    assert only_changed.exposition() == every.exposition()
    assert _gauges([_reserving(first, 2)], p.state, gauged) == []  # nothing changed
    assert len(_gauges([first], p.state, metrics.Gauged())) == len(full)  # a new term: all again
