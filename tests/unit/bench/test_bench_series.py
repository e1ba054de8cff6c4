"""`kq bench --queue-series`: the generated configurations keep the workload count and the rate."""

from __future__ import annotations

import pytest

from kq.bench.generate import build_plan
from kq.bench.metrics import ProcessStats, RunLog
from kq.bench.series import SeriesError, parse_sizes, render_series, series_config, series_row


@pytest.mark.parametrize("queues", [10, 100, 1000, 5000, 7])
def test_every_size_has_the_same_workloads_over_the_same_window(queues: int) -> None:
    plan = build_plan(series_config(queues, 10_000))
    assert len(plan.queues) == queues
    assert len(plan.workloads) == -(-10_000 // queues) * queues
    assert max(w.at_ms for w in plan.workloads) <= 20_000
    assert {q.cohort for q in plan.queues} and all(q.nominal_milli >= 2000 for q in plan.queues)


def test_cpu_per_workload_leaves_the_set_up_out() -> None:
    log = RunLog(mode="live", processes=[ProcessStats(name="admission", max_rss_bytes=1 << 20, cpu_ms=3000)],
                 processes_at_start=[ProcessStats(name="admission", max_rss_bytes=1 << 20, cpu_ms=1000)])
    row = series_row(10, 1000, 1000, 1000, 12.5, log)
    assert row.cpu_ms_per_workload == {"admission": 2.0, "all": 2.0}
    assert "| 10 | 1,000 / 1,000 | 12.5 s | 2.00 | 2.00 | 1 MiB |" in render_series([row])


@pytest.mark.parametrize("text", ["", "10,x", "0", "10,-5"])
def test_bad_sizes_are_refused(text: str) -> None:
    with pytest.raises(SeriesError, match="--queue-series"):
        parse_sizes(text)
