"""The short chaos run of `make test`: the whole stack (supervised, a standby admission), Jobs in a
cohort tree with priorities, preemption and a MultiKueue worker, while a seeded sequence of faults
hits it (the watcher and the active admission killed, nats-server killed, watches cut, a 409
storm); then kq.chaos.check replays kubesim's journal: no instant over quota or under a guarantee
(reserved and running), no job in two clusters or with two Workloads, every workload finished.
The long mode is `kq chaos --long` (README)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.chaos_checks import assert_promises_kept

from kq.chaos.run import ChaosConfig, run_chaos

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]
FAULTS = ("kill-watcher", "takeover-admission", "kill-nats", "watch-cut", "conflict-409")
JOBS = 60


async def test_short_chaos_run_keeps_every_promise(tmp_path: Path) -> None:
    cfg = ChaosConfig(dir=tmp_path, seed=13, workloads=JOBS, rate=15.0, faults=FAULTS, first_fault_s=2.0,
                      gap_s=(1.0, 2.0), hold_s=1.0, drain_timeout_s=240.0, startup_timeout_s=120.0)
    result = await run_chaos(cfg)
    summary = assert_promises_kept(result, JOBS)
    rep = result.report
    # Every kind was injected, and the killed processes came back through the supervisor.
    assert {f.kind for f in result.injected} == set(FAULTS), summary
    assert {"watcher", "nats-server"} <= set(result.restarts), summary
    assert result.not_recovered == 0 and result.ok, summary
    # The checker saw the run: quota was taken and pods ran (it is not checking an empty history).
    assert len(rep.progress) >= JOBS and rep.records > 10 * JOBS, summary
