"""compose.yaml's bus is closed like `kq up --secure`: TLS and one NKey user per service, made by its
one-shot `secure-init` service (kq.stack.compose_secure), each container mounting only its own key.

Checked without a container engine: compose.yaml and deploy/compose/config.yaml as parsed, then the
init step's output run by a real nats-server: each service's key lets it in over TLS and publish what
it owns, tas may not send an admission command, nobody gets in without a key or without TLS, and the
setup step's key sets up the streams.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
import yaml
from support.wait import eventually

from kq import bus_users, subjects
from kq.config import NatsConfig, NatsTlsConfig, parse_config
from kq.natsserver import NatsServer
from kq.runtime import connect_options
from kq.stack import compose_secure

ROOT = Path(__file__).resolve().parents[2]
SERVICES = tuple(sorted(p.parent.name for p in (ROOT / "services").glob("*/__main__.py")))
MOUNT = "/etc/kq/nats"


def _compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def _creds_volume(svc: dict[str, Any]) -> list[str]:
    return [v.split(":")[0] for v in svc.get("volumes", ()) if v.split(":")[0].startswith(("creds-", "nats-secure"))]


def test_every_compose_service_has_its_own_key_and_tls() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(compose_secure.SERVICES) == set(SERVICES), "compose_secure.SERVICES: every service gets a key"
    config = parse_config((ROOT / "deploy/compose/config.yaml").read_text(), "deploy/compose/config.yaml")
    nc = config.nats
    assert nc.tls is not None and nc.tls.ca_file == f"{MOUNT}/ca.pem" and nc.ensure_streams is False
    assert nc.nkey_seed_file == f"{MOUNT}/{{service}}.nk" and nc.url.startswith("tls://")
    owners: dict[str, list[str]] = {}
    for name in (*SERVICES, "setup"):
        svc = services[name]
        assert svc["environment"]["KQ_NATS_URL"].startswith("tls://nats:"), name
        (volume,) = _creds_volume(svc)  # its own key, and no one else's
        assert f"{volume}:{MOUNT}:ro" in svc["volumes"], name
        owners.setdefault(volume, []).append(name)
    assert all(len(v) == 1 for v in owners.values()), f"a key volume shared: {owners}"
    # secure-init writes each of those volumes, as the directory its command names for that container.
    init = services["secure-init"]
    cmd = init["command"]
    assert cmd[:3] == ["python", "-m", "kq.stack.compose_secure"]
    out = cmd[cmd.index("--dir") + 1]
    written = dict(v.split(":")[:2] for v in init["volumes"])
    for volume, (name,) in owners.items():
        assert written[volume] == f"{out}/{name}", (volume, name)
    # nats-server takes the config written beside its certificate, mounted where that config says.
    nats_svc = services["nats"]
    conf = nats_svc["command"][nats_svc["command"].index("-c") + 1]
    assert written["nats-secure"] == f"{out}/{compose_secure.SERVER_DIR}"
    assert f"nats-secure:{compose_secure.SERVER_MOUNT}:ro" in nats_svc["volumes"]
    assert conf == f"{compose_secure.SERVER_MOUNT}/{compose_secure.CONFIG}"
    assert nats_svc["depends_on"]["secure-init"]["condition"] == "service_completed_successfully"
    for name in SERVICES:
        assert services[name]["depends_on"]["setup"]["condition"] == "service_completed_successfully", name


def _as(out: Path, directory: str, url: str) -> NatsConfig:
    """deploy/compose/config.yaml's nats settings, with the container's mount at this directory."""
    return NatsConfig(url=url, tls=NatsTlsConfig(ca_file=str(out / directory / "ca.pem")),
                      nkey_seed_file=str(out / directory / "{service}.nk"))


async def _connect(cfg: NatsConfig, user: str, errors: list[str]) -> nats.NATS:
    async def on_error(e: Exception) -> None:
        errors.append(str(e))

    return await nats.connect(cfg.url, allow_reconnect=False, connect_timeout=5, error_cb=on_error,
                              **connect_options(cfg, user))


@pytest.mark.timeout(120)
async def test_the_init_step_makes_a_closed_bus_with_a_user_per_service(tmp_path: Path) -> None:
    out = tmp_path / "secure"
    argv = ["--dir", str(out), "--host", "127.0.0.1", "--server-mount", str(out / "nats")]
    assert compose_secure.main(argv) == 0
    for name in (*SERVICES, "setup"):
        seed = "kq-setup" if name == "setup" else name
        assert {p.name for p in (out / name).iterdir()} == {"ca.pem", f"{seed}.nk"}, name
        assert (out / name / f"{seed}.nk").stat().st_mode & 0o077 == 0, "a key readable by others"
    before = (out / "watcher" / "watcher.nk").read_bytes()
    assert compose_secure.main(argv) == 0 and (out / "watcher" / "watcher.nk").read_bytes() == before  # kept
    async with NatsServer(extra_args=("-c", str(out / "nats" / compose_secure.CONFIG))) as server:
        url = server.url.replace("nats://", "tls://")
        errors: dict[str, list[str]] = {s: [] for s in SERVICES}
        clients = {s: await _connect(_as(out, s, url), s, errors[s]) for s in SERVICES}
        try:
            own = subjects.command_subject("manager", "workload", "admission")
            await clients["tas"].publish(own, b"{}")
            await clients["admission"].publish(own, b"{}")
            await clients["watcher"].publish(subjects.object_subject("manager", "job", "ns", "j"), b"{}")
            for c in clients.values():
                await c.flush()
            await eventually(lambda: any(own in e for e in errors["tas"]), timeout=10,
                             what=f"tas refused ({errors['tas']})")
            assert not [e for s in SERVICES if s != "tas" for e in errors[s]], errors
        finally:
            for c in clients.values():
                await c.close()
        # TLS but no key, or no TLS: not let in.
        with pytest.raises((nats.errors.Error, OSError, TimeoutError)):
            await nats.connect(url, allow_reconnect=False, connect_timeout=3, max_reconnect_attempts=0,
                               tls=connect_options(_as(out, "tas", url), "tas")["tls"])
        with pytest.raises((nats.errors.Error, OSError, TimeoutError)):
            await nats.connect(url.replace("tls://", "nats://"), allow_reconnect=False, connect_timeout=3,
                               max_reconnect_attempts=0)
        assert await _setup_streams(out, url) == 0
    assert bus_users.ADMIN in bus_users.users()


async def _setup_streams(out: Path, url: str) -> int:
    cfg = _as(out, "setup", url)
    config = out / "setup.yaml"
    config.write_text(yaml.safe_dump({"nats": {"url": url, "tls": {"caFile": cfg.tls.ca_file if cfg.tls else ""},
                                               "nkeySeedFile": cfg.nkey_seed_file}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KQ_")} | {"KQ_CONFIG": str(config)}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "kq.runtime.setup_streams", env=env,
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    return await asyncio.wait_for(proc.wait(), 45)

