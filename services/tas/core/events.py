"""What changes the solver's state, as values: the shell logs them, a new replica replays them.

`apply` is the only way the shell should feed the solver, so that replaying the
log (or `snapshot`, its compacted form) rebuilds the same trees and the same held
capacity, and hence the same placements.
"""

from __future__ import annotations

import msgspec

from services.tas.core.model import Amounts, FlavorSpec, HeldPodSet, NodeInfo
from services.tas.core.solver import TasSolver

__all__ = [
    "FlavorSet",
    "FlavorRemoved",
    "NodeUpserted",
    "NodeRemoved",
    "PodBound",
    "PodGone",
    "Assumed",
    "Confirmed",
    "Released",
    "TasEvent",
    "apply",
    "snapshot",
]


class FlavorSet(msgspec.Struct, frozen=True, kw_only=True, tag="flavor-set"):
    flavor: FlavorSpec


class FlavorRemoved(msgspec.Struct, frozen=True, kw_only=True, tag="flavor-removed"):
    name: str


class NodeUpserted(msgspec.Struct, frozen=True, kw_only=True, tag="node-upserted"):
    node: NodeInfo


class NodeRemoved(msgspec.Struct, frozen=True, kw_only=True, tag="node-removed"):
    name: str


class PodBound(msgspec.Struct, frozen=True, kw_only=True, tag="pod-bound"):
    key: str  # namespace/name (or uid): a pod bound to a node, kq's or not
    node: str
    requests: Amounts
    workload: str | None = None  # the kq workload it belongs to


class PodGone(msgspec.Struct, frozen=True, kw_only=True, tag="pod-gone"):
    key: str


class Assumed(msgspec.Struct, frozen=True, kw_only=True, tag="assumed"):
    workload: str
    flavor: str
    pod_sets: tuple[HeldPodSet, ...]


class Confirmed(msgspec.Struct, frozen=True, kw_only=True, tag="confirmed"):
    workload: str


class Released(msgspec.Struct, frozen=True, kw_only=True, tag="released"):
    workload: str


TasEvent = FlavorSet | FlavorRemoved | NodeUpserted | NodeRemoved | PodBound | PodGone | Assumed | Confirmed | Released


def apply(solver: TasSolver, event: TasEvent) -> None:
    match event:
        case FlavorSet(flavor=f):
            solver.set_flavor(f)
        case FlavorRemoved(name=n):
            solver.remove_flavor(n)
        case NodeUpserted(node=node):
            solver.upsert_node(node)
        case NodeRemoved(name=n):
            solver.remove_node(n)
        case PodBound(key=k, node=node_name, requests=r, workload=w):
            solver.pod_bound(k, node_name, r, w)
        case PodGone(key=k):
            solver.pod_gone(k)
        case Assumed(workload=w, flavor=f, pod_sets=p):
            solver.assume(w, f, p)
        case Confirmed(workload=w):
            solver.confirm(w)
        case Released(workload=w):
            solver.release(w)


def snapshot(solver: TasSolver) -> list[TasEvent]:
    """Events that rebuild the solver's current state from empty (a compacted log)."""
    out: list[TasEvent] = [FlavorSet(flavor=t.flavor) for _, t in sorted(solver.trees.items())]
    out += [NodeUpserted(node=n) for _, n in sorted(solver.nodes.items())]
    for key, (node, amounts, wl) in sorted(solver.pods.items()):
        requests = dict(amounts)
        requests["pods"] -= 1  # pod_bound adds the pod itself again
        if not requests["pods"]:
            del requests["pods"]
        out.append(PodBound(key=key, node=node, requests=requests, workload=wl))
    for wl_key, record in sorted(solver.holds.items()):
        out.append(Assumed(workload=wl_key, flavor=record.flavor, pod_sets=record.pod_sets))
        if record.state == "confirmed":
            out.append(Confirmed(workload=wl_key))
    return out
