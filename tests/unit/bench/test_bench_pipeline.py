"""The bench driver's pipelined requests (kq.bench.pipeline) against kubesim over HTTP: a batch is
answered in order, a connection that dies leaves the rest unanswered (never a wrong answer), and
only a plain-http kubeconfig with a fixed token gets a pipeline."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml
from support.kubesim_fixtures import SimSpec
from support.wait import eventually

from kq.bench.generate import BenchPlan, QueuePlan, WorkloadPlan, workload_object
from kq.bench.metrics import RunLog
from kq.bench.pipeline import NO_ANSWER, Pipeline
from kq.bench.runner import Clock, Runner
from kq.kube import KubeClient, resource_path
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(30)


def _ns(name: str) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}).encode()


async def test_a_batch_is_answered_in_order(sim: KubeSim, tmp_path: Path) -> None:
    p = await Pipeline.for_kubeconfig(str(sim.kubeconfig("c1", tmp_path / "c1.kubeconfig")), batch=2)
    assert p is not None
    try:
        names = ["a", "b", "a", "c", "d"]
        answers = await p.send([p.request("POST", resource_path("namespace", None), _ns(n)) for n in names])
        assert [a.status for a in answers] == [201, 201, 409, 201, 201]
        assert [json.loads(a.body)["metadata"]["name"] for a in answers if a.status == 201] == ["a", "b", "c", "d"]
        got = await p.send([p.request("GET", resource_path("namespace", None, "c"), b"")])
        assert got[0].status == 200 and json.loads(got[0].body)["metadata"]["name"] == "c"
    finally:
        p.close()


async def test_requests_after_a_dead_connection_get_no_answer() -> None:
    answer = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"

    async def one_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(one_then_close, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    p = Pipeline("127.0.0.1", port, "", b"Host: x\r\n", timeout_s=10)
    try:
        answers = await p.send([p.request("POST", "/api/v1/namespaces", _ns(n)) for n in "xyz"])
        assert answers[0].status == 201
        assert [a.status for a in answers[1:]] == [NO_ANSWER, NO_ANSWER]
    finally:
        p.close()
        server.close()
        await server.wait_closed()


def _kubeconfig(path: Path, server: str, user: dict[str, str]) -> str:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    return str(path)


async def test_only_plain_http_with_a_fixed_token(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("t")
    assert await Pipeline.for_kubeconfig(_kubeconfig(tmp_path / "a", "http://127.0.0.1:1/x", {"token": "t"}))
    assert await Pipeline.for_kubeconfig(
        _kubeconfig(tmp_path / "b", "https://127.0.0.1:1", {"token": "t"})) is None
    assert await Pipeline.for_kubeconfig(
        _kubeconfig(tmp_path / "c", "http://127.0.0.1:1", {"tokenFile": str(token_file)})) is None


KUBESIM = SimSpec(namespaces=("qa",))
_QA = QueuePlan(name="qa", class_name="cq", cohort="co", cohort_class="co", nominal_milli=10_000,
                borrowing_limit_milli=None)


def _admitted(conditions: list[dict[str, str]]) -> dict[str, object]:
    at = "2026-01-01T00:00:00Z"
    return {"status": {"conditions": [{"type": t, "status": "True", "reason": t, "message": t,
                                       "lastTransitionTime": at} for t in ("QuotaReserved", "Admitted")]
                       + conditions}}


async def test_finishes_go_out_together_and_a_stale_one_is_decided_again(sim: KubeSim, kube: KubeClient,
                                                                          tmp_path: Path) -> None:
    plans = [WorkloadPlan(index=i, at_ms=0, namespace="qa", name=f"w{i}", cluster_queue="qa", class_name="small",
                          runtime_ms=600_000, priority=0, request_milli=1000, pod_count=1) for i in range(3)]
    plan = BenchPlan(flavor="rf", queues=(_QA,), cohorts=("co",), workloads=tuple(plans))
    p = await Pipeline.for_kubeconfig(str(sim.kubeconfig("c1", tmp_path / "c1.kubeconfig")))
    assert p is not None
    runner = Runner(kube, plan, Clock(), RunLog(mode="live"), pipeline=p)
    try:
        for w in plans:
            await kube.create("workload", "qa", workload_object(w))
            runner.on_workload("MODIFIED", await kube.patch("workload", "qa", w.name, _admitted([]),
                                                            patch_type="merge", subresource="status"))
        # w2 changes after the runner saw it: its finish (resourceVersion as precondition) gets 409.
        await kube.patch("workload", "qa", "w2", _admitted([{"type": "PodsReady", "status": "True", "reason": "r",
                                                             "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]),
                         patch_type="merge", subresource="status")
        for w in plans:
            runner._fire(w.key)  # the timers (runtime 600 s) firing in the same loop turn
        await eventually(lambda: runner.finished == 3, timeout=10, what="all three finished")
        for w in plans:
            raw = await kube.get("workload", "qa", w.name)
            assert raw is not None
            conds = {c["type"]: c["status"] for c in json.loads(raw)["status"]["conditions"]}
            assert conds["Finished"] == "True"
        assert runner.finish_failures == []
    finally:
        runner.close()
        p.close()
