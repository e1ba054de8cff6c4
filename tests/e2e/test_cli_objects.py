"""kq apply / create / delete / get / describe against a running local stack (one per module).

Bad input changes nothing in the cluster (checked through the API, not the mirror, so a
lagging mirror cannot make the test pass); generateName gives a new name per create.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from support.wait import eventually

from kq.kube import KubeClient
from kq.stack import read_state, stop_stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CQ = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default-flavor, resources: [{name: cpu, nominalQuota: 4}]}]
"""
LQ = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: %s, namespace: default}
spec: {clusterQueue: cq-e2e}
"""
WORKLOAD = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: %s, namespace: default}
spec:
  queueName: nowhere
  podSets:
  - name: main
    count: 2
    template:
      spec:
        restartPolicy: Never
        containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
"""
BAD = {
    "invalid-yaml": ("spec: [unclosed", "invalid YAML"),
    "unknown-field": (LQ.replace("clusterQueue: cq-e2e", "clusterQueue: cq-e2e, colour: red") % "lq-bad",
                      "spec.colour"),
    "bad-quantity": (CQ.replace("nominalQuota: 4", "nominalQuota: four") % "cq-bad", "nominalQuota"),
    "wrong-api-version": (LQ.replace("v1beta2", "v7") % "lq-bad", "apiVersion"),
    "missing-name": (LQ.replace("{name: %s, namespace: default}", "{namespace: default}"), "metadata.name"),
}


class Run:
    def __init__(self, p: subprocess.CompletedProcess[str]) -> None:
        self.code, self.out, self.err = p.returncode, p.stdout, p.stderr

    def __repr__(self) -> str:
        return f"exit {self.code}\nstdout:\n{self.out}\nstderr:\n{self.err}"


@pytest.fixture(scope="module")
def stack_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("cli") / "stack"
    up = subprocess.run([sys.executable, "-m", "kq.cli", "up", "--dir", str(d), "--timeout", "120"],
                        capture_output=True, text=True, timeout=150)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield d
    finally:
        if (d / "stack.json").exists():
            asyncio.run(stop_stack(d, grace_s=5.0))


def kq_sync(d: Path, *args: str, stdin: str | None = None) -> Run:
    return Run(subprocess.run([sys.executable, "-m", "kq.cli", *args, "--dir", str(d)], capture_output=True,
                              text=True, timeout=60, input=stdin))


async def kq(d: Path, *args: str, stdin: str | None = None) -> Run:
    return await asyncio.to_thread(kq_sync, d, *args, stdin=stdin)


async def api_get(d: Path, kind: str, namespace: str | None, name: str) -> bytes | None:
    client = await KubeClient.from_kubeconfig(read_state(d).cluster("manager").kubeconfig)
    try:
        return await client.get(kind, namespace, name)
    finally:
        await client.close()


async def api_names(d: Path, kind: str, namespace: str | None) -> list[str]:
    client = await KubeClient.from_kubeconfig(read_state(d).cluster("manager").kubeconfig)
    try:
        items, _ = await client.list(kind, namespace)
    finally:
        await client.close()
    return sorted(msgspec.json.decode(i)["metadata"]["name"] for i in items)


@pytest.mark.parametrize(("bad", "field"), [pytest.param(*v, id=k) for k, v in BAD.items()])
async def test_bad_input_names_the_field_and_changes_nothing(stack_dir: Path, tmp_path: Path, bad: str,
                                                            field: str) -> None:
    good_name = f"cq-good-{re.sub('[^a-z]', '', field.lower())[:20]}"
    (tmp_path / "1-good.yaml").write_text(CQ % good_name)
    (tmp_path / "2-bad.yaml").write_text(bad)
    run = await kq(stack_dir, "apply", "-f", str(tmp_path))
    assert run.code == 1, run
    assert field in run.err and "2-bad.yaml" in run.err, run
    assert run.out == ""
    assert await api_get(stack_dir, "clusterqueue", None, good_name) is None
    assert await api_get(stack_dir, "clusterqueue", None, "cq-bad") is None
    assert await api_get(stack_dir, "localqueue", "default", "lq-bad") is None


async def test_create_with_generate_name_prints_each_new_name(stack_dir: Path) -> None:
    names = []
    for _ in range(2):
        run = await kq(stack_dir, "create", "-f", str(EXAMPLES / "sample-job.yaml"))
        assert run.code == 0, run
        m = re.fullmatch(r"job\.batch/(sample-job-[a-z0-9]{5}) created\n", run.out)
        assert m, run
        names.append(m.group(1))
    assert names[0] != names[1]
    assert set(names) <= set(await api_names(stack_dir, "job", "default"))

    async def mirrored() -> bool:
        got = await kq(stack_dir, "get", "jobs", "-o", "name")
        return got.code == 0 and all(f"job.batch/{n}" in got.out.split() for n in names)

    await eventually(mirrored, timeout=20, what="kq get jobs lists the created jobs")

    async def described() -> Run:
        run = await kq(stack_dir, "describe", "workload", f"default/{names[0]}")
        assert run.code == 0, run
        return run

    # A Job's Workload has a generated name; describe finds it by the Job's name too.
    run = await eventually(described, timeout=20, what="the job's workload, described by the job's name")
    assert re.search(rf"^Owner:\s+Job {names[0]}$", run.out, re.M), run
    assert re.search(r"^Queue:\s+user-queue$", run.out, re.M), run


async def test_apply_from_stdin_then_delete_by_name_and_by_file(stack_dir: Path, tmp_path: Path) -> None:
    run = await kq(stack_dir, "apply", "-f", "-", stdin=LQ % "lq-del")
    assert (run.code, run.out) == (0, "localqueue.kueue.x-k8s.io/lq-del created\n"), run
    run = await kq(stack_dir, "delete", "lq", "lq-del")
    assert (run.code, run.out) == (0, 'localqueue.kueue.x-k8s.io "lq-del" deleted\n'), run
    assert await api_get(stack_dir, "localqueue", "default", "lq-del") is None
    run = await kq(stack_dir, "delete", "localqueue", "lq-del")
    assert run.code == 1
    assert 'localqueues.kueue.x-k8s.io "lq-del" not found' in run.err

    (tmp_path / "cq.yaml").write_text(CQ % "cq-del")
    assert (await kq(stack_dir, "apply", "-f", str(tmp_path / "cq.yaml"))).code == 0
    (tmp_path / "cq.yaml").write_text((CQ % "cq-del").replace("nominalQuota: 4", "nominalQuota: 6"))
    run = await kq(stack_dir, "apply", "-f", str(tmp_path / "cq.yaml"))
    assert (run.code, run.out) == (0, "clusterqueue.kueue.x-k8s.io/cq-del configured\n"), run
    live = msgspec.json.decode(await api_get(stack_dir, "clusterqueue", None, "cq-del") or b"{}")
    assert live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "6"
    run = await kq(stack_dir, "delete", "-f", str(tmp_path / "cq.yaml"))
    assert (run.code, run.out) == (0, 'clusterqueue.kueue.x-k8s.io "cq-del" deleted\n'), run
    assert await api_get(stack_dir, "clusterqueue", None, "cq-del") is None


async def test_get_and_describe_a_workload(stack_dir: Path) -> None:
    run = await kq(stack_dir, "apply", "-f", "-", stdin=WORKLOAD % "wl-e2e")
    assert (run.code, run.out) == (0, "workload.kueue.x-k8s.io/wl-e2e created\n"), run

    async def listed() -> str:
        got = await kq(stack_dir, "get", "wl")
        assert got.code == 0, got
        assert "wl-e2e" in got.out
        return got.out

    out = await eventually(listed, timeout=20, what="the workload in kq get wl")
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "STATE", "AGE"]
    row = next(r.split() for r in rows if r.startswith("wl-e2e "))
    assert row[:3] == ["wl-e2e", "nowhere", "Pending"]  # no queue "nowhere": never reserved, never admitted

    async def described_with_event() -> Run:
        run = await kq(stack_dir, "describe", "workload", "default/wl-e2e")
        assert run.code == 0, run
        # Kueue's events, written by the watcher and read back from the API server, as kubectl shows them.
        assert re.search(r"^  Warning\s+Pending\s+\S+\s+kq-watcher\s+LocalQueue nowhere doesn't exist$", run.out,
                         re.M), run
        return run

    run = await eventually(described_with_event, timeout=20, what="the workload described with its Pending event")
    assert re.search(r"^State:\s+Pending$", run.out, re.M), run
    assert re.search(r"^Queue:\s+nowhere$", run.out, re.M), run
    assert "main: 2 x {cpu: 1}" in run.out
    assert "Decisions:" in run.out

    run = await kq(stack_dir, "describe", "workload", "default/no-such-wl")
    assert run.code == 1 and "not found" in run.err

    run = await kq(stack_dir, "get", "wl", "no-such-wl")
    assert run.code == 1 and 'workloads.kueue.x-k8s.io "no-such-wl" not found' in run.err


async def test_the_dashboard_command_serves_the_stacks_queues(stack_dir: Path) -> None:
    """`kq dashboard` as a user runs it: the local stack's bus, a free port, the page and its state."""
    import aiohttp

    client = await KubeClient.from_kubeconfig(read_state(stack_dir).cluster("manager").kubeconfig)
    try:
        await client.create("clusterqueue", None, yaml.safe_load(CQ % "cq-dash"))
    finally:
        await client.close()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "kq.cli", "dashboard", "--port", "0",
                                                "--dir", str(stack_dir), stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("kq dashboard for cluster manager on http://127.0.0.1:"), line
        url = line.split()[-1]
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as page:
                assert page.status == 200 and "<title>kq dashboard</title>" in await page.text()

            async def shows_the_queue() -> dict[str, Any]:
                async with http.get(url + "readyz") as ready:
                    assert ready.status == 200
                async with http.get(url + "api/state") as resp:
                    state = await resp.json()
                return next(c for c in state["cluster_queues"] if c["name"] == "cq-dash")

            card = await eventually(shows_the_queue, timeout=30, what="cq-dash on the dashboard")
        assert [(b["flavor"], b["resource"], b["nominal"]) for b in card["bars"]] == [("default-flavor", "cpu", "4")]
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
