"""`make demo` (python -m kq.demo): it brings the stack up, applies examples/demo, reports the
stage it reached, tears everything down and exits 0."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from kq.demo import NEEDS, STAGES
from kq.stack import discover_services

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def test_demo_runs_and_says_which_stage_it_reached() -> None:
    run = subprocess.run([sys.executable, "-m", "kq.demo", "--stall", "60", "--timeout", "120"],
                         capture_output=True, text=True, timeout=230)
    report = f"exit {run.returncode}\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert run.returncode == 0, report
    assert "job.batch/train-a created" in run.stdout, report
    reached = re.findall(r"stage: (.+)", run.stdout)
    assert reached, report
    last = reached[-1].strip()
    services = discover_services()
    expected = next((s for s in STAGES[2:] if NEEDS[s] not in services), None)
    if expected is None:
        assert last == "all finished", report
        assert "every stage reached" in run.stdout
    else:  # the stage before the first one whose service is missing
        assert last == STAGES[STAGES.index(expected) - 1], report
        assert f"needs the {NEEDS[expected]} service" in run.stdout
    assert run.stdout.rstrip().endswith("kq demo: done"), report
    assert "kq-demo-" not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
