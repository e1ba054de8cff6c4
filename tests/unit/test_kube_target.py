"""kq.kube_target reads kubeconfigs as kubernetes-asyncio did (the same server, TLS files and
Authorization header), without importing kubernetes-asyncio unless a user needs a plugin."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config import load_kube_config

from kq.kube_target import KubeTarget, target_from_dict, target_from_file
from kq.kubeconfigs import KubeconfigError

pytestmark = pytest.mark.timeout(30)
PEM = b"-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n"


def _doc(cluster: dict[str, Any], user: dict[str, Any] | None, *, current: str = "c") -> dict[str, Any]:
    ctx = {"cluster": "k"} | ({"user": "u"} if user is not None else {})
    return {"apiVersion": "v1", "kind": "Config", "current-context": current,
            "clusters": [{"name": "k", "cluster": cluster}], "contexts": [{"name": "c", "context": ctx}],
            "users": [{"name": "u", "user": user}] if user is not None else []}


B64 = base64.b64encode(PEM).decode()
CASES = [
    pytest.param({"server": "http://127.0.0.1:8080/"}, {"token": "t0"}, id="token"),
    pytest.param({"server": "http://127.0.0.1:8080"}, None, id="no-user"),
    pytest.param({"server": "http://h:1"}, {"username": "a", "password": "b"}, id="basic-auth"),
    pytest.param({"server": "http://h:1"}, {"tokenFile": "token"}, id="token-file-relative"),
    pytest.param({"server": "https://h:1", "certificate-authority-data": B64, "insecure-skip-tls-verify": True,
                  "tls-server-name": "api", "proxy-url": "http://proxy:3128"},
                 {"client-certificate-data": B64, "client-key-data": B64, "token": "t1"}, id="tls-data"),
    pytest.param({"server": "https://h:1", "certificate-authority": "ca.pem"},
                 {"client-certificate": "ca.pem", "client-key": "ca.pem"}, id="tls-files-relative"),
    pytest.param({"server": "http://h:1", "certificate-authority": "missing.pem"}, {}, id="plain-http-ignores-tls"),
]


async def _authorization(t: KubeTarget) -> str | None:
    return await t.refresh() if t.refresh is not None else t.authorization


@pytest.mark.parametrize(("cluster", "user"), CASES)
async def test_reads_a_kubeconfig_as_kubernetes_asyncio_did(tmp_path: Path, cluster: dict, user: dict | None) -> None:
    (tmp_path / "token").write_text("from-file\n")
    (tmp_path / "ca.pem").write_bytes(PEM)
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(_doc(cluster, user)))

    theirs = Configuration()
    await load_kube_config(config_file=str(path), client_configuration=theirs, persist_config=False)
    ours = await target_from_file(str(path))

    def content(p: str | None) -> bytes | None:
        return Path(p).read_bytes() if p else None

    assert (ours.host, content(ours.ca_file), content(ours.cert_file), content(ours.key_file), ours.verify_tls,
            ours.tls_server_name, ours.proxy) == (
        theirs.host, content(theirs.ssl_ca_cert), content(theirs.cert_file), content(theirs.key_file),
        theirs.verify_ssl, theirs.tls_server_name, theirs.proxy)
    want = theirs.api_key.get("BearerToken")
    assert await _authorization(ours) == (want.strip() if want else None)
    if ours.ca_file and "certificate-authority-data" in cluster:
        assert os.stat(ours.ca_file).st_mode & 0o077 == 0  # a private temp file


async def test_token_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("first")
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(_doc({"server": "http://h:1"}, {"tokenFile": "token"})))
    target = await target_from_file(str(path))
    assert await _authorization(target) == "Bearer first"
    (tmp_path / "token.new").write_text("second, rotated")
    os.replace(tmp_path / "token.new", tmp_path / "token")  # as the kubelet swaps it
    assert await _authorization(target) == "Bearer second, rotated"


async def test_kubeconfig_files_are_merged_first_name_wins_last_current_context(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text(yaml.safe_dump(_doc({"server": "http://first:1"}, {"token": "ta"})))
    b_doc = _doc({"server": "http://second:1"}, {"token": "tb"}, current="other")
    b_doc["contexts"].append({"name": "other", "context": {"cluster": "k2", "user": "u"}})
    b_doc["clusters"].append({"name": "k2", "cluster": {"server": "http://k2:1"}})
    b.write_text(yaml.safe_dump(b_doc))
    target = await target_from_file(f"{a}{os.pathsep}{tmp_path / 'absent'}{os.pathsep}{b}")
    assert (target.host, target.authorization) == ("http://k2:1", "Bearer ta")
    named = await target_from_file(f"{a}{os.pathsep}{b}", context="c")
    assert named.host == "http://first:1"


@pytest.mark.parametrize(("doc", "error"), [
    pytest.param(_doc({"server": "http://h:1"}, {}, current="nope"), "no context 'nope'", id="unknown-context"),
    pytest.param(_doc({}, {}), "no server", id="no-server"),
    pytest.param(_doc({"server": "https://h:1", "certificate-authority": "/absent/ca"}, {}),
                 "certificate-authority /absent/ca does not exist", id="missing-ca-file"),
])
async def test_an_unusable_kubeconfig_says_why(doc: dict, error: str) -> None:
    with pytest.raises(KubeconfigError, match=error):
        await target_from_dict(doc)


def test_reading_a_token_kubeconfig_does_not_import_kubernetes_asyncio(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(_doc({"server": "http://h:1"}, {"token": "t"})))
    code = ("import asyncio, sys; from kq.kube import KubeClient\n"
            "async def main():\n"
            f"    c = await KubeClient.from_kubeconfig({str(path)!r}); await c.close()\n"
            "asyncio.run(main()); print('kubernetes_asyncio' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20, check=True)
    assert out.stdout.strip() == "False"


async def test_an_exec_plugin_user_is_read_by_kubernetes_asyncio(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text('import json; print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", '
                      '"kind": "ExecCredential", "status": {"token": "from-plugin"}}))')
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": [str(plugin)], "interactiveMode": "Never"}}
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(_doc({"server": "http://h:1"}, user)))
    target = await target_from_file(str(path))
    assert (target.host, await _authorization(target)) == ("http://h:1", "Bearer from-plugin")
