"""deploy/'s NATS users work as written: the authorization block of deploy/nats/config.yaml, run by
a real nats-server with TLS `verify_and_map` (the user is the client certificate's subject, as
cert-manager issues them in deploy/nats/certificates.yaml), lets each service publish what it owns
and refuses the rest; a certificate of nobody's is not let in."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import nats
import nats.errors
import pytest
import yaml
from support.wait import eventually

from kq import bus_users, subjects
from kq.config import NatsConfig, NatsTlsConfig
from kq.natsserver import NatsServer
from kq.runtime import connect_options
from kq.stack.secure import LocalCA

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _nats_conf() -> str:
    docs = yaml.safe_load_all((DEPLOY / "nats" / "config.yaml").read_text())
    (cm,) = [d for d in docs if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == "nats-config"]
    return str(cm["data"]["nats.conf"])


def test_deploy_nats_users_are_kq_bus_users() -> None:
    conf = _nats_conf()
    assert bus_users.deploy_authorization() in conf, "deploy/nats/config.yaml: regenerate with kq.bus_users.deploy_authorization()"
    assert "verify_and_map: true" in conf


async def _client(authority: LocalCA, tmp: Path, url: str, cn: str, errors: list[str]) -> nats.NATS:
    cert, key = authority.issue(tmp, cn)
    cfg = NatsConfig(url=url, tls=NatsTlsConfig(ca_file=str(tmp / "ca.pem"), cert_file=str(cert), key_file=str(key)))

    async def on_error(e: Exception) -> None:
        errors.append(str(e))

    return await nats.connect(url, allow_reconnect=False, connect_timeout=5, error_cb=on_error,
                              **connect_options(cfg, cn))


@pytest.mark.timeout(120)
async def test_deploy_nats_users_publish_only_what_they_own(tmp_path: Path) -> None:
    authority = LocalCA()
    ca = authority.write_ca(tmp_path / "ca.pem")
    cert, key = authority.issue(tmp_path, "server", server_host="127.0.0.1")
    conf = tmp_path / "nats.conf"
    conf.write_text(f'tls {{\n  cert_file: "{cert}"\n  key_file: "{key}"\n  ca_file: "{ca}"\n'
                    f"  verify_and_map: true\n}}\n{bus_users.deploy_authorization()}")
    async with NatsServer(extra_args=("-c", str(conf))) as server:
        url = server.url.replace("nats://", "tls://")
        tas_errors: list[str] = []
        tas = await _client(authority, tmp_path, url, "kq-tas", tas_errors)
        admission_errors: list[str] = []
        admission = await _client(authority, tmp_path, url, "kq-admission", admission_errors)
        try:
            own = subjects.command_subject("manager", "workload", "admission")
            await tas.publish(own, b"{}")
            await tas.publish(subjects.event_subject("manager", "topologyhold", "ns", "w"), b"{}")
            await admission.publish(own, b"{}")
            await tas.flush()
            await admission.flush()
            await eventually(lambda: any(own in e for e in tas_errors), timeout=10, what=f"tas refused ({tas_errors})")
            assert len(tas_errors) == 1 and admission_errors == [], (tas_errors, admission_errors)
        finally:
            await tas.close()
            await admission.close()
        with pytest.raises((nats.errors.Error, OSError)):
            await _client(authority, tmp_path, url, "stranger", [])
        # Streams: the setup Job's user sets them up (a service's may not: tests/unit/test_bus_users.py).
        assert await _setup_streams(authority, tmp_path, url, "kq-setup") == 0


async def _setup_streams(authority: LocalCA, tmp: Path, url: str, cn: str) -> int:
    cert, key = authority.issue(tmp, cn)
    config = tmp / f"{cn}.yaml"
    config.write_text(yaml.safe_dump({"nats": {"url": url, "tls": {
        "caFile": str(tmp / "ca.pem"), "certFile": str(cert), "keyFile": str(key)}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KQ_")} | {"KQ_CONFIG": str(config)}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "kq.runtime.setup_streams", env=env,
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    return await asyncio.wait_for(proc.wait(), 45)
