"""deploy/'s NATS configuration as nats-server reads it: the whole nats.conf of the ConfigMap
(TLS, users, JetStream, the cluster with its three routes and their mutual TLS), the mounted
files put in temporary places, passes the server's own configuration test (`nats-server -t`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from kq.natsserver import find_nats_server
from kq.stack.secure import LocalCA

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_deploy_nats_conf_with_its_cluster_routes_is_valid(tmp_path: Path) -> None:
    docs = yaml.safe_load_all((DEPLOY / "nats" / "config.yaml").read_text())
    (cm,) = [d for d in docs if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == "nats-config"]
    conf = str(cm["data"]["nats.conf"])
    authority = LocalCA()
    ca = authority.write_ca(tmp_path / "ca.pem")
    cert, key = authority.issue(tmp_path, "server", server_host="127.0.0.1")
    for mounted, here in (("/etc/nats-tls/tls.crt", cert), ("/etc/nats-tls/tls.key", key),
                          ("/etc/nats-tls/ca.crt", ca), ("/var/run/nats/", f"{tmp_path}/"),
                          ("store_dir: /data", f"store_dir: {tmp_path / 'data'}")):
        assert mounted in conf
        conf = conf.replace(mounted, str(here))
    assert "routes: [" in conf and "verify: true" in conf[conf.index("cluster {"):]
    path = tmp_path / "nats.conf"
    path.write_text(conf)
    out = subprocess.run([find_nats_server(), "-c", str(path), "-t"], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "POD_NAME": "nats-0"})
    assert out.returncode == 0, out.stdout + out.stderr
