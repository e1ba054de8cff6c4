"""The plan: names, objects and the creation schedule, as Kueue's generator makes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kq.bench.config import load_config, parse_config
from kq.bench.generate import (
    CLASS_LABEL,
    RUNTIME_LABEL,
    build_plan,
    cluster_queue_object,
    local_queue_object,
    setup_objects,
    workload_object,
)
from kq.bench.metrics import physical_limit

SHARED_BENCH = Path(__file__).resolve().parents[3].parent / "shared" / "bench"

TWO_SETS = """
cohorts:
  - className: co
    count: 2
    queuesSets:
      - className: cq
        count: 1
        nominalQuota: 4
        borrowingLimit: 2
        reclaimWithinCohort: Any
        withinClusterQueue: LowerPriority
        workloadsSets:
          - count: 2
            creationIntervalMs: 100
            workloads:
              - {className: a, runtimeMs: 10, priority: 1, request: 500m}
              - {className: b, runtimeMs: 20, priority: 2, request: 1}
          - count: 1
            creationIntervalMs: 250
            workloads:
              - {className: c, runtimeMs: 30, priority: 3, request: 2, podCount: 3}
"""


def test_schedule_kth_at_k_times_interval_all_sets_in_parallel() -> None:
    plan = build_plan(parse_config(TWO_SETS))
    got = [(w.at_ms, w.namespace, w.name) for w in plan.workloads]
    assert got == [
        (100, "cq-0-0-co-0", "a-0-0-0"),
        (100, "cq-0-0-co-1", "a-0-0-0"),
        (200, "cq-0-0-co-0", "b-0-0-1"),
        (200, "cq-0-0-co-1", "b-0-0-1"),
        (250, "cq-0-0-co-0", "c-1-0-0"),
        (250, "cq-0-0-co-1", "c-1-0-0"),
        (300, "cq-0-0-co-0", "a-0-1-0"),
        (300, "cq-0-0-co-1", "a-0-1-0"),
        (400, "cq-0-0-co-0", "b-0-1-1"),
        (400, "cq-0-0-co-1", "b-0-1-1"),
    ]
    assert [w.index for w in plan.workloads] == list(range(10))
    assert plan.last_creation_ms == 400


def test_workload_fields_come_from_the_template() -> None:
    plan = build_plan(parse_config(TWO_SETS))
    c = next(w for w in plan.workloads if w.class_name == "c")
    assert (c.runtime_ms, c.priority, c.request_milli, c.pod_count, c.cpu_milli) == (30, 3, 2000, 3, 6000)
    assert c.cluster_queue == c.namespace == "cq-0-0-co-0"


def test_queues_and_cohorts() -> None:
    plan = build_plan(parse_config(TWO_SETS))
    assert plan.cohorts == ("co-0", "co-1")
    assert [(q.name, q.cohort, q.nominal_milli, q.borrowing_limit_milli) for q in plan.queues] == [
        ("cq-0-0-co-0", "co-0", 4000, 2000),
        ("cq-0-0-co-1", "co-1", 4000, 2000),
    ]


def test_cluster_queue_object_is_kueues() -> None:
    plan = build_plan(parse_config(TWO_SETS))
    cq = cluster_queue_object(plan, plan.queues[0])
    assert cq.metadata.name == "cq-0-0-co-0"
    assert cq.metadata.labels[CLASS_LABEL] == "cq"
    assert cq.spec.cohort_name == "co-0"
    assert cq.spec.namespace_selector is not None and not cq.spec.namespace_selector.match_labels
    (rg,) = cq.spec.resource_groups
    assert rg.covered_resources == ("cpu",)
    (fq,) = rg.flavors
    assert fq.name == "rf"
    (rq,) = fq.resources
    assert (rq.name, rq.nominal_quota, rq.borrowing_limit) == ("cpu", "4", "2")
    assert (cq.spec.preemption.reclaim_within_cohort, cq.spec.preemption.within_cluster_queue) == ("Any", "LowerPriority")
    lq = local_queue_object(plan.queues[0])
    assert (lq.metadata.namespace, lq.metadata.name, lq.spec.cluster_queue) == ("cq-0-0-co-0",) * 3


def test_workload_object_is_kueues() -> None:
    plan = build_plan(parse_config(TWO_SETS))
    w = next(w for w in plan.workloads if w.class_name == "c")
    obj = workload_object(w)
    assert obj.metadata.labels == {RUNTIME_LABEL: "30", CLASS_LABEL: "c"}
    assert (obj.spec.queue_name, obj.spec.priority) == ("cq-0-0-co-0", 3)
    (ps,) = obj.spec.pod_sets
    assert (ps.name, ps.count) == ("main", 3)
    assert ps.template.spec.containers[0].resources.requests == {"cpu": "2"}


def test_setup_objects_order() -> None:
    plan = build_plan(parse_config(TWO_SETS))
    objs: list[Any] = setup_objects(plan)  # plain Structs, each with kind and metadata
    kinds = [(o.kind, o.metadata.name) for o in objs]
    assert kinds == [
        ("ResourceFlavor", "rf"),
        ("Cohort", "co-0"),
        ("Cohort", "co-1"),
        ("Namespace", "cq-0-0-co-0"),
        ("ClusterQueue", "cq-0-0-co-0"),
        ("LocalQueue", "cq-0-0-co-0"),
        ("Namespace", "cq-0-0-co-1"),
        ("ClusterQueue", "cq-0-0-co-1"),
        ("LocalQueue", "cq-0-0-co-1"),
    ]


@pytest.mark.parametrize(
    ("name", "queues", "workloads", "wall_s", "usage"),
    [
        pytest.param("baseline", 30, 15000, 66.8, 98.7, id="baseline"),
        pytest.param("large-scale", 1000, 50000, 4.5, 90.0, id="large-scale"),
    ],
)
def test_kueue_configs_plan_and_physical_limit(name: str, queues: int, workloads: int, wall_s: float,
                                               usage: float) -> None:
    plan = build_plan(load_config(SHARED_BENCH / f"{name}.yaml"))
    assert (len(plan.queues), len(plan.workloads)) == (queues, workloads)
    wall_ms, usage_pct = physical_limit(plan)
    assert round(wall_ms / 1000, 1) == wall_s  # the README's figure
    assert round(usage_pct, 1) == usage


def test_physical_limit_is_arrival_bound_when_capacity_is_ample() -> None:
    doc = yaml.safe_load(TWO_SETS)
    doc["cohorts"][0]["queuesSets"][0]["nominalQuota"] = 1000
    wall_ms, _ = physical_limit(build_plan(parse_config(yaml.safe_dump(doc))))
    assert wall_ms == 420  # the last creation (400) + its runtime (20)


def test_tas_plan_generates_topology_nodes_flavor_and_requests() -> None:
    from kq.bench.config import load_config
    from kq.bench.generate import build_plan, node_objects, setup_objects, workload_object

    plan = build_plan(load_config(Path(__file__).resolve().parents[3].parent / "shared" / "bench" / "tas.yaml"))
    assert plan.topology is not None
    nodes = node_objects(plan.topology)
    assert len(nodes) == 1 * 10 * 64
    n = nodes[0]
    assert n.metadata.name == "node-b0-r0-n0"
    assert n.metadata.labels["cloud.provider.com/topology-rack"] == "rack-0"
    assert n.metadata.labels["kubernetes.io/hostname"] == "node-b0-r0-n0"
    assert n.status.allocatable == {"cpu": "96", "memory": "256Gi", "pods": "110"}
    objs: list[Any] = setup_objects(plan)  # Nodes, flavors, queues: read by kind
    assert [o.kind for o in objs[:2]] == ["Topology", "Node"]
    flavor = next(o for o in objs if o.kind == "ResourceFlavor")
    assert flavor.spec.topology_name == "default-topology"
    assert flavor.spec.node_labels == {"tas-node-group": "tas"}
    by_class = {w.class_name: w for w in plan.workloads}
    req = workload_object(by_class["small-required-rack"]).spec.pod_sets[0].topology_request
    assert req is not None and req.required == "cloud.provider.com/topology-rack"
    bal = workload_object(by_class["medium-balanced-rack"]).spec.pod_sets[0].topology_request
    assert bal is not None and bal.pod_set_slice_required_topology == "cloud.provider.com/topology-rack"
    assert bal.pod_set_slice_size == 2
