"""The demo's stage tracking: which stage a set of job rows shows (pure)."""

from __future__ import annotations

import pytest

from kq.demo import STAGES, JobRow, Progress


def row(job: str, workload: str = "", state: str = "", status: str = "Suspended") -> JobRow:
    return JobRow("ns", job, workload, "q" if workload else "", state, status)


@pytest.mark.parametrize(
    ("history", "stage"),
    [
        pytest.param([[row("a", status="<not mirrored>")]], "objects applied", id="nothing-mirrored"),
        pytest.param([[row("a"), row("b", status="<not mirrored>")]], "objects applied", id="one-not-mirrored"),
        pytest.param([[row("a"), row("b")]], "jobs mirrored", id="mirrored"),
        pytest.param([[row("a", "wa", "Pending"), row("b", "wb", "Pending")]], "workloads created", id="workloads"),
        pytest.param([[row("a", "wa", "Admitted"), row("b", "wb", "Pending")]], "workloads created",
                     id="one-admitted"),
        pytest.param([[row("a", "wa", "Admitted"), row("b", "wb", "Pending")],
                      [row("a", "wa", "Finished"), row("b", "wb", "Admitted")]], "all admitted",
                     id="admitted-at-different-times"),
        pytest.param([[row("a", "wa", "Finished"), row("b", "wb", "Finished")]], "all finished", id="finished"),
        pytest.param([[row("a", "wa", "Admitted")], [row("a", "wa", "Evicted")]], "all admitted",
                     id="a-stage-once-reached-stays"),
    ],
)
def test_stages(history: list[list[JobRow]], stage: str) -> None:
    p = Progress()
    for rows in history:
        p.update(rows)
    assert p.stage == stage
    assert p.next == (None if stage == STAGES[-1] else STAGES[STAGES.index(stage) + 1])
