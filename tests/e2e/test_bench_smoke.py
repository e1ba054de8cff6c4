"""`kq bench bench/small.yaml --summary F --journal J` through the live stack (every service its own
process): the summary has every key, every workload finished, no ClusterQueue or cohort went over
quota, and the journal's hops are reported for every run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kq.bench.report import missing_keys

REPO = Path(__file__).resolve().parents[2]
RECORD_TIMEOUT_S = 120  # the run itself; the small config's physical limit is ~11 s
RUN_TIMEOUT_S = RECORD_TIMEOUT_S + 90  # + stack start-up and shutdown

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
def test_small_bench_through_the_live_stack(tmp_path: Path) -> None:
    summary = tmp_path / "summary.yaml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KQ_")}
    proc = subprocess.run(
        [sys.executable, "-m", "kq.cli.main", "bench", "bench/small.yaml", "--summary", str(summary),
         "--timeout", str(RECORD_TIMEOUT_S), "--workdir", str(tmp_path / "work"),
         "--journal", str(tmp_path / "journal.jsonl")],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=REPO, env=env,
    )
    said = f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert summary.exists(), said
    doc = yaml.safe_load(summary.read_text())
    assert missing_keys(doc) == [], said
    assert sorted(doc["workloadClasses"]) == ["large", "medium", "small"], said
    w = doc["workloads"]
    assert w["created"] == w["finished"] == w["expected"] == 292, said
    assert sum(c["count"] for c in doc["workloadClasses"].values()) == 292, said
    assert doc["overQuotaClusterQueues"] == [], said
    assert doc["timedOut"] is False and doc["cmdStats"]["wallMs"] > 0, said
    assert doc["cmdStats"]["maxRssBytes"] > 0 and doc["cmdStats"]["startupMs"] > 0, said
    assert 0 < doc["usagePercent"]["cq"] <= 100, said
    # The run cut at each class's last finish, in time order; every workload finished in one of them.
    phases = doc["phases"]
    assert sorted(p["endsWith"] for p in phases) == ["large", "medium", "small"], said
    assert [p["startMs"] for p in phases[1:]] == [p["endMs"] for p in phases[:-1]], said
    # Held is runner-observed: a finish seen after the next admission overlaps them, so not capped at 100.
    assert sum(p["finished"] for p in phases) == 292 and all(0 < p["heldPercent"] < 150 for p in phases), said
    assert "phases (each ends when its class's last workload finished" in proc.stdout, said
    # --journal: every finished run is timed from the API's commit times
    assert "quota held beyond runtime" in proc.stdout and "(292)" in proc.stdout, said
    assert (tmp_path / "journal.jsonl").stat().st_size > 0, said
    assert proc.returncode == 0, said


@pytest.mark.timeout(RUN_TIMEOUT_S * 2)
@pytest.mark.parametrize("dispatcher", ["incremental", "external"])
def test_multikueue_bench_checks_no_job_in_two_workers(tmp_path: Path, dispatcher: str) -> None:
    """`kq bench --workers 2`: the mix through one cluster, then through a manager and two workers
    (external: examples/dispatchers/spread.py nominating, its CPU reported with the services')."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KQ_")}
    proc = subprocess.run(
        [sys.executable, "-m", "kq.cli.main", "bench", "bench/multikueue-tiny.yaml", "--workers", "2",
         "--dispatcher", dispatcher,
         "--timeout", str(RECORD_TIMEOUT_S), "--workdir", str(tmp_path / "work"), "--quiet"],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S * 2, cwd=REPO, env=env,
    )
    said = f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, said
    assert "single cluster               50/50 jobs finished" in proc.stdout, said
    assert "multikueue (2 workers)       50/50 jobs finished" in proc.stdout, said
    assert "job in two workers: never" in proc.stdout, said
    assert "clears it, as in Kueue): 0" in proc.stdout, said
    assert "% of single-cluster" in proc.stdout, said
    if dispatcher == "external":
        assert "dispatcher example.com/spread" in proc.stdout and " spread " in proc.stdout, said
