"""The README's MultiKueue quick start, run as written: its shell block is read from README.md and
every line runs as a new user would type it (`kq` is this checkout's CLI, in a scratch directory
where `examples/` is the repository's). Every command exits 0, and before `kq down` the three
samples' manager Workloads finish, each recording the worker it ran on (Kueue's setup file names
that MultiKueueCluster `multikueue-test-worker1`), the manager's Job shows the worker Job's
completion, and no pod ran on the manager. A README edit that breaks the quick start fails here."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from e2e.test_cli_stack import kq
from support.wait import eventually

from kq.stack import stop_stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[2]
HEADING = "### MultiKueue: one queue in front of many clusters"
WORKER = "multikueue-test-worker1"


def quick_start() -> list[list[str]]:
    """The commands of the first ```sh block under the heading, comments dropped."""
    text = (REPO / "README.md").read_text()
    section = text.split(HEADING, 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the MultiKueue section has no sh block"
    lines = [shlex.split(line, comments=True) for line in block.group(1).splitlines()]
    return [argv for argv in lines if argv]


def test_the_quick_start_is_the_readme_s() -> None:
    commands = quick_start()
    assert commands[0] == ["kq", "up"] and commands[-1] == ["kq", "down"], commands
    assert all(argv[0] == "kq" for argv in commands), commands
    created = [argv[-1] for argv in commands if argv[1] == "create"]
    assert created == ["examples/multikueue/sample-job.yaml", "examples/multikueue/sample-jobset.yaml",
                       "examples/multikueue/sample-rayjob.yaml"], created


async def test_readme_multikueue_quick_start_runs_as_written(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    commands = quick_start()
    body, down = commands[:-1], commands[-1]
    first_get = next(i for i, argv in enumerate(body) if argv[1] == "get")
    try:
        for argv in body[:first_get]:
            run = await kq(*argv[1:], cwd=tmp_path, timeout=180 if argv[1] == "up" else 60)
            assert run.code == 0, (argv, run)

        async def finished_where_they_ran() -> list[dict]:
            got = await kq("get", "workloads", "-n", "default", "-o", "json", cwd=tmp_path)
            assert got.code == 0, got
            items = json.loads(got.out)["items"]
            done = [(w["metadata"]["name"], w.get("status", {}).get("clusterName"),
                     {c["type"]: c["status"] for c in w.get("status", {}).get("conditions", [])}.get("Finished"))
                    for w in items]
            assert len(done) == 3 and all(c == WORKER and f == "True" for _, c, f in done), done
            return items

        # The samples run 10 s on the worker; the listing lines are what a user reads meanwhile.
        for argv in body[first_get:]:
            run = await kq(*argv[1:], cwd=tmp_path)
            assert run.code == 0, (argv, run)
        items = await eventually(finished_where_they_ran, timeout=120, interval=1.0,
                                 what="every sample finishes, recording the worker it ran on")
        kinds = sorted(ref["kind"] for w in items for ref in w["metadata"].get("ownerReferences", []))
        assert kinds == ["Job", "JobSet", "RayJob"], kinds

        jobs = await kq("get", "jobs", "-n", "default", "-o", "json", cwd=tmp_path)
        assert jobs.code == 0, jobs
        [job] = json.loads(jobs.out)["items"]
        assert job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue", job["spec"]
        # The manager's Job shows the worker Job's end; it never ran here (no pods on the manager).
        assert {c["type"]: c["status"] for c in job["status"].get("conditions", [])}.get("Complete") == "True", job
        pods = await kq("get", "pods", "-n", "default", "-o", "json", cwd=tmp_path)
        assert pods.code == 0 and json.loads(pods.out)["items"] == [], pods
    finally:
        stopped = await kq(*down[1:], cwd=tmp_path, timeout=90)
        if (tmp_path / ".kq" / "stack" / "stack.json").exists():
            await stop_stack(tmp_path / ".kq" / "stack", grace_s=2.0)
    assert stopped.code == 0, stopped
