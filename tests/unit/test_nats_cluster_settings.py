"""The replicated bus's settings: nats.url lists a cluster's servers (a client reconnects to a
survivor), nats.streamReplicas says how many copies of each kq stream (JetStream allows 1 to 5),
and the local stack's cluster nodes are named and laid out as `kq up --nats-cluster` runs them."""

from __future__ import annotations

from pathlib import Path

import pytest
from nats.js import api

from kq.config import ConfigError, NatsConfig, parse_config
from kq.runtime.streams import lease_bucket_config, stream_configs
from kq.stack import Stack, StackError
from kq.stack.natsnodes import NatsNodes, free_ports, node_name
from kq.stack.secure import SecureBus


def test_url_lists_every_server_of_a_cluster() -> None:
    cfg = parse_config("nats:\n  url: nats://a:4222, nats://b:4222,nats://c:4222\n  streamReplicas: 3\n")
    assert cfg.nats.servers() == ["nats://a:4222", "nats://b:4222", "nats://c:4222"]
    assert NatsConfig().servers() == ["nats://127.0.0.1:4222"]


@pytest.mark.parametrize(("text", "says"), [
    ("nats: {streamReplicas: 0}", "nats.streamReplicas: must be within 1..5"),
    ("nats: {streamReplicas: 7}", "nats.streamReplicas: must be within 1..5"),
    ("nats: {url: ' , '}", "nats.url: no server URL"),
])
def test_bad_bus_settings_are_refused_by_name(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace(".", r"\.")):
        parse_config(text)


def test_every_stream_and_the_lease_bucket_take_the_replicas_setting() -> None:
    cfg = NatsConfig(stream_replicas=3)
    configs: list[api.StreamConfig] = [*stream_configs(cfg), lease_bucket_config(cfg)]
    assert {c.num_replicas for c in configs} == {3}
    assert {c.num_replicas for c in stream_configs(NatsConfig())} == {1}


def test_cluster_nodes_are_named_and_stored_apart(tmp_path: Path) -> None:
    assert [node_name(i) for i in range(3)] == ["nats-server", "nats-server-1", "nats-server-2"]
    nodes = NatsNodes(tmp_path / "nats", tmp_path / "logs", 3)
    assert nodes.names == ["nats-server", "nats-server-1", "nats-server-2"]
    assert nodes._store("nats-server-1") == tmp_path / "nats" / "nats-server-1"
    assert NatsNodes(tmp_path / "nats", tmp_path / "logs")._store("nats-server") == tmp_path / "nats"
    args = nodes._cluster_args(1, [7001, 7002, 7003])
    assert args[args.index("--cluster") + 1] == "nats://127.0.0.1:7002"
    assert args[args.index("--routes") + 1].split(",") == [f"nats://127.0.0.1:{p}" for p in (7001, 7002, 7003)]
    ports = free_ports(6)
    assert len(set(ports)) == 6 and all(p > 0 for p in ports)


@pytest.mark.parametrize("nodes", [0, 6])
def test_a_stack_has_one_to_five_nats_nodes(tmp_path: Path, nodes: int) -> None:
    with pytest.raises(StackError, match=f"--nats-cluster: want 1 to 5 nodes, got {nodes}"):
        Stack(tmp_path, nats_cluster=nodes, services=[])


def test_a_closed_clusters_routes_are_mutual_tls(tmp_path: Path) -> None:
    conf = SecureBus(tmp_path).create(cluster=True).server_config.read_text()
    routes = conf[conf.index("cluster {"):]
    assert "verify: true" in routes and "ca_file:" in routes and "cert_file:" in routes
    assert "cluster {" not in SecureBus(tmp_path / "one").create().server_config.read_text()
