"""`kq bench` through kq's own command line: exit codes, messages, the summary file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kq.bench.report import missing_keys
from kq.cli.main import main

REPO = Path(__file__).resolve().parents[3]
SHARED_BENCH = REPO.parent / "shared" / "bench"


def test_tas_config_is_refused_on_virtual_time_saying_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", str(SHARED_BENCH / "tas.yaml"), "--virtual-time"]) == 2
    err = capsys.readouterr().err
    assert "needs topology-aware scheduling" in err
    assert "run it live" in err


def test_invalid_config_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("cohorts:\n  - {className: c, count: 1, queuesSets: [], sizes: 3}\n")
    assert main(["bench", str(cfg), "--virtual-time"]) == 2
    assert "unknown field 'sizes'" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--cycle-latency-ms", "-1"], ["--timeout", "0"]], ids=["latency", "timeout"])
def test_bad_options_exit_2(flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", str(REPO / "bench" / "small.yaml"), "--virtual-time", *flag]) == 2
    assert "must be" in capsys.readouterr().err


def test_journal_is_for_a_live_single_cluster_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", str(REPO / "bench" / "small.yaml"), "--virtual-time",
                 "--journal", str(tmp_path / "j.jsonl")]) == 2
    assert "--journal is for a live single-cluster run" in capsys.readouterr().err


def test_virtual_run_writes_every_summary_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = tmp_path / "summary.yaml"
    code = main(["bench", str(REPO / "bench" / "small.yaml"), "--virtual-time", "--summary", str(summary), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    doc = yaml.safe_load(summary.read_text())
    assert missing_keys(doc) == []
    assert sorted(doc["workloadClasses"]) == ["large", "medium", "small"]
    assert doc["workloads"]["finished"] == doc["workloads"]["expected"] == 292
    assert doc["overQuotaClusterQueues"] == []
    assert "wall" in out and "physical limit" in out


def test_profile_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prof = tmp_path / "bench.prof"
    assert main(["bench", str(REPO / "bench" / "small.yaml"), "--virtual-time", "--quiet", "--profile", str(prof)]) == 0
    assert prof.stat().st_size > 0
    assert "the top functions by own time" in capsys.readouterr().err


def test_missing_keys_names_what_a_summary_lacks() -> None:
    doc = {"clusterQueueClasses": {"cq": {"cpuUsed": 1}}, "workloadClasses": {}, "cmdStats": {"wallMs": 1}}
    missing = missing_keys(doc)
    assert "clusterQueueClasses.cq.nominalQuota" in missing
    assert "workloadClasses (empty)" in missing
    assert "cmdStats.maxRssBytes" in missing
    assert "(top).droppedWorkloadEvents" in missing


def test_virtual_time_without_the_admission_simulator_exits_2_saying_what_is_missing(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from kq.bench import cli

    monkeypatch.setattr(cli, "VIRTUAL_BENCH", "services.admission.no_such_bench")
    assert main(["bench", str(REPO / "bench" / "small.yaml"), "--virtual-time", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--virtual-time needs the admission service's simulator (services.admission.no_such_bench)" in err


@pytest.mark.parametrize(("flags", "dispatcher", "timeout"), [
    ([], "kueue.x-k8s.io/multikueue-dispatcher-incremental", 1800.0),
    (["--dispatcher", "all-at-once", "--timeout", "90"], "kueue.x-k8s.io/multikueue-dispatcher-all-at-once", 90.0),
    (["--dispatcher", "external"], "example.com/spread", 1800.0),
], ids=["defaults", "given", "external"])
def test_multikueue_run_defaults_to_incremental_with_a_long_timeout(
        flags: list[str], dispatcher: str, timeout: float, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """All-at-once puts a copy of every job on each of the 20 workers (4 % of single-cluster
    throughput measured); the 15,000-job baseline's MultiKueue pass needs more than 600 s."""
    import kq.bench.multikueue as mk

    seen: dict[str, object] = {}

    async def fake(plan: object, workers: int, **kw: object) -> tuple[str, bool]:
        seen.update(kw, workers=workers)
        return "figures", True

    monkeypatch.setattr(mk, "run_multikueue_bench", fake)
    assert main(["bench", str(REPO / "bench" / "small.yaml"), "--workers", "20", "--quiet", *flags]) == 0
    assert (seen["workers"], seen["dispatcher"], seen["timeout_s"]) == (20, dispatcher, timeout)
    assert "figures" in capsys.readouterr().out
