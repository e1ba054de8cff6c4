"""What every seeded chaos test asserts of its run: kq's promises kept, every job finished once."""

from __future__ import annotations

from kq.chaos.run import ChaosResult


def assert_promises_kept(result: ChaosResult, jobs: int) -> str:
    """No violation, one Workload per Job, every job finished; the summary, for further messages."""
    summary = result.summary()
    rep = result.report
    assert rep.violations == [], summary
    assert (rep.workloads, rep.jobs, result.finished) == (jobs, jobs, jobs), summary
    assert rep.ends["finished"] == jobs, summary
    return summary
