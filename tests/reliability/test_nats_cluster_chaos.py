"""A replicated bus (`kq up --nats-cluster 3`): Jobs run to completion while one of the three
nats-server nodes is killed with SIGKILL mid-run and started again by the supervisor (same ports
and store: it rejoins). The streams are R3, every service knows every node's URL, so kq keeps
deciding; kq.chaos.check replays kubesim's journal: every Job finished, none admitted twice (one
Workload per Job), never over quota. The long mode (a majority killed and brought back) is
`kq chaos --nats-cluster 3` (README)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.chaos_checks import assert_promises_kept

from kq.chaos.run import ChaosConfig, run_chaos

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
JOBS = 15


async def test_a_killed_nats_node_loses_nothing(tmp_path: Path) -> None:
    cfg = ChaosConfig(dir=tmp_path, seed=5, workloads=JOBS, rate=5.0, faults=("kill-nats-node",), first_fault_s=1.0,
                      gap_s=(2.0, 3.0), hold_s=1.0, drain_timeout_s=180.0, startup_timeout_s=120.0, nats_cluster=3, shuffle=False)
    result = await run_chaos(cfg)
    summary = assert_promises_kept(result, JOBS)
    rep = result.report
    killed = [f.detail for f in result.injected if f.kind == "kill-nats-node"]
    assert killed and all(result.restarts[node] >= 1 for node in killed), summary
    # Jobs are created for 3 s, the first kill after 1 s: the run went on deciding after it.
    assert any(t > result.injected[0].end for t in rep.progress), summary
    assert result.ok, summary
