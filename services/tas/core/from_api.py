"""Kueue/Kubernetes API objects to the solver's inputs (pure; the shell decodes, this converts)."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from kq.api.core import Node, Taint, Toleration
from kq.api.kueue import ResourceFlavor, Topology
from kq.api.workload import PodSet
from kq.quantity import resource_amount
from services.tas.core.model import FlavorSpec, NodeInfo, PodSetRequest, TaintSpec, TolerationSpec, TopologySpecIn

__all__ = [
    "node_info",
    "flavor_spec",
    "taint_spec",
    "toleration_spec",
    "amounts",
    "amounts_from_milli",
    "podset_request",
    "TopologyRequestError",
]


class TopologyRequestError(ValueError):
    """A pod set's topologyRequest that cannot be honoured as written (message names the field)."""


def amounts(resources: Mapping[str, object]) -> dict[str, int]:
    """A ResourceList in Kueue's integer view (milli-CPU, whole units otherwise)."""
    return {r: resource_amount(r, str(q)) for r, q in resources.items()}


def amounts_from_milli(milli: Mapping[str, int]) -> dict[str, int]:
    """Milli-units for every resource (admission's pod requests) to Kueue's integer view (rounded up)."""
    return {r: v if r == "cpu" else -(-v // 1000) for r, v in milli.items()}


def taint_spec(t: Taint) -> TaintSpec:
    return TaintSpec(key=t.key, value=t.value, effect=t.effect)


def toleration_spec(t: Toleration) -> TolerationSpec:
    return TolerationSpec(key=t.key, operator=t.operator, value=t.value, effect=t.effect)


def node_info(node: Node) -> NodeInfo:
    ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    return NodeInfo(
        name=node.metadata.name,
        labels=dict(node.metadata.labels),
        allocatable=amounts(node.status.allocatable),
        taints=tuple(taint_spec(t) for t in node.spec.taints),
        ready=ready,
        unschedulable=node.spec.unschedulable,
    )


def flavor_spec(flavor: ResourceFlavor, topology: Topology) -> FlavorSpec:
    return FlavorSpec(
        name=flavor.metadata.name,
        topology=TopologySpecIn(
            name=topology.metadata.name, levels=tuple(lv.node_label for lv in topology.spec.levels)
        ),
        node_labels=dict(flavor.spec.node_labels),
        tolerations=tuple(toleration_spec(t) for t in flavor.spec.tolerations),
    )


def podset_request(pod_set: PodSet, requests: dict[str, int], *, implied: bool = False,
                   where: str = "spec.podSets[0]") -> PodSetRequest | None:
    """The TAS request of a pod set; None when it asks for none (and `implied` is false).

    `requests`: one pod's requests in Kueue's integer view. `implied`: the workload
    has no TAS request but every flavor of its queue is a TAS flavor (Kueue's implied
    unconstrained). Raises TopologyRequestError for what Kueue's webhook refuses.
    """
    tr = pod_set.topology_request
    spec = pod_set.template.spec
    base = PodSetRequest(name=pod_set.name, count=pod_set.count, requests=requests, mode="implied",
                         tolerations=tuple(toleration_spec(t) for t in spec.tolerations),
                         node_selector=dict(spec.node_selector))
    if tr is None:
        return base if implied else None
    at = f"{where}.topologyRequest"
    chosen = [n for n, v in (("required", tr.required), ("preferred", tr.preferred),
                             ("unconstrained", tr.unconstrained or None)) if v is not None]
    if len(chosen) > 1:
        raise TopologyRequestError(f"{at}: only one of required, preferred, unconstrained may be set "
                                   f"(got {', '.join(chosen)})")
    slice_level, slice_size = tr.pod_set_slice_required_topology, tr.pod_set_slice_size
    layers = tr.podset_slice_required_topology_constraints
    if layers:
        if slice_level is not None:
            raise TopologyRequestError(f"{at}: podsetSliceRequiredTopologyConstraints and "
                                       "podSetSliceRequiredTopology are mutually exclusive")
        if len(layers) > 1:
            raise TopologyRequestError(f"{at}.podsetSliceRequiredTopologyConstraints: more than one layer "
                                       "(multi-layer topology) is not supported by kq")
        slice_level, slice_size = layers[0].topology, layers[0].size
    if (slice_level is None) != (slice_size is None):
        field = "podSetSliceSize" if slice_size is None else "podSetSliceRequiredTopology"
        raise TopologyRequestError(f"{at}.{field}: must be set together with "
                                   f"{'podSetSliceRequiredTopology' if slice_size is None else 'podSetSliceSize'}")
    group = tr.pod_set_group_name
    if not chosen:
        if slice_level is not None:
            return msgspec.structs.replace(base, mode="slices-only", slice_level=slice_level,
                                           slice_size=slice_size, group=group)
        if implied or group is not None:
            return msgspec.structs.replace(base, group=group)
        return None
    if tr.required is not None:
        return msgspec.structs.replace(base, mode="required", level=tr.required, slice_level=slice_level,
                                       slice_size=slice_size, group=group)
    if tr.preferred is not None:
        return msgspec.structs.replace(base, mode="preferred", level=tr.preferred, slice_level=slice_level,
                                       slice_size=slice_size, group=group)
    return msgspec.structs.replace(base, mode="unconstrained", slice_level=slice_level, slice_size=slice_size,
                                   group=group)
