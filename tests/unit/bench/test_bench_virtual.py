"""The admission core alone on a virtual clock: outcomes of small plans, exact to the millisecond."""

from __future__ import annotations

from pathlib import Path

import pytest

from kq.bench.config import load_config, parse_config
from kq.bench.generate import build_plan
from kq.bench.metrics import RunLog, compute
from services.admission.bench_virtual import run_virtual

REPO = Path(__file__).resolve().parents[3]

# One queue of 4 cpu: a long low-priority workload at 100 ms, a short high-priority one at 300 ms
# that needs the whole queue, so it preempts the first.
PREEMPT = """
cohorts:
  - className: co
    count: 1
    queuesSets:
      - className: cq
        count: 1
        nominalQuota: 4
        withinClusterQueue: LowerPriority
        workloadsSets:
          - count: 1
            creationIntervalMs: 100
            workloads: [{className: low, runtimeMs: 1000, priority: 1, request: 4}]
          - count: 1
            creationIntervalMs: 300
            workloads: [{className: high, runtimeMs: 100, priority: 9, request: 4}]
"""


def _timeline(log: RunLog, key: str) -> list[tuple[float, str]]:
    out: list[tuple[float, str]] = []
    for ev in log.workload_events:
        if ev.key == key:
            out.append((ev.t_ms, "".join(c for c, on in (("A", ev.admitted), ("E", ev.evicted), ("F", ev.finished))
                                         if on)))
    return out


def test_preempted_workload_runs_its_full_runtime_again() -> None:
    plan = build_plan(parse_config(PREEMPT))
    log = run_virtual(plan)
    assert _timeline(log, "cq-0-0-co-0/low-0-0-0") == [
        (100.0, ""), (100.0, "A"),  # created, admitted at once
        (300.0, "AE"), (300.0, "E"),  # preempted by the high one, quota released
        (400.0, "A"),  # the high one finished: admitted again
        (1400.0, "AF"),  # a full 1000 ms after the second admission
    ]
    assert _timeline(log, "cq-0-0-co-0/high-1-0-0") == [(300.0, ""), (300.0, "A"), (400.0, "AF")]
    f = compute(plan, log)
    assert (f.wall_ms, f.finished, f.over_quota) == (1400.0, 2, ())
    assert f.wl_classes["low"].total_evictions == 1
    assert f.wl_classes["low"].average_time_to_admission_ms == 300  # creation 100 -> latest admission 400


@pytest.mark.parametrize(
    ("latency", "high_tta", "low_tta", "wall"),
    [
        pytest.param(0.0, 0, 300, 1400.0, id="no-latency"),
        # Each cycle's decisions land 50 ms later: the preemption at 350, the high one's admission at
        # 400, the low one's second admission at 550 (it finishes at 1550), the idle status at 1600.
        pytest.param(50.0, 100, 450, 1600.0, id="50ms"),
    ],
)
def test_cycle_latency_delays_decisions(latency: float, high_tta: int, low_tta: int, wall: float) -> None:
    plan = build_plan(parse_config(PREEMPT))
    f = compute(plan, run_virtual(plan, cycle_latency_ms=latency))
    got = (f.wl_classes["high"].average_time_to_admission_ms, f.wl_classes["low"].average_time_to_admission_ms,
           f.wall_ms)
    assert got == (high_tta, low_tta, wall)


def test_small_config_completes_within_quota_and_is_deterministic() -> None:
    plan = build_plan(load_config(REPO / "bench" / "small.yaml"))
    first, second = run_virtual(plan), run_virtual(plan)
    assert first.workload_events == second.workload_events
    assert first.cq_reports == second.cq_reports
    f = compute(plan, first)
    assert f.finished == f.created == f.expected
    assert f.over_quota == ()
    assert f.wall_ms is not None and f.wall_ms >= f.physical_wall_ms
    assert 0 < f.cq_classes["cq"].usage_percent <= f.physical_usage_percent + 1e-9
