"""`python -m kubesim`: kubeconfigs, the ready line, a clean stop on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client, config

pytestmark = pytest.mark.timeout(30)


async def test_cli_serves_clusters_and_stops_on_sigterm(tmp_path: Path) -> None:
    kdir = tmp_path / "kube"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubesim", "--clusters", "manager,worker-1", "--port", "0",
        "--kubeconfig-dir", str(kdir), "--ready-delay", "50ms",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 15)).decode()
        assert line.startswith("kubesim ready http://127.0.0.1:"), line
        base = line.split()[-1]
        for name in ("manager", "worker-1"):
            doc = yaml.safe_load((kdir / f"{name}.kubeconfig").read_text())
            assert doc["clusters"][0]["cluster"]["server"] == f"{base}/clusters/{name}"
            cfg = client.Configuration()
            await config.load_kube_config(config_file=str(kdir / f"{name}.kubeconfig"), client_configuration=cfg,
                                          persist_config=False)
            async with client.ApiClient(configuration=cfg) as api:
                names = {n.metadata.name for n in (await client.CoreV1Api(api).list_namespace()).items}
                assert {"default", "kube-system"} <= names
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_cli_rejects_a_bad_duration(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubesim", "--kubeconfig-dir", str(tmp_path), "--ready-delay", "soon",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 2 and b"soon" in err and out == b""
