"""The local stack in-process (what the scenario harness uses): real nats-server, kubesim and
every service process; readiness, fault hooks (kill/start), and a failed start that cleans up."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.wait import eventually

from kq.kube import KubeClient
from kq.runtime.health import health
from kq.stack import Stack, StackError, discover_services, is_alive, read_state
from kq.stack.health import instance_status

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

START_TIMEOUT_S = 90.0  # two shared cores start several Python processes at once


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention `text` (e.g. a test's temp dir)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z":
            found.append(f"{pid}: {cmd}")
    return found


async def test_stack_serves_every_cluster_and_service_then_leaves_nothing(tmp_path: Path) -> None:
    services = discover_services()
    assert "watcher" in services
    async with Stack(tmp_path / "s", timeout_s=START_TIMEOUT_S) as stack:
        state = read_state(tmp_path / "s")
        assert state.nats_url == stack.nats_url
        assert [c.name for c in state.clusters] == ["manager", "worker-1", "worker-2"]
        assert {p.name for p in state.processes} == {"nats-server", "kubesim", *services}
        assert all(is_alive(p) for p in state.processes)
        for cluster in ("manager", "worker-1", "worker-2"):
            client = await KubeClient.from_kubeconfig(stack.kubeconfig(cluster))
            try:
                _items, rv = await client.list("namespace")
                assert rv, f"{cluster}: a list has a resourceVersion"
            finally:
                await client.close()
        for name in services:
            assert (tmp_path / "s" / "logs" / f"{name}.log").exists()
        assert (tmp_path / "s" / "config.yaml").read_text().count("kubeconfig:") == 3
    assert not (tmp_path / "s" / "stack.json").exists()
    assert not any(is_alive(p) for p in state.processes)
    assert processes_mentioning(str(tmp_path)) == []


async def test_kill_and_start_a_service(tmp_path: Path) -> None:
    async with Stack(tmp_path / "s", services=["watcher"], timeout_s=START_TIMEOUT_S) as stack:
        nc = stack.bus.nc
        assert getattr(await instance_status(nc, "watcher", "0"), "status", None) == "ready"
        code = await stack.kill("watcher")
        assert code != 0
        assert stack.process("watcher") is None
        assert await instance_status(nc, "watcher", "0") is None
        await stack.start("watcher")
        assert (await health(nc, "watcher")).status == "ready"
        with pytest.raises(StackError, match="already running"):
            await stack.start("watcher")


async def test_a_second_stack_in_the_same_dir_is_refused(tmp_path: Path) -> None:
    async with Stack(tmp_path / "s", services=[], timeout_s=START_TIMEOUT_S):
        with pytest.raises(StackError, match="already running"):
            await Stack(tmp_path / "s", services=[], timeout_s=START_TIMEOUT_S).up()


async def test_a_failed_start_shows_the_log_and_stops_what_it_started(tmp_path: Path) -> None:
    stack = Stack(tmp_path / "s", services=[], kubesim_args=["--no-such-flag"], timeout_s=START_TIMEOUT_S)
    with pytest.raises(StackError) as exc:
        await stack.up()
    text = str(exc.value)
    assert "kubesim exited with code" in text
    assert "--no-such-flag" in text  # the tail of kubesim's own log says what was wrong
    await eventually(lambda: processes_mentioning(str(tmp_path)) == [], timeout=10,
                     what="nats-server stopped after the failed start")
    assert not (tmp_path / "s" / "stack.json").exists()


async def test_a_service_that_dies_fails_the_start_with_its_log(tmp_path: Path) -> None:
    stack = Stack(tmp_path / "s", services=["no_such_service"], timeout_s=START_TIMEOUT_S)
    with pytest.raises(StackError, match="no_such_service exited with code 1") as exc:
        await stack.up()
    assert "No module named services.no_such_service" in str(exc.value)
    await eventually(lambda: processes_mentioning(str(tmp_path)) == [], timeout=10)


async def test_replicas_run_as_separate_instances_each_answering_health(tmp_path: Path) -> None:
    async with Stack(tmp_path / "s", services=["watcher"], replicas={"watcher": 2},
                     timeout_s=START_TIMEOUT_S) as stack:
        state = read_state(tmp_path / "s")
        assert [(p.name, p.instance) for p in state.processes if p.role == "service"] == [
            ("watcher", "0"), ("watcher-1", "1")]
        nc = stack.bus.nc
        assert getattr(await instance_status(nc, "watcher", "1"), "instance", None) == "1"
        await stack.kill("watcher", "1")
        assert await instance_status(nc, "watcher", "1") is None
        assert getattr(await instance_status(nc, "watcher", "0"), "status", None) == "ready"
