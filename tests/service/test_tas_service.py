"""The tas service on a real nats-server: it rebuilds from the mirror, answers kq.v1.tas.solve,
and a replacement replica (the first one cancelled, as a killed process would stop answering)
respects the capacity the first one handed out: holds are rebuilt from the log."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgspec
import pytest
from support.wait import eventually

from kq import subjects
from kq.api.topology import topology_domains
from kq.api.workload import PodSetTopologyRequest
from kq.config import ClusterConfig, Config, NatsConfig
from kq.mirror import SyncMarker, encode_marker, mirror_msg_id, record_headers, sync_msg_id
from kq.placement import PodSetPlacementRequest, SolveReply, SolveRequest, encoder, reply_decoder
from kq.runtime import Bus
from services.tas.service import NEEDED_KINDS, TasSettings, main

pytestmark = pytest.mark.timeout(90)

CLUSTER = "manager"
RACK = "cloud.provider.com/topology-rack"
OBJECTS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("topology", "", "dc", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "dc", "uid": "t"},
                            "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]}}),
    ("resourceflavor", "", "tas", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                   "metadata": {"name": "tas", "uid": "f"}, "spec": {"topologyName": "dc"}}),
    *[("node", "", n, {"apiVersion": "v1", "kind": "Node",
                       "metadata": {"name": n, "uid": n, "labels": {RACK: r, "kubernetes.io/hostname": n}},
                       "status": {"allocatable": {"cpu": "2", "pods": "10"}, "conditions": [{"type": "Ready", "status": "True"}]}})
      for n, r in (("x1", "r1"), ("x2", "r2"))],
]


async def _seed_mirror(bus: Bus) -> None:
    for kind, ns, name, obj in OBJECTS:
        await bus.publish(subjects.object_subject(CLUSTER, kind, ns or None, name), msgspec.json.encode(obj),
                          msg_id=mirror_msg_id(CLUSTER, kind, ns or None, name, "1", "put"),
                          headers=record_headers("put", "1", obj["metadata"]["uid"]))
    for kind in NEEDED_KINDS:
        marker = SyncMarker(cluster=CLUSTER, kind=kind, resource_version="1", count=0)
        await bus.publish(subjects.sync_subject(CLUSTER, kind), encode_marker(marker),
                          msg_id=sync_msg_id(CLUSTER, kind, "1"))


def _request(name: str) -> bytes:
    ps = PodSetPlacementRequest(name="main", count=2, flavor="tas", requests={"cpu": 1000},
                                topology_request=PodSetTopologyRequest(required=RACK))
    return encoder.encode(SolveRequest(id=f"req-{name}", cluster=CLUSTER, namespace="ns", name=name,
                                       uid=f"uid-{name}", pod_sets=(ps,)))


async def _replica(nats_config: NatsConfig, instance: str) -> tuple[Bus, asyncio.Task[None]]:
    b = await Bus.connect(nats_config, "tas", instance=instance, connect_timeout_s=10.0)
    config = Config(nats=nats_config, clusters=(ClusterConfig(name=CLUSTER, kubeconfig="unused"),), instance=instance)
    task = asyncio.create_task(main(b, config, TasSettings(lease_ttl_s=1)))

    async def ready() -> str:
        assert b.status == "ready", b.status
        return b.status

    await eventually(ready, timeout=30, interval=0.05, what=f"tas replica {instance} ready")
    return b, task


async def _ask(bus: Bus, name: str) -> SolveReply:
    msg = await bus.nc.request(subjects.TAS_SOLVE, _request(name), timeout=10)
    return reply_decoder.decode(msg.data)


async def _stop(b: Bus, task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    await b.close()


async def test_a_replacement_replica_keeps_the_capacity_handed_out(bus: Bus, nats_config: NatsConfig) -> None:
    await _seed_mirror(bus)
    first, task = await _replica(nats_config, "a")
    try:
        a = await _ask(bus, "a")
        assert a.placed, a
        [(rack_a, _)] = {(d.values, d.count) for d in topology_domains(a.pod_sets[0].topology_assignment)}
    finally:
        await _stop(first, task)
    second, task = await _replica(nats_config, "b")  # takes the lease once the first one's lapses
    try:
        b = await _ask(bus, "b")
        assert b.placed, b
        [(rack_b, _)] = {(d.values, d.count) for d in topology_domains(b.pod_sets[0].topology_assignment)}
        assert rack_b != rack_a  # a's host is still held: the new replica rebuilt the hold from the log
        c = await _ask(bus, "c")
        assert not c.placed and RACK in c.message, c
    finally:
        await _stop(second, task)


def _held_on(host: str) -> dict[str, Any]:
    """A Workload holding quota with a topology assignment of two 1-cpu pods on `host`."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "held", "namespace": "ns", "uid": "uid-held"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 2, "template": {"spec": {
                "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                       "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                       "admission": {"clusterQueue": "cq", "podSetAssignments": [{
                           "name": "main", "flavors": {"cpu": "tas"}, "count": 2,
                           "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": [{
                               "domainCount": 1, "valuesPerLevel": [{"universal": host}],
                               "podCounts": {"universal": 2}}]}}]}}}


async def _publish(bus: Bus, kind: str, ns: str, name: str, obj: dict[str, Any], rv: str) -> None:
    await bus.publish(subjects.object_subject(CLUSTER, kind, ns or None, name), msgspec.json.encode(obj),
                      msg_id=mirror_msg_id(CLUSTER, kind, ns or None, name, rv, "put"),
                      headers=record_headers("put", rv, obj["metadata"]["uid"]))


async def test_workloads_are_read_from_the_first_flavor_naming_a_topology_on(bus: Bus,
                                                                              nats_config: NatsConfig) -> None:
    topology, flavor, *nodes = OBJECTS
    plain = {**flavor[3], "spec": {}}
    running = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "uid-p"},
               "spec": {"nodeName": "x2", "containers": [{"name": "c", "image": "i",
                                                           "resources": {"requests": {"cpu": "1"}}}]},
               "status": {"phase": "Running"}}
    for kind, ns, name, obj in [("resourceflavor", "", "tas", plain), *nodes, ("workload", "ns", "held", _held_on("x1")),
                                ("pod", "ns", "p", running)]:
        await _publish(bus, kind, ns, name, obj, "1")
    for kind in NEEDED_KINDS:
        await bus.publish(subjects.sync_subject(CLUSTER, kind),
                          encode_marker(SyncMarker(cluster=CLUSTER, kind=kind, resource_version="1", count=0)),
                          msg_id=sync_msg_id(CLUSTER, kind, "1"))

    async def filters() -> set[str]:
        infos = await bus.js.consumers_info(subjects.OBJECTS_STREAM)
        return {f for i in infos for f in (i.config.filter_subjects or [i.config.filter_subject or ""]) if f}

    late = {subjects.object_filter(CLUSTER, "workload"), subjects.object_filter(CLUSTER, "pod")}
    b, task = await _replica(nats_config, "a")
    try:
        assert not late & await filters()  # no flavor names a Topology: no Workload nor Pod is read
        await _publish(bus, "topology", "", "dc", topology[3], "2")
        await _publish(bus, "resourceflavor", "", "tas", flavor[3], "2")

        async def followed() -> set[str]:
            got = await filters()
            assert late <= got, got
            return got

        await eventually(followed, timeout=30, interval=0.05, what="tas reading Workloads and Pods")
        # x1 is full with the held Workload's two pods and x2 half used by the running pod, both read
        # late: two pods fit in no rack.
        a = await _ask(bus, "a")
        assert not a.placed and RACK in a.message, a
        await _publish(bus, "pod", "ns", "p", {**running, "status": {"phase": "Succeeded"}}, "3")

        async def placed_on_x2() -> SolveReply:
            c = await _ask(bus, "c")
            assert c.placed and {d.values for d in topology_domains(c.pod_sets[0].topology_assignment)} == {("x2",)}, c
            return c

        await eventually(placed_on_x2, timeout=30, interval=0.05, what="x2 free once its pod is done")
    finally:
        await _stop(b, task)
