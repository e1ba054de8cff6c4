"""What a benchmark creates, and when: pure, from the configuration alone.

Names, labels and the creation schedule follow Kueue's generator
(test/performance/scheduler/runner/generator): cohort `<class>-<i>`; ClusterQueue, its
namespace and its LocalQueue `<queueClass>-<setIndex>-<queueIndex>-<cohort>`; workload
`<class>-<setIndex>-<round>-<templateIndex>`. Within a workloads set the k-th workload
(k = 1, 2, ...; rounds times templates) is created at k x creationIntervalMs after the queue
exists, all sets of all queues in parallel. Kueue sleeps before each creation, so a slow
API server makes its schedule drift; ours is absolute (a late creation does not delay the next).
"""

from __future__ import annotations

import functools

import msgspec

from kq.api import core as api_core
from kq.api import kueue as api
from kq.api.meta import LabelSelector, ObjectMeta, ResourceList
from kq.bench.config import BenchConfig
from kq.quantity import canonical_quantity, to_milli

KUEUE_API = "kueue.x-k8s.io/v1beta2"
CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
RUNTIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"
CLEANUP_LABEL = "kueue.x-k8s.io/performance-scheduler-cleanup"
RESOURCE = "cpu"
TAS_NODE_GROUP_LABEL = "tas-node-group"
TAS_NODE_GROUP_VALUE = "tas"
HOSTNAME_LABEL = "kubernetes.io/hostname"
POD_IMAGE = "registry.k8s.io/pause:3.9"


class QueuePlan(msgspec.Struct, frozen=True, kw_only=True):
    """One ClusterQueue with its namespace and LocalQueue (all three share the name)."""

    name: str
    class_name: str
    cohort: str
    cohort_class: str
    nominal_milli: int
    borrowing_limit_milli: int | None
    reclaim_within_cohort: str = "Never"
    within_cluster_queue: str = "Never"


class WorkloadPlan(msgspec.Struct, frozen=True, kw_only=True):
    index: int  # position in the creation order
    at_ms: int  # creation time after the queues exist
    namespace: str
    name: str
    cluster_queue: str
    class_name: str
    runtime_ms: int
    priority: int
    request_milli: int  # cpu per pod
    pod_count: int
    tas_constraint: str | None = None  # required | preferred | balanced (slices of slice_size at tas_level)
    tas_level: str | None = None
    slice_size: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def cpu_milli(self) -> int:
        return self.request_milli * self.pod_count


class TopologyPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Kueue's topology generator: nodes are the product of the level counts."""

    name: str
    level_names: tuple[str, ...]
    level_labels: tuple[str, ...]
    level_counts: tuple[int, ...]
    capacity: dict[str, str]  # the node level's capacity
    flavor_node_label: str  # the flavor's nodeLabels key (value "tas"), set on every node


class BenchPlan(msgspec.Struct, frozen=True, kw_only=True):
    flavor: str
    queues: tuple[QueuePlan, ...]
    cohorts: tuple[str, ...]
    workloads: tuple[WorkloadPlan, ...]  # in creation order (at_ms, then generation order)
    topology: TopologyPlan | None = None

    @property
    def last_creation_ms(self) -> int:
        return self.workloads[-1].at_ms if self.workloads else 0

    def queue(self, name: str) -> QueuePlan:
        for q in self.queues:
            if q.name == name:
                return q
        raise KeyError(name)


def build_plan(cfg: BenchConfig) -> BenchPlan:
    queues: list[QueuePlan] = []
    cohorts: list[str] = []
    unordered: list[tuple[int, int, WorkloadPlan]] = []
    seq = 0
    for cs in cfg.cohorts:
        for ci in range(cs.count):
            cohort = f"{cs.class_name}-{ci}"
            cohorts.append(cohort)
            for qsi, qs in enumerate(cs.queues_sets):
                for qi in range(qs.count):
                    name = f"{qs.class_name}-{qsi}-{qi}-{cohort}"
                    queues.append(QueuePlan(
                        name=name, class_name=qs.class_name, cohort=cohort, cohort_class=cs.class_name,
                        nominal_milli=to_milli(qs.nominal_quota),
                        borrowing_limit_milli=None if qs.borrowing_limit is None else to_milli(qs.borrowing_limit),
                        reclaim_within_cohort=qs.reclaim_within_cohort, within_cluster_queue=qs.within_cluster_queue,
                    ))
                    for wsi, ws in enumerate(qs.workloads_sets):
                        k = 0
                        for rnd in range(ws.count):
                            for ti, t in enumerate(ws.workloads):
                                k += 1
                                at = k * ws.creation_interval_ms
                                plan = WorkloadPlan(
                                    index=0, at_ms=at, namespace=name, name=f"{t.class_name}-{wsi}-{rnd}-{ti}",
                                    cluster_queue=name, class_name=t.class_name, runtime_ms=t.runtime_ms,
                                    priority=t.priority, request_milli=to_milli(t.request),
                                    pod_count=t.pod_count or 1, tas_constraint=t.tas_constraint,
                                    tas_level=t.tas_level, slice_size=t.slice_size,
                                )
                                unordered.append((at, seq, plan))
                                seq += 1
    unordered.sort(key=lambda x: (x[0], x[1]))
    workloads = tuple(msgspec.structs.replace(p, index=i) for i, (_, _, p) in enumerate(unordered))
    topology = None
    if cfg.topology is not None and cfg.resource_flavor is not None and cfg.resource_flavor.topology_name:
        levels = cfg.topology.levels
        topology = TopologyPlan(
            name=cfg.topology.name, level_names=tuple(lv.name for lv in levels),
            level_labels=tuple(lv.node_label for lv in levels), level_counts=tuple(lv.count for lv in levels),
            capacity={r: str(q) for r, q in (levels[-1].capacity or {}).items()},
            flavor_node_label=cfg.resource_flavor.node_label or TAS_NODE_GROUP_LABEL,
        )
    return BenchPlan(flavor=cfg.flavor_name, queues=tuple(queues), cohorts=tuple(cohorts), workloads=workloads,
                     topology=topology)


# --- the Kubernetes objects --------------------------------------------------------------------------


def _labels(class_name: str | None = None) -> dict[str, str]:
    labels = {CLEANUP_LABEL: "true"}
    if class_name is not None:
        labels[CLASS_LABEL] = class_name
    return labels


@functools.cache
def _quantity(milli: int) -> str:
    """A few distinct requests, one per workload: each one's canonical text computed once."""
    return canonical_quantity(f"{milli}m")


def namespace_object(q: QueuePlan) -> api_core.Namespace:
    return api_core.Namespace(api_version="v1", kind="Namespace", metadata=ObjectMeta(name=q.name, labels=_labels()))


def flavor_object(plan: BenchPlan) -> api.ResourceFlavor:
    spec = api.ResourceFlavorSpec()
    if plan.topology is not None:
        spec = api.ResourceFlavorSpec(node_labels={plan.topology.flavor_node_label: TAS_NODE_GROUP_VALUE},
                                      topology_name=plan.topology.name)
    return api.ResourceFlavor(api_version=KUEUE_API, kind="ResourceFlavor",
                              metadata=ObjectMeta(name=plan.flavor, labels=_labels()), spec=spec)


def topology_object(t: TopologyPlan) -> api.Topology:
    return api.Topology(api_version=KUEUE_API, kind="Topology", metadata=ObjectMeta(name=t.name, labels=_labels()),
                        spec=api.TopologySpec(levels=tuple(api.TopologyLevel(node_label=lb) for lb in t.level_labels)))


def node_objects(t: TopologyPlan) -> list[api_core.Node]:
    """Kueue's generateNodesRecursive: values "<level name>-<i>", node "node-b0-r2-n15", Ready.
    The hostname label is the node's name, so hostname-only topology assignments stay unambiguous."""
    allocatable: ResourceList = {**t.capacity, "pods": "110"}
    out: list[api_core.Node] = []

    def walk(depth: int, values: list[str]) -> None:
        if depth == len(t.level_counts):
            name = "node" + "".join(f"-{v[0]}{v.rsplit('-', 1)[1]}" for v in values)
            by_level = dict(zip(t.level_labels, values, strict=False))
            labels = {**_labels(), t.flavor_node_label: TAS_NODE_GROUP_VALUE, **by_level}
            if t.level_labels[-1] == HOSTNAME_LABEL:
                labels[HOSTNAME_LABEL] = name  # as on a real node (Kueue's generator reuses "node-<i>" per rack)
            out.append(api_core.Node(
                api_version="v1", kind="Node", metadata=ObjectMeta(name=name, labels=labels),
                status=api_core.NodeStatus(capacity=allocatable, allocatable=allocatable,
                                           conditions=(api_core.CoreCondition(type="Ready", status="True"),)),
            ))
            return
        for i in range(t.level_counts[depth]):
            walk(depth + 1, [*values, f"{t.level_names[depth]}-{i}"])

    walk(0, [])
    return out


def cohort_object(name: str) -> api.Cohort:
    return api.Cohort(api_version=KUEUE_API, kind="Cohort", metadata=ObjectMeta(name=name, labels=_labels()))


def cluster_queue_object(plan: BenchPlan, q: QueuePlan) -> api.ClusterQueue:
    quota = api.ResourceQuota(
        name=RESOURCE,
        nominal_quota=_quantity(q.nominal_milli),
        borrowing_limit=None if q.borrowing_limit_milli is None else _quantity(q.borrowing_limit_milli),
    )
    return api.ClusterQueue(
        api_version=KUEUE_API,
        kind="ClusterQueue",
        metadata=ObjectMeta(name=q.name, labels=_labels(q.class_name)),
        spec=api.ClusterQueueSpec(
            cohort_name=q.cohort,
            namespace_selector=LabelSelector(),  # Kueue's test wrapper: every namespace
            resource_groups=(api.ResourceGroup(
                covered_resources=(RESOURCE,),
                flavors=(api.FlavorQuotas(name=plan.flavor, resources=(quota,)),),
            ),),
            preemption=api.ClusterQueuePreemption(
                # Both are str in the bench plan, checked against Kueue's policy names when it is parsed.
                reclaim_within_cohort=q.reclaim_within_cohort,  # type: ignore[arg-type]  # see above
                within_cluster_queue=q.within_cluster_queue,  # type: ignore[arg-type]  # see above
            ),
        ),
    )


def local_queue_object(q: QueuePlan) -> api.LocalQueue:
    return api.LocalQueue(api_version=KUEUE_API, kind="LocalQueue",
                          metadata=ObjectMeta(name=q.name, namespace=q.name, labels=_labels()),
                          spec=api.LocalQueueSpec(cluster_queue=q.name))


def workload_object(w: WorkloadPlan, *, uid: str = "", creation_timestamp: str | None = None) -> api.Workload:
    """Kueue's MakeWorkload(...).Queue(lq).Label(runtime).Label(class).Priority(p).Request(cpu, r)."""
    container = api_core.Container(
        name="main", image=POD_IMAGE,
        resources=api_core.ResourceRequirements(requests={RESOURCE: _quantity(w.request_milli)}),
    )
    request = None
    if w.tas_level:
        if w.tas_constraint == "required":
            request = api.PodSetTopologyRequest(required=w.tas_level)
        elif w.tas_constraint == "preferred":
            request = api.PodSetTopologyRequest(preferred=w.tas_level)
        else:  # balanced: Kueue's generator asks for slices at the level
            request = api.PodSetTopologyRequest(pod_set_slice_required_topology=w.tas_level,
                                                pod_set_slice_size=w.slice_size)
    pod_set = api.PodSet(
        name="main", count=w.pod_count,
        template=api_core.PodTemplateSpec(spec=api_core.PodSpec(restart_policy="Never", containers=(container,))),
        topology_request=request,
    )
    return api.Workload(
        api_version=KUEUE_API,
        kind="Workload",
        metadata=ObjectMeta(
            name=w.name, namespace=w.namespace, uid=uid, creation_timestamp=creation_timestamp,
            labels={RUNTIME_LABEL: str(w.runtime_ms), CLASS_LABEL: w.class_name},
        ),
        spec=api.WorkloadSpec(queue_name=w.cluster_queue, priority=w.priority, pod_sets=(pod_set,)),
    )


def setup_objects(plan: BenchPlan) -> list[msgspec.Struct]:
    """Everything but the workloads, in an order the API accepts: (TAS: the Topology and the nodes),
    flavor, cohorts, then per queue its namespace, ClusterQueue and LocalQueue."""
    out: list[msgspec.Struct] = []
    if plan.topology is not None:
        out += [topology_object(plan.topology), *node_objects(plan.topology)]
    out.append(flavor_object(plan))
    out += [cohort_object(c) for c in plan.cohorts]
    for q in plan.queues:
        out += [namespace_object(q), cluster_queue_object(plan, q), local_queue_object(q)]
    return out
