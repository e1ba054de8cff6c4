"""kq chaos's arguments: unknown fault kinds are refused by name; --check reads a journal on its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kq.chaos.cli import main

CQ = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
    "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
        {"name": "cpu", "nominalQuota": "1"}]}]}]}}


def wl(cpu: str) -> dict:
    return {"metadata": {"name": "w", "namespace": "ns", "uid": "u1"}, "status": {
        "conditions": [{"type": "QuotaReserved", "status": "True"}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": cpu}}]}}}


def journal(tmp: Path, cpu: str) -> Path:
    lines = [{"c": "manager", "rv": 1, "t": 1.0, "e": "ADDED", "r": "clusterqueues.kueue.x-k8s.io", "o": CQ},
             {"c": "manager", "rv": 2, "t": 2.0, "e": "ADDED", "r": "workloads.kueue.x-k8s.io", "o": wl(cpu)}]
    path = tmp / "j.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_unknown_fault_kind_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--faults", "kill-watcher,unplug-the-moon"]) == 2
    assert "--faults: unknown unplug-the-moon" in capsys.readouterr().err


def test_check_only_reports_a_violation_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check", str(journal(tmp_path, "1"))]) == 0
    assert "violations: 0" in capsys.readouterr().out
    assert main(["--check", str(journal(tmp_path, "2")), "--json"]) == 1
    figures = json.loads(capsys.readouterr().out)
    assert (figures["workloads"], figures["violationsByKind"]) == (1, {"quota (reserved)": 1})


def test_nats_cluster_faults_need_a_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--faults", "kill-nats-node"]) == 2
    assert "kill-nats-node need --nats-cluster 3" in capsys.readouterr().err
    assert main(["--faults", "nats-quorum-loss", "--nats-cluster", "0"]) == 2
    assert "--nats-cluster: want 1 to 5 nodes, got 0" in capsys.readouterr().err
