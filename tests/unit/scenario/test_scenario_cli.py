"""`kq scenario run`/`validate` on files that never reach the stack: exit 2 naming the field."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
import yaml
from scenario_docs import EXAMPLES, OWN_SCENARIOS, SHARED_SCENARIOS, base

from kq.cli.main import main as kq_main
from kq.scenario import cli, load
from kq.scenario.load import load_file


def kq_scenario(*argv: str) -> int:
    """`kq scenario ARGV...` through the real command line (kq.cli.main delegates to kq.scenario.cli.main)."""
    return kq_main(["scenario", *argv])


@pytest.fixture
def invalid_file(tmp_path):
    doc = base()
    doc["name"] = "bad"
    doc["steps"][1]["pods"] = {"workload": "demo/w1", "ready": "maybe"}
    del doc["steps"][1]["finish"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_invalid_file_exits_2_naming_the_field(invalid_file, capsys) -> None:
    assert kq_scenario("run", str(invalid_file)) == cli.EXIT_INVALID
    err = capsys.readouterr().err
    assert f"{invalid_file}: steps[1].pods.ready: expected bool, got str" in err


def test_invalid_file_in_json_mode_prints_one_json_document(invalid_file, capsys) -> None:
    assert kq_scenario("run", str(invalid_file), "--json") == cli.EXIT_INVALID
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["checks"] == []
    assert doc["errors"] == ["steps[1].pods.ready: expected bool, got str"]


def test_unsupported_feature_exits_2_naming_it(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(load.SUPPORTED, "waitForPodsReady", False)
    doc = base()
    doc["config"] = {"waitForPodsReady": {"timeout": "2s"}}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert kq_scenario("run", str(path)) == cli.EXIT_INVALID
    assert "config.waitForPodsReady: not supported by kq yet (feature waitForPodsReady)" in capsys.readouterr().err


def test_validate_subcommand(invalid_file, capsys) -> None:
    good = sorted(EXAMPLES.glob("core/*.yaml"))[0]
    assert kq_scenario("validate", str(good)) == cli.EXIT_OK
    assert kq_scenario("validate", str(good), str(invalid_file)) == cli.EXIT_INVALID
    assert "steps[1].pods.ready" in capsys.readouterr().err


OWN_FILES = sorted((OWN_SCENARIOS / "core").glob("*.yaml")) + sorted((OWN_SCENARIOS / "multikueue").glob("*.yaml"))
# Integration scenarios use kinds beyond the shared format (JobSet, Deployment, StatefulSet): kq's loader only.
INTEGRATION_FILES = sorted((OWN_SCENARIOS / "integrations").glob("*.yaml"))


def test_own_scenarios_exist() -> None:
    assert len(OWN_FILES) >= 4


@pytest.mark.parametrize("path", OWN_FILES + INTEGRATION_FILES, ids=lambda p: p.stem)
def test_own_scenarios_load(path) -> None:
    assert load_file(path).name == path.stem


def test_own_scenarios_pass_the_shared_structural_checker() -> None:
    # The shared checker knows the kinds of the shared examples; files with kinds beyond them (JobSet,
    # Kubeflow, Ray, Trainer through MultiKueue; the integrations) are checked by kq's own loader
    # (test_own_scenarios_load).
    beyond = ("kind: JobSet", "apiVersion: kubeflow.org/", "apiVersion: ray.io/", "apiVersion: trainer.kubeflow.org/",
              "integrations:")
    files = [f for d in sorted(OWN_SCENARIOS.iterdir()) if d.is_dir() and d.name != "integrations"
             for f in sorted(d.glob("*.yaml")) if not any(b in f.read_text() for b in beyond)]
    proc = subprocess.run(
        [sys.executable, str(SHARED_SCENARIOS / "validate.py"), *(str(f) for f in files)],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_add_parser_registers_scenario_under_a_kq_parser(invalid_file, capsys) -> None:
    parser = argparse.ArgumentParser(prog="kq")
    cli.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["scenario", "run", str(invalid_file), "--json"])
    assert args.func(args) == cli.EXIT_INVALID
    assert json.loads(capsys.readouterr().out)["ok"] is False
