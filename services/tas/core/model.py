"""The solver's inputs and outcomes: plain values, no behaviour beyond small helpers.

Quantities are Kueue's integer view (kq.quantity.resource_amount): milli-CPU for
cpu, whole units for everything else; every pod also asks for one `pods`.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from kq.api.topology import TopologyDomain
from kq.api.workload import TopologyAssignment

__all__ = [
    "HOSTNAME_LABEL",
    "Amounts",
    "TaintSpec",
    "TolerationSpec",
    "NodeInfo",
    "TopologySpecIn",
    "FlavorSpec",
    "RequestMode",
    "PodSetRequest",
    "PodSetPlacement",
    "Placement",
    "FailureKind",
    "PlacementFailure",
    "HeldPodSet",
]

HOSTNAME_LABEL = "kubernetes.io/hostname"

Amounts = dict[str, int]


class TaintSpec(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class TolerationSpec(msgspec.Struct, frozen=True, kw_only=True):
    key: str = ""
    operator: Literal["Exists", "Equal", ""] = ""
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] = ""

    def tolerates(self, taint: TaintSpec) -> bool:
        """Kubernetes' rule (k8s.io/api/core/v1 Toleration.ToleratesTaint)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if not self.key:  # an empty key only makes sense with Exists
            return False
        return self.value == taint.value


class NodeInfo(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    labels: dict[str, str]
    allocatable: Amounts
    taints: tuple[TaintSpec, ...] = ()
    ready: bool = True
    unschedulable: bool = False


class TopologySpecIn(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    levels: tuple[str, ...]  # node label keys, top level first


class FlavorSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    topology: TopologySpecIn
    node_labels: dict[str, str] = {}
    tolerations: tuple[TolerationSpec, ...] = ()


RequestMode = Literal["required", "preferred", "unconstrained", "implied", "slices-only"]


class PodSetRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One pod set's TAS request (from podSets[].topologyRequest and the pod template).

    mode "implied" is Kueue's implicit unconstrained request of a workload without
    annotations in a queue whose flavors are all TAS flavors.
    """

    name: str
    count: int
    requests: Amounts  # one pod's requests, without `pods`
    mode: RequestMode
    level: str | None = None  # required / preferred level
    slice_level: str | None = None
    slice_size: int | None = None
    group: str | None = None  # podset-group-name (leader + workers)
    tolerations: tuple[TolerationSpec, ...] = ()
    node_selector: dict[str, str] = {}


class PodSetPlacement(msgspec.Struct, frozen=True, kw_only=True):
    pod_set: str
    levels: tuple[str, ...]  # every level of the Topology, top first
    domains: tuple[TopologyDomain, ...]  # values per level, sorted, counts > 0
    assignment: TopologyAssignment  # Kueue's compact form (hostname only when it is the lowest level)


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    flavor: str
    pod_sets: tuple[PodSetPlacement, ...]

    def for_pod_set(self, name: str) -> PodSetPlacement | None:
        return next((p for p in self.pod_sets if p.pod_set == name), None)


FailureKind = Literal[
    "NoFit",  # not enough free capacity in the shape asked for
    "UnknownLevel",  # the request names a level the Topology does not have
    "SliceSizeNotDivisor",  # podset-slice-size does not divide the pod count
    "InvalidRequest",  # inconsistent request (slice level above the pod set level, bad group)
    "UnknownFlavor",  # no TAS flavor of that name known to the solver
    "NoReplacement",  # node failure: no replacement node in the same domain
]


class PlacementFailure(msgspec.Struct, frozen=True, kw_only=True):
    flavor: str
    pod_set: str
    kind: FailureKind
    message: str  # user-facing (what `kq describe` shows for a pending workload)
    level: str | None = None


class HeldPodSet(msgspec.Struct, frozen=True, kw_only=True):
    """What a placement holds in one leaf domain: `count` pods of `requests` each."""

    pod_set: str
    values: tuple[str, ...]
    count: int
    requests: Amounts
