"""The topology solver's request/reply (`kq.v1.tas.solve`) and its hold records (KQ_EVENTS).

Admission asks the tas service for a placement of a workload's TAS pod sets on the flavors
its flavor assignment picked; tas answers with a topology assignment per pod set (and, when
asked with preemption candidates, the fewest of them whose removal makes it fit), or a
failure whose message names what did not fit (the level, the slice size). Before answering,
tas records the capacity it hands out as a `PlacementHeld` event, so a restarted or replaced
replica rebuilds the same holds from the log.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from kq import subjects
from kq.api.core import Toleration
from kq.api.workload import PodSetTopologyRequest, TopologyAssignment

__all__ = [
    "PodSetPlacementRequest",
    "Candidate",
    "SolveRequest",
    "PodSetTopology",
    "HeldDomain",
    "SolveReply",
    "PlacementHeld",
    "PlacementReleased",
    "HoldRecord",
    "hold_subject",
    "HOLDS_FILTER",
    "solve_request_id",
]

FailureReason = Literal["", "NoFit", "UnknownLevel", "SliceSizeNotDivisor", "InvalidRequest", "UnknownFlavor",
                        "TopologyNotFound", "NoReplacement"]


class _Msg(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    pass


class PodSetPlacementRequest(_Msg, frozen=True, kw_only=True):
    name: str
    count: int
    flavor: str  # the TAS flavor the flavor assignment picked for this pod set
    requests: dict[str, int]  # one pod's requests in Kueue's integer view (milli-cpu, bytes, units)
    topology_request: PodSetTopologyRequest | None = None
    implied: bool = False  # no request, but every flavor of the queue is a TAS flavor (unconstrained)
    tolerations: tuple[Toleration, ...] = ()
    node_selector: dict[str, str] = {}


class Candidate(_Msg, frozen=True, kw_only=True):
    """A workload admission may preempt for this one, in the order it would evict them."""

    namespace: str
    name: str
    uid: str


class SolveRequest(_Msg, frozen=True, kw_only=True):
    id: str  # deterministic: the workload incarnation, its resourceVersion and the flavor choice
    cluster: str
    namespace: str
    name: str
    uid: str
    pod_sets: tuple[PodSetPlacementRequest, ...]
    candidates: tuple[Candidate, ...] = ()
    # The KQ_OBJECTS sequence of the newest Workload record of this cluster the asker had applied
    # (0: unknown). tas answers from a view at least that new, so a victim or a finished workload
    # admission already saw released is released in the solver too (bounded wait; see tas).
    as_of: int = 0
    # Node failure: the workload is admitted with a placement that uses this (failed) node; answer
    # with its pod sets' assignments where the pods on it are replaced (the others stay), or
    # NoReplacement.
    repair_node: str = ""


class PodSetTopology(_Msg, frozen=True, kw_only=True):
    name: str
    topology_assignment: TopologyAssignment


class SolveReply(_Msg, frozen=True, kw_only=True):
    request_id: str
    placed: bool
    pod_sets: tuple[PodSetTopology, ...] = ()
    victims: tuple[Candidate, ...] = ()  # placed only once these are gone (TAS preemption)
    reason: FailureReason = ""
    message: str = ""  # why it did not fit, naming the level / slice size


class HeldDomain(_Msg, frozen=True, kw_only=True):
    """`count` pods of one pod set, `requests` each, in the leaf domain `values` (every level, top first)."""

    pod_set: str
    values: tuple[str, ...]
    count: int
    requests: dict[str, int]


class PlacementHeld(_Msg, frozen=True, kw_only=True, tag="PlacementHeld", tag_field="type"):
    """Capacity handed out to a workload and not yet confirmed by its status (or released)."""

    request_id: str
    cluster: str
    namespace: str
    name: str
    uid: str
    at: float  # the tas service's clock when it answered (holds lapse `hold_ttl_s` later)
    flavor: str
    domains: tuple[HeldDomain, ...]
    # A node failure repaired: the whole workload's new placement, held over its status (which
    # still names the failed node) until the status shows the repair.
    repair_node: str = ""


class PlacementReleased(_Msg, frozen=True, kw_only=True, tag="PlacementReleased", tag_field="type"):
    request_id: str
    cluster: str
    namespace: str
    name: str
    uid: str


HoldRecord = PlacementHeld | PlacementReleased

HOLDS_FILTER = f"{subjects.PREFIX}.evt.*.topologyhold.>"

request_decoder = msgspec.json.Decoder(SolveRequest)
reply_decoder = msgspec.json.Decoder(SolveReply)
hold_decoder = msgspec.json.Decoder(HoldRecord)
encoder = msgspec.json.Encoder()


def hold_subject(cluster: str, namespace: str, name: str) -> str:
    """Last value per workload: its current hold (or its release)."""
    return subjects.event_subject(cluster, "topologyhold", namespace, name)


def solve_request_id(cluster: str, namespace: str, name: str, uid: str, resource_version: str,
                     choice: str) -> str:
    """Deterministic per (incarnation, version, flavor choice/counts/candidates)."""
    return f"tas.{cluster}.{namespace}.{name}.{uid}.{resource_version}.{choice}"
