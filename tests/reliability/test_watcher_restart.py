"""A watcher process killed (SIGKILL) while objects churn and started again resumes without losing
or duplicating an object: the mirror converges to the API, and no (object, resourceVersion) is
stored twice."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
import yaml
from support.kubesim_fixtures import SimSpec
from support.wait import eventually
from support.watcher_harness import Churn, MirrorFollower, api_state, diff, mirror_state

from kq.config import NatsConfig
from kq.kube import KubeClient
from kq.runtime import Bus
from kq.runtime.health import wait_healthy
from kq.runtime.streams import ensure_streams
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(300)
C = "c1"
KINDS = ["resourceflavor", "workload", "namespace"]
ROOT = Path(__file__).resolve().parents[2]
DUP_WINDOW_S = 0.5
# A restart rebuilds the index from the mirror and lists every kind again (thousands of objects
# by the last round): on a loaded 2-core machine that can take well over 30 s.
READY_TIMEOUT_S = 60


KUBESIM = SimSpec(clusters=(C,), seed=23, history_size=20_000, namespaces=("demo",))


class WatcherProcess:
    """`python -m services.watcher` with a config file, its output kept for failure messages."""

    def __init__(self, tmp: Path, nats_url: str, kubeconfig: Path) -> None:
        self.config = tmp / "kq.yaml"
        self.config.write_text(yaml.safe_dump({
            # A short duplicate window, so a state re-published after a restart would be stored
            # again (and seen) instead of being hidden by JetStream's deduplication.
            "nats": {"url": nats_url, "duplicateWindowS": DUP_WINDOW_S},
            "clusters": [{"name": C, "kubeconfig": str(kubeconfig)}],
        }))
        self.tmp = tmp
        self.proc: asyncio.subprocess.Process | None = None
        self.runs = 0

    async def start(self) -> None:
        self.runs += 1
        with open(self.tmp / f"watcher-{self.runs}.log", "wb") as out:  # the child keeps its own descriptor
            env = {**os.environ, "KQ_CONFIG": str(self.config), "KQ_LOG_LEVEL": "warning"}
            self.proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "services.watcher", cwd=str(ROOT),
                                                             env=env, stdout=out, stderr=asyncio.subprocess.STDOUT)

    def output(self) -> str:
        return "\n".join((self.tmp / f"watcher-{i}.log").read_text()[-3000:] for i in range(1, self.runs + 1))

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                await self.kill()


async def test_killed_watcher_resumes_without_loss_or_duplicates(bus: Bus, nats_url: str, sim: KubeSim,
                                                                  kube: KubeClient, tmp_path: Path) -> None:
    await ensure_streams(bus.js, NatsConfig(url=nats_url, duplicate_window_s=DUP_WINDOW_S))
    watcher = WatcherProcess(tmp_path, nats_url, sim.kubeconfig(C, tmp_path / f"{C}.kubeconfig"))
    churn = Churn(kube, seed=5)
    churning = asyncio.create_task(churn.run())
    try:
        async with MirrorFollower(bus, C) as mirror:
            for round_ in range(3):
                await watcher.start()
                try:
                    await wait_healthy(bus.nc, "watcher", timeout=READY_TIMEOUT_S)
                except TimeoutError as e:
                    raise AssertionError(f"{e}\n{watcher.output()}") from None
                start = churn.ops
                await eventually(lambda: churn.ops >= start + 40,  # noqa: B023 - awaited before start changes
                                 timeout=20, what=f"churn in round {round_}")
                await watcher.kill()  # mid-stream: records in flight, a batch half published
                start = churn.ops
                await eventually(lambda: churn.ops >= start + 20,  # noqa: B023 - awaited before start changes
                                 timeout=20, what="churn while it is down")

            await watcher.start()
            try:
                await wait_healthy(bus.nc, "watcher", timeout=READY_TIMEOUT_S)
            except TimeoutError as e:
                raise AssertionError(f"{e}\n{watcher.output()}") from None
            churn.stop()
            await churning

            async def converged() -> bool:
                d = diff(await api_state(kube, KINDS), mirror_state(mirror.view, C, KINDS))
                assert not d, d
                return True

            try:
                await eventually(converged, timeout=30, interval=0.1, what="mirror == API after restarts")
            except AssertionError as e:
                raise AssertionError(f"{e}\n{watcher.output()}") from None

        stored: dict[tuple[str, str, str, str, bool], int] = {}
        for r in mirror.seen:
            key = (r.kind, r.namespace, r.name, r.resource_version, r.deleted)
            stored[key] = stored.get(key, 0) + 1
        # Each state once: a relist publishes only what changed, and a watch event the list already
        # carried (a paged list can be newer than its resourceVersion) is not published again.
        assert [key for key, n in stored.items() if n > 1] == []
        assert churn.ops > 150
    finally:
        churn.stop()
        if not churning.done():
            await churning
        await watcher.stop()
