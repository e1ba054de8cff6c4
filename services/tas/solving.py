"""Conversions between the bus/API shapes and the pure core's plain inputs and outcomes.

Kubernetes objects -> NodeInfo / FlavorSpec; a solve request's pod sets -> PodSetRequest
(the mode from podSets[].topologyRequest as Kueue reads it); a core outcome -> SolveReply.
"""

from __future__ import annotations

from kq.api.core import Node, Taint, Toleration
from kq.api.kueue import ResourceFlavor
from kq.placement import Candidate, HeldDomain, PodSetPlacementRequest, PodSetTopology, SolveReply
from kq.quantity import resource_amount
from services.tas.core import (
    FlavorSpec,
    NodeInfo,
    Placement,
    PlacementFailure,
    PodSetRequest,
    RequestMode,
    TaintSpec,
    TolerationSpec,
    TopologySpecIn,
)


def _toleration(t: Toleration) -> TolerationSpec:
    return TolerationSpec(key=t.key, operator=t.operator, value=t.value, effect=t.effect)


def _taint(t: Taint) -> TaintSpec:
    return TaintSpec(key=t.key, value=t.value, effect=t.effect)


def node_info(node: Node) -> NodeInfo:
    ready = next((c.status == "True" for c in node.status.conditions if c.type == "Ready"), False)
    alloc = node.status.allocatable or node.status.capacity
    return NodeInfo(
        name=node.metadata.name,
        labels=dict(node.metadata.labels),
        allocatable={r: resource_amount(r, q) for r, q in alloc.items()},
        taints=tuple(_taint(t) for t in node.spec.taints),
        ready=ready,
        unschedulable=node.spec.unschedulable,
    )


def flavor_spec(flavor: ResourceFlavor, levels: tuple[str, ...]) -> FlavorSpec:
    assert flavor.spec.topology_name is not None
    return FlavorSpec(
        name=flavor.metadata.name,
        topology=TopologySpecIn(name=flavor.spec.topology_name, levels=levels),
        node_labels=dict(flavor.spec.node_labels),
        tolerations=tuple(_toleration(t) for t in flavor.spec.tolerations),
    )


def pod_set_request(ps: PodSetPlacementRequest) -> PodSetRequest:
    """Kueue's reading of a pod set's topologyRequest (required > preferred > unconstrained >
    slices only); with no request at all, implied unconstrained."""
    r = ps.topology_request
    mode: RequestMode
    level: str | None = None
    if r is not None and r.required:
        mode, level = "required", r.required
    elif r is not None and r.preferred:
        mode, level = "preferred", r.preferred
    elif r is not None and r.unconstrained:
        mode = "unconstrained"
    elif r is not None and r.pod_set_slice_required_topology:
        mode = "slices-only"
    else:
        mode = "implied"
    slice_level = r.pod_set_slice_required_topology if r is not None else None
    slice_size = r.pod_set_slice_size if r is not None else None
    if slice_level is not None and slice_size is None:
        slice_size = 1  # Kueue defaults podset-slice-size to 1 when only the slice level is given
    return PodSetRequest(
        name=ps.name,
        count=ps.count,
        requests=dict(ps.requests),
        mode=mode,
        level=level,
        slice_level=slice_level,
        slice_size=slice_size,
        group=r.pod_set_group_name if r is not None else None,
        tolerations=tuple(_toleration(t) for t in ps.tolerations),
        node_selector=dict(ps.node_selector),
    )


def held_domains(placement: Placement, pod_sets: list[PodSetRequest]) -> tuple[HeldDomain, ...]:
    by_name = {ps.name: ps for ps in pod_sets}
    return tuple(
        HeldDomain(pod_set=p.pod_set, values=tuple(d.values), count=d.count, requests=dict(by_name[p.pod_set].requests))
        for p in placement.pod_sets for d in p.domains
    )


def placed_reply(request_id: str, placements: list[Placement], victims: tuple[Candidate, ...] = ()) -> SolveReply:
    return SolveReply(
        request_id=request_id,
        placed=True,
        pod_sets=tuple(PodSetTopology(name=p.pod_set, topology_assignment=p.assignment)
                       for pl in placements for p in pl.pod_sets),
        victims=victims,
    )


def failed_reply(request_id: str, failure: PlacementFailure) -> SolveReply:
    return SolveReply(request_id=request_id, placed=False, reason=failure.kind, message=failure.message)
