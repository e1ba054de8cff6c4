"""`kq get` with `-l`, `-o wide` and `-w`, read from the bus mirror the watcher keeps (real nats-server,
kubesim, the watcher in-process)."""

from __future__ import annotations

import asyncio
import io
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from support.wait import eventually
from support.watcher_harness import create, running_watcher

from kq.cli.main import _run, build_parser
from kq.cli.objects import Streams
from kq.config import NatsConfig
from kq.kube import KubeClient
from kq.runtime import Bus
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(90)
C = "c1"
KUEUE = "kueue.x-k8s.io/v1beta2"


def cq(name: str, labels: dict[str, str], strategy: str = "BestEffortFIFO") -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name, "labels": labels},
            "spec": {"namespaceSelector": {}, "queueingStrategy": strategy}}


async def kq(nats: NatsConfig, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await _run(build_parser().parse_args([*argv, "--nats", nats.url, "--cluster", C]), Streams(out, err))
    return code, out.getvalue(), err.getvalue()


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


async def test_selectors_wide_and_watch(bus: Bus, nats_config: NatsConfig, sim: KubeSim, kube: KubeClient,
                                        tmp_path: Path) -> None:
    for name, labels in (("gpu-a", {"team": "a", "hw": "gpu"}), ("cpu-a", {"team": "a"}), ("cpu-b", {"team": "b"})):
        await create(kube, cq(name, labels, "StrictFIFO" if name == "gpu-a" else "BestEffortFIFO"))
    async with running_watcher(bus, sim, tmp_path, [C]):
        code, out, err = await kq(nats_config, "get", "cq", "-l", "team=a,hw")
        assert code == 0, err
        assert [r[0] for r in rows(out)[1:]] == ["gpu-a"]
        for selector, names in (("team in (a,b),!hw", ["cpu-a", "cpu-b"]), ("team!=a", ["cpu-b"]),
                                ("team notin (a)", ["cpu-b"]), ("hw=cpu", [])):
            code, out, err = await kq(nats_config, "get", "cq", "-l", selector)
            assert code == 0 and [r[0] for r in rows(out)[1:]] == names, (selector, out, err)
        code, _, err = await kq(nats_config, "get", "cq", "-l", "team in ()")
        assert code == 1 and "needs at least one value" in err

        code, out, err = await kq(nats_config, "get", "cq", "gpu-a", "-o", "wide")
        assert code == 0, err
        header, row = out.splitlines()
        assert header.split()[-5:] == ["STRATEGY", "RESERVING", "WORKLOADS", "STOP", "POLICY"]
        assert row.split()[-3:] == ["StrictFIFO", "0", "None"]

        out_w, err_w = io.StringIO(), io.StringIO()
        args = build_parser().parse_args(["get", "cq", "-w", "-l", "team=a", "--nats", nats_config.url, "--cluster", C])
        watching = asyncio.create_task(_run(args, Streams(out_w, err_w)))
        try:
            await eventually(lambda: len(out_w.getvalue().splitlines()) == 3, timeout=20, what="the initial list")
            await create(kube, cq("new-a", {"team": "a"}))
            await create(kube, cq("new-b", {"team": "b"}))
            await kube.patch("clusterqueue", None, "cpu-a", {"spec": {"stopPolicy": "Hold"}}, patch_type="merge")

            def changes() -> list[str]:
                lines = out_w.getvalue().splitlines()[3:]
                assert sorted(line.split()[0] for line in lines) == ["cpu-a", "new-a"], (lines, err_w.getvalue())
                return lines

            await eventually(changes, timeout=20, what="a row per change of a selected ClusterQueue")
        finally:
            watching.cancel()
            with suppress(asyncio.CancelledError):
                await watching
