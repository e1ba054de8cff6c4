"""`kq bench --solver`: wiring and the benchmark's own sanity (small sizes; figures are in the README)."""

from __future__ import annotations

import pytest

from kq.bench import cli
from services.tas import solver_bench


def test_cli_runs_the_solver_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--solver", "--nodes", "300", "--levels", "3", "--workloads", "200"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    for key in ("decisionsPerSecond", "p50Ms", "p99Ms", "placed"):
        assert f"  {key}: " in out


def test_cli_refuses_a_config_with_solver_and_needs_one_without(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--solver", "x.yaml"]) == cli.EXIT_INVALID
    assert cli.main([]) == cli.EXIT_INVALID


def test_benchmark_is_deterministic_in_its_decisions() -> None:
    a = solver_bench.run(nodes=200, levels=4, workloads=300, seed=7)
    b = solver_bench.run(nodes=200, levels=4, workloads=300, seed=7)
    assert (a.placements, a.failures, len(a.latencies_ms)) == (b.placements, b.failures, len(b.latencies_ms))
    assert a.placements > 0 and a.failures > 0  # it fills the cluster and keeps churning
