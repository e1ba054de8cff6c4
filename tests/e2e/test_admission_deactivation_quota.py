"""Deactivating a running workload never puts the cluster over quota (issue 7), measured.

The scenario scenarios/core/deactivate-running-workload.yaml runs through the real stack
(nats-server, kubesim, watcher, admission as processes): with 9 cpu of quota, job-a (3 x 3 cpu)
runs, job-b (the same) waits, then job-a's Workload is deactivated. While it runs, this test
samples the pods kubesim holds and sums the cpu of every pod not yet terminated, at every
sample; that sum must never exceed the quota, and job-b's pods must have run by the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from kq.quantity import to_milli
from kq.stack.state import read_state, state_path

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "scenarios" / "core" / "deactivate-running-workload.yaml"
QUOTA_MILLI = 9000
RUN_TIMEOUT_S = 150

pytestmark = pytest.mark.e2e


def _running_cpu(kubesim: str) -> tuple[int, set[str]]:
    """cpu (milli) of the pods in namespace demo that have not terminated, and their jobs."""
    url = f"{kubesim}/clusters/manager/api/v1/namespaces/demo/pods"
    with urllib.request.urlopen(url, timeout=5) as resp:
        pods = json.load(resp)["items"]
    total, jobs = 0, set[str]()
    for pod in pods:
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for c in pod["spec"]["containers"]:
            total += to_milli(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
        jobs.update(o["name"] for o in pod["metadata"].get("ownerReferences", ()) if o.get("kind") == "Job")
    return total, jobs


@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
def test_running_cpu_never_exceeds_the_quota_while_a_workload_is_deactivated(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KQ_")}
    workdir = tmp_path / "stack"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kq.cli.main", "scenario", "run", str(SCENARIO), "--json", "--workdir", str(workdir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
    )
    samples: list[tuple[int, set[str]]] = []
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        kubesim = None
        while proc.poll() is None and time.monotonic() < deadline:
            if kubesim is None:
                if state_path(workdir).exists():
                    kubesim = read_state(workdir).kubesim_url
                time.sleep(0.05)  # polling for the stack to come up, not synchronisation
                continue
            with contextlib.suppress(OSError):  # the stack is going down
                samples.append(_running_cpu(kubesim))
            time.sleep(0.02)
        out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert samples, f"the stack was never sampled:\n{err[-3000:]}"
    peak = max(total for total, _ in samples)
    assert peak <= QUOTA_MILLI, f"{peak}m cpu ran against a {QUOTA_MILLI}m quota"
    assert proc.returncode == 0, f"scenario failed:\n{out[-3000:]}\n{err[-3000:]}"
    seen = set().union(*(jobs for _, jobs in samples))
    assert {"job-a", "job-b"} <= seen, f"pods seen only of {sorted(seen)}"
