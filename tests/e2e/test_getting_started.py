"""Kueue's getting-started objects, unchanged, run to completion on `kq up`: its quick-start
ResourceFlavor/ClusterQueue/LocalQueue with `kq apply`, its sample Job (generateName, no
`suspend`) with `kq create`; the Job is suspended, gets a Workload, is admitted with the
flavor, runs its three `sleep 60` pods (scaled by kubesim), completes, and the quota is freed."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e.test_cli_stack import EXAMPLES, kq, table
from support.wait import eventually

from kq.stack import stop_stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


async def test_kueue_quick_start_runs_to_completion(tmp_path: Path) -> None:
    up = await kq("up", "--dir", "s", "--sleep-scale", "0.05", "--timeout", "120", cwd=tmp_path, timeout=150)
    try:
        assert up.code == 0, up
        setup = await kq("apply", "--dir", "s", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"), cwd=tmp_path)
        assert setup.code == 0, setup
        created = await kq("create", "--dir", "s", "-f", str(EXAMPLES / "sample-job.yaml"), cwd=tmp_path)
        assert created.code == 0, created
        [line] = created.out.splitlines()
        job = line.split()[0].split("/", 1)[1]
        assert job.startswith("sample-job-") and line.endswith(" created"), line

        async def rows(kind: str) -> list[dict[str, str]]:
            got = await kq("get", "--dir", "s", kind, "-n", "default", cwd=tmp_path)
            assert got.code == 0, got
            return table(got.out) if got.out else []

        async def workloads_in(*states: str) -> list[tuple[str, str]]:
            got = [(r["NAME"], r["STATE"]) for r in await rows("workloads")]
            assert len(got) == 1 and got[0][1] in states, got
            return got

        # Admitted first (3 pods of 1 cpu fit the 9-cpu queue), then finished once the pods' sleep ends.
        await eventually(lambda: workloads_in("Admitted", "Finished"), timeout=60, interval=0.5,
                         what="the sample Job's Workload is admitted")
        [(wl_name, _)] = await eventually(lambda: workloads_in("Finished"), timeout=60, interval=0.5,
                                          what="the sample Job's Workload finishes")
        assert wl_name.startswith(f"job-{job}-")

        async def job_complete() -> list[dict[str, str]]:
            got = await rows("jobs")
            assert [r["NAME"] for r in got] == [job] and "Complete" in str(got), got
            return got

        await eventually(job_complete, timeout=30, interval=0.5, what="the Job completes")

        async def quota_released() -> list[dict[str, str]]:
            got = await rows("clusterqueues")
            assert [(r["NAME"], r["PENDING WORKLOADS"], r["ADMITTED WORKLOADS"]) for r in got] == [
                ("cluster-queue", "0", "0")], got
            return got

        await eventually(quota_released, timeout=30, interval=0.5, what="the quota is released")

        # "Why": the admission decision, with its ClusterQueue and flavors, is in the workload's history.
        described = await kq("describe", "--dir", "s", "workload", f"default/{job}", cwd=tmp_path)
        assert described.code == 0, described
        decisions = described.out.split("Decisions:", 1)[1]
        assert "Admitted" in decisions and "cluster-queue" in decisions and "default-flavor" in decisions, described
    finally:
        down = await kq("down", "--dir", "s", cwd=tmp_path, timeout=60)
        if (tmp_path / "s" / "stack.json").exists():
            await stop_stack(tmp_path / "s", grace_s=2.0)
    assert down.code == 0, down
