"""`kq bench --queue-series`: the generated configurations keep the workload count and the rate."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from kq.bench import live
from kq.bench.generate import build_plan
from kq.bench.metrics import CompletionTracker, CQReport, ProcessStats, RunLog
from kq.bench.runner import Clock
from kq.bench.series import SeriesError, parse_sizes, render_series, series_config, series_row


@pytest.mark.parametrize("queues", [10, 100, 1000, 5000, 7])
def test_every_size_has_the_same_workloads_over_the_same_window(queues: int) -> None:
    plan = build_plan(series_config(queues, 10_000))
    assert len(plan.queues) == queues
    assert len(plan.workloads) == -(-10_000 // queues) * queues
    assert max(w.at_ms for w in plan.workloads) <= 20_000
    assert {q.cohort for q in plan.queues} and all(q.nominal_milli >= 2000 for q in plan.queues)


def test_cpu_per_workload_leaves_the_set_up_out() -> None:
    def report(t_ms: float) -> CQReport:
        return CQReport(t_ms=t_ms, cq="a", usage_milli=0, reserved_milli=0, pending=0, reserving=0)

    log = RunLog(mode="live", processes=[ProcessStats(name="admission", max_rss_bytes=1 << 20, cpu_ms=3000)],
                 processes_at_start=[ProcessStats(name="admission", max_rss_bytes=1 << 20, cpu_ms=1000)],
                 workloads_from_ms=100.0, cq_reports=[report(50.0), *(report(100.0 + i) for i in range(500))])
    row = series_row(10, 1000, 1000, 1000, 12.5, log)
    assert row.cpu_ms_per_workload == {"admission": 2.0, "all": 2.0}
    assert "| 10 | 1,000 / 1,000 | 12.5 s | 2.00 | 2.00 | 1 MiB | 0.50 |" in render_series([row])


@pytest.mark.parametrize("text", ["", "10,x", "0", "10,-5"])
def test_bad_sizes_are_refused(text: str) -> None:
    with pytest.raises(SeriesError, match="--queue-series"):
        parse_sizes(text)


class _Stack:
    """What live._settle reads of a Stack: its processes (here one idle child, not a service)."""

    def __init__(self, pid: int) -> None:
        self.state = SimpleNamespace(processes=(SimpleNamespace(name="idle", pid=pid, role="nats"),))


@pytest.fixture
def idle_child() -> Iterator[int]:
    child = subprocess.Popen(["sleep", "60"])
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("reported", [True, False])
def test_the_series_waits_for_every_queue_to_report_before_counting(idle_child: int, reported: bool) -> None:
    tracker = CompletionTracker(["cq-1", "cq-2"])
    tracker.feed(CQReport(t_ms=0, cq="cq-1", usage_milli=0, reserved_milli=0, pending=0, reserving=0, active=True))
    if reported:
        tracker.feed(CQReport(t_ms=0, cq="cq-2", usage_milli=0, reserved_milli=0, pending=0, reserving=0, active=True))
    said: list[str] = []
    stack, runner = _Stack(idle_child), SimpleNamespace(tracker=tracker)
    asyncio.run(live._settle(stack, runner, Clock(), 2.5, said.append))  # type: ignore[arg-type]
    assert said[-1].startswith("queues settled" if reported else "the queues did not settle"), said
