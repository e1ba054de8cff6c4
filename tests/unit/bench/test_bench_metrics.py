"""Figures from hand-made event logs: each case states the log and the figures it must give."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kq.bench.generate import BenchPlan, QueuePlan, WorkloadPlan
from kq.bench.metrics import CompletionTracker, CQReport, ProcessStats, RunLog, WorkloadSeen, completion_ms, compute
from kq.bench.report import render

# One cohort "co" of two queues, 10 cpu each (borrowing up to 5 more); one workload class per queue.
QA = QueuePlan(name="qa", class_name="cq", cohort="co", cohort_class="co", nominal_milli=10_000,
               borrowing_limit_milli=5_000)
QB = QueuePlan(name="qb", class_name="cq", cohort="co", cohort_class="co", nominal_milli=10_000,
               borrowing_limit_milli=5_000)


def _wl(i: int, q: QueuePlan, cls: str, cpu: int, runtime: int, at: int = 0) -> WorkloadPlan:
    return WorkloadPlan(index=i, at_ms=at, namespace=q.name, name=f"w{i}", cluster_queue=q.name, class_name=cls,
                        runtime_ms=runtime, priority=0, request_milli=cpu * 1000, pod_count=1)


W1 = _wl(1, QA, "small", 4, 100)
W2 = _wl(2, QA, "small", 4, 100)
W3 = _wl(3, QB, "large", 8, 200)
W4 = _wl(4, QB, "large", 8, 1)
PLAN = BenchPlan(flavor="rf", queues=(QA, QB), cohorts=("co",), workloads=(W1, W2, W3, W4))


def cq(t: float, name: str, usage: int, pending: int = 0, reserving: int = 0, active: bool = True) -> CQReport:
    return CQReport(t_ms=t, cq=name, usage_milli=usage, reserved_milli=usage, pending=pending, reserving=reserving,
                    active=active)


def seen(t: float, w: WorkloadPlan, state: str, *, created: float | None = None, admitted_at: float | None = None,
         rv: int = 0) -> WorkloadSeen:
    return WorkloadSeen(t_ms=t, key=w.key, admitted="A" in state, evicted="E" in state, finished="F" in state,
                        created_ms=created, admitted_ms=admitted_at, rv=rv)


@dataclass
class Case:
    reports: list[CQReport] = field(default_factory=list)
    events: list[WorkloadSeen] = field(default_factory=list)
    all_created: float | None = 0.0
    want: dict[str, object] = field(default_factory=dict)


def _figure(figures: object, path: str) -> object:
    node = figures
    for part in path.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return node


CASES = {
    "usage-held-between-reports": Case(
        # qa holds 8 cpu for 100 ms then 4 cpu for 100 ms; qb nothing; window 0..200 ms, 20 cpu nominal.
        reports=[cq(0, "qa", 8000), cq(0, "qb", 0), cq(100, "qa", 4000), cq(200, "qa", 0), cq(200, "qb", 0)],
        want={"cq_classes.cq.cpu_used": 8000 * 100 + 4000 * 100, "cq_classes.cq.nominal_quota": 20_000,
              "cq_classes.cq.first_event_ms": 0, "cq_classes.cq.last_event_ms": 200,
              "cq_classes.cq.cpu_average_usage": 6000, "cq_classes.cq.usage_percent": 30.0},
    ),
    "usage-window-is-first-to-last-report": Case(
        reports=[cq(50, "qa", 20_000), cq(150, "qa", 0)],
        want={"cq_classes.cq.usage_percent": 100.0 * 20_000 * 100 / (20_000 * 100)},
    ),
    "idle-split-by-whether-work-waited": Case(
        # 0..100: 8 of 20 cpu used, qb has a pending workload -> 12 cpu idle while waiting;
        # 100..200: nothing used, nothing pending -> 20 cpu idle with nothing waiting.
        reports=[cq(0, "qa", 8000), cq(0, "qb", 0, pending=1), cq(100, "qa", 0), cq(100, "qb", 0), cq(200, "qa", 0)],
        want={"cq_classes.cq.idle_while_pending_percent": 100.0 * 12_000 * 100 / (20_000 * 200),
              "cq_classes.cq.idle_while_empty_percent": 100.0 * 20_000 * 100 / (20_000 * 200)},
    ),
    "runtime-usage-counts-finished-work-only": Case(
        reports=[cq(0, "qa", 0), cq(1000, "qa", 0)],
        events=[seen(0, W1, ""), seen(10, W1, "A"), seen(110, W1, "AF"), seen(0, W3, ""), seen(5, W3, "A")],
        want={"cq_classes.cq.runtime_usage_percent": 100.0 * 4000 * 100 / (20_000 * 1000)},
    ),
    "time-to-admission-prefers-api-times": Case(
        events=[seen(5, W1, "", created=0), seen(900, W1, "A", created=0, admitted_at=300)],
        # The class mean is over the workloads seen (Kueue's recorder): one here, though the plan has two.
        want={"wl_classes.small.average_time_to_admission_ms": 300, "wl_classes.small.count": 1,
              "wl_classes.small.average_observed_time_to_admission_ms": 895},
    ),
    "time-to-admission-falls-back-to-observed-when-api-times-disagree": Case(
        events=[seen(5, W3, "", created=100), seen(900, W3, "A", created=100, admitted_at=50)],
        want={"wl_classes.large.average_time_to_admission_ms": 895},
    ),
    "readmission-counts-from-creation-to-the-latest-admission": Case(
        events=[seen(0, W3, "", created=0), seen(10, W3, "A", created=0, admitted_at=10),
                seen(50, W3, "AE", created=0, admitted_at=10), seen(60, W3, "E", created=0),
                seen(400, W3, "A", created=0, admitted_at=400), seen(600, W3, "AF", created=0, admitted_at=400)],
        want={"wl_classes.large.average_time_to_admission_ms": 400, "wl_classes.large.total_evictions": 1,
              "wl_classes.large.average_time_to_finish_ms": 600, "wl_classes.large.finished": 1,
              "admitted": 1, "finished": 1},
    ),
    "each-eviction-transition-counts": Case(
        events=[seen(0, W1, ""), seen(1, W1, "A"), seen(2, W1, "AE"), seen(3, W1, "E"), seen(4, W1, "A"),
                seen(5, W1, "AE"), seen(6, W1, "E"), seen(7, W1, "E")],
        want={"wl_classes.small.total_evictions": 2},
    ),
    "evicted-runs-are-wasted-work": Case(
        reports=[cq(0, "qa", 0), cq(1000, "qa", 0)],
        events=[seen(0, W3, ""), seen(100, W3, "A"), seen(150, W3, "AE"), seen(151, W3, "E")],
        want={"cq_classes.cq.evicted_work_percent": 100.0 * 8000 * 50 / (20_000 * 1000)},
    ),
    "over-quota-in-api-order-not-arrival-order": Case(
        # W2 finished (rv 5) before W3 was admitted (rv 6), but the runner saw them the other way round:
        # in arrival order the cohort would peak at 16 of 20 cpu, in the API's order at 12.
        events=[seen(0, W1, "A", rv=1), seen(0, W2, "A", rv=2), seen(1, W3, "A", rv=6), seen(2, W2, "AF", rv=5)],
        want={"over_quota": (), "max_cohort_usage_percent": 60.0},
    ),
    "over-quota-cohort-detected": Case(
        # 4 + 4 + 8 + 8 = 24 of 20 cpu in the cohort; qb holds 16, over its 10 + 5.
        events=[seen(0, W1, "A", rv=1), seen(0, W2, "A", rv=2), seen(1, W3, "A", rv=3), seen(0, W4, "A", rv=4)],
        want={"over_quota": ("ClusterQueue qb", "cohort co"), "max_cohort_usage_percent": 120.0},
    ),
    "over-quota-queue-detected-from-status": Case(
        reports=[cq(0, "qa", 16_000)],
        want={"over_quota": ("ClusterQueue qa (status)",)},
    ),
    "wall-ends-when-every-queue-is-idle-after-the-last-creation": Case(
        reports=[cq(0, "qa", 0), cq(0, "qb", 0), cq(10, "qa", 4000, reserving=1), cq(300, "qa", 0),
                 cq(400, "qb", 0, pending=1), cq(500, "qb", 0)],
        all_created=350,
        want={"wall_ms": 500.0},
    ),
    "wall-none-when-never-idle": Case(
        reports=[cq(0, "qa", 0, pending=1), cq(0, "qb", 0)],
        want={"wall_ms": None},
    ),
}

@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_figures_from_event_log(case: Case) -> None:
    log = RunLog(mode="virtual", cq_reports=case.reports, workload_events=case.events, all_created_ms=case.all_created)
    figures = compute(PLAN, log)
    got = {path: _figure(figures, path) for path in case.want}
    assert got == case.want


def test_completion_tracker_counts_unreported_and_inactive_queues() -> None:
    t = CompletionTracker(["qa", "qb"])
    assert not t.idle()
    t.feed(cq(0, "qa", 0))
    assert t.busy_queues() == ["qb"]
    t.feed(cq(1, "qb", 0, pending=3, active=False))  # an inactive queue cannot be waited for
    assert t.idle()
    t.feed(cq(2, "qa", 0, reserving=1))
    assert t.busy_queues() == ["qa"]
    t.feed(cq(3, "other", 0, pending=1))  # not ours
    assert t.busy_queues() == ["qa"]


def test_completion_needs_the_last_creation() -> None:
    reports = [cq(0, "qa", 0), cq(0, "qb", 0)]
    assert completion_ms(reports, ["qa", "qb"], None) is None
    assert completion_ms(reports, ["qa", "qb"], 250.0) == 250.0


def test_summary_counts_every_workload_class_of_the_plan() -> None:
    figures = compute(PLAN, RunLog(mode="live"))
    assert sorted(figures.wl_classes) == ["large", "small"]
    assert figures.wl_classes["small"].count == 0
    assert figures.expected == 4


def test_cpu_per_workload_leaves_out_the_set_up_and_the_driver() -> None:
    def stats(name: str, cpu_ms: int) -> ProcessStats:
        return ProcessStats(name=name, max_rss_bytes=0, cpu_ms=cpu_ms)

    log = RunLog(mode="live", created=4,
                 processes_at_start=[stats("kubesim", 1000), stats("watcher", 2000)],
                 processes=[stats("kubesim", 1008), stats("watcher", 2004)],
                 runner_at_start=stats("driver", 3000), runner=stats("driver", 3002))
    figures = compute(PLAN, log)
    assert figures.cpu_ms_per_workload == {"kubesim": 2.0, "watcher": 1.0, "all": 3.0}
    assert figures.driver_cpu_ms_per_workload == 0.5
    text = render(figures, PLAN, config="x.yaml")
    assert "cpu ms per workload from the queues' creation on: kubesim 2.00, watcher 1.00, all 3.00" in text
    assert "the bench driver (not in all) 0.50" in text


def test_phases_end_at_each_class_s_last_finish_with_what_finished_and_the_cpu_held() -> None:
    # Capacity 20 cpu. large W3 (8 cpu) held 0-200 and W4 (8 cpu) 0-50: the larges end at 200 ms.
    # small W1 (4 cpu) held 100-300, evicted at 150 and admitted again at 200; W2 (4 cpu) 250-400:
    # the smalls end at 400 ms.
    events = [seen(0, W3, "A"), seen(0, W4, "A"), seen(50, W4, "AF"), seen(100, W1, "A"), seen(150, W1, "E"),
              seen(200, W3, "AF"), seen(200, W1, "A"), seen(250, W2, "A"), seen(300, W1, "AF"), seen(400, W2, "AF")]
    [large, small] = compute(PLAN, RunLog(mode="live", workload_events=events)).phases
    assert (large.ends_with, large.start_ms, large.end_ms, large.finished) == ("large", 0.0, 200.0, 2)
    held_large = 8000 * 200 + 8000 * 50 + 4000 * 50  # W1's run cut by its eviction counts while held
    assert large.held_percent == pytest.approx(100.0 * held_large / (20_000 * 200))
    assert (small.ends_with, small.start_ms, small.end_ms, small.finished) == ("small", 200.0, 400.0, 2)
    assert small.held_percent == pytest.approx(100.0 * (4000 * 100 + 4000 * 150) / (20_000 * 200))
    text = render(compute(PLAN, RunLog(mode="live", workload_events=events)), PLAN, config="x.yaml")
    assert "      0.0-  0.2 s  large            2 finished      10/s   cpu held  55.0 % of quota" in text
    assert "      0.2-  0.4 s  small            2 finished      10/s   cpu held  25.0 % of quota" in text


def test_a_workload_still_held_when_the_log_ends_counts_until_its_last_event() -> None:
    events = [seen(0, W1, "A"), seen(0, W3, "A"), seen(100, W3, "AF")]
    [large] = compute(PLAN, RunLog(mode="live", workload_events=events)).phases
    assert large.held_percent == pytest.approx(100.0 * (8000 * 100 + 4000 * 100) / (20_000 * 100))
    # One phase is no picture: the report leaves it out.
    assert "phases" not in render(compute(PLAN, RunLog(mode="live", workload_events=events)), PLAN, config="x.yaml")
