"""Credentials that rotate: the watcher follows its ServiceAccount token when the kubelet swaps it.

kubesim checks bearer tokens here: first only the old token is let in, then only the new one
(an API server after the old projected token expired). The watcher reads its token from a
kubeconfig `tokenFile`, as deploy/kq/config.yaml has it; kubernetes-asyncio alone would keep the
old token for good and get 401 from then on (kq.kube_target.TokenFile re-reads the file).
"""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack, suppress
from pathlib import Path

import pytest
import yaml
from support.kubesim_fixtures import SimControl
from support.wait import eventually
from support.watcher_harness import FAST

from kq import subjects
from kq.config import ClusterConfig
from kq.kube import KubeClient
from kq.mirror import MirrorView
from kq.runtime import Bus
from kubesim.server import KubeSim
from services.watcher.service import connect_clusters, run_watchers

pytestmark = pytest.mark.timeout(60)

SA = "system:serviceaccount:kq-system:kq-watcher"


def _kubeconfig(sim: KubeSim, tmp: Path) -> Path:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c1",
           "clusters": [{"name": "c1", "cluster": {"server": sim.server_url("c1")}}],
           "users": [{"name": "kq-watcher", "user": {"tokenFile": "token"}}],  # relative to the kubeconfig
           "contexts": [{"name": "c1", "context": {"cluster": "c1", "user": "kq-watcher"}}]}
    path = tmp / "watcher.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def _rotate(token_file: Path, token: str) -> None:
    """As the kubelet does: the new token lands whole (a rename), never half-written."""
    tmp = token_file.with_suffix(".new")
    tmp.write_text(token)
    os.replace(tmp, token_file)


def _flavor(name: str) -> dict[str, object]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}}


async def test_the_watcher_picks_up_a_rotated_service_account_token(
        sim: KubeSim, bus: Bus, kube: KubeClient, control: SimControl, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old-token\n")
    await control.post("clusters/c1/tokens", {"tokens": {"old-token": SA, "kubesim": "admin"}})
    view = MirrorView()
    async with AsyncExitStack() as stack, view.replay(bus, "c1", "resourceflavor"):
        watchers = await connect_clusters(stack, bus, (ClusterConfig(name="c1", kubeconfig=str(_kubeconfig(sim, tmp_path))),),
                                          FAST)
        task = asyncio.create_task(run_watchers(bus, watchers))
        try:
            await asyncio.wait_for(watchers[0].wait_synced(), 30)
            await kube.create("resourceflavor", None, _flavor("before"))
            await eventually(lambda: view.get(subjects.ObjectKey("c1", "resourceflavor", "", "before")), timeout=10)

            # Rotation: the server takes only the new token now, and every watch must start again.
            await control.post("clusters/c1/tokens", {"tokens": {"new-token": SA, "kubesim": "admin"}})
            _rotate(token, "new-token\n")
            await control.post("clusters/c1/faults", {"type": "cut-watches"})
            await kube.create("resourceflavor", None, _flavor("after"))
            await eventually(lambda: view.get(subjects.ObjectKey("c1", "resourceflavor", "", "after")), timeout=20,
                             what="an object created after the rotation, mirrored with the new token")
            assert not task.done()
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await task
    calls = (await control.get("clusters/c1/requests"))["requests"]
    assert any(c[0] == SA and c[2] == "resourceflavors" and c[3] == "watch" for c in calls), calls


async def test_without_a_known_token_the_api_answers_401(sim: KubeSim, kube: KubeClient, control: SimControl) -> None:
    await control.post("clusters/c1/tokens", {"tokens": {"someone-else": "admin"}})
    with pytest.raises(Exception, match="401"):
        await kube.list("namespace")
    await control.post("clusters/c1/tokens", {"tokens": None})
    assert (await kube.list("namespace"))[1]
