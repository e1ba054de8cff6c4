"""The topology-aware scheduling core: capacity trees, held capacity, Kueue's placement. Pure.

Public interface (everything else is internal):

- `TasSolver` - owns all state. Inputs: `set_flavor(FlavorSpec)`, `remove_flavor`,
  `upsert_node(NodeInfo)`, `remove_node`, `pod_bound(key, node, requests, workload)`,
  `pod_gone(key)`. Decisions: `place(flavor, [PodSetRequest])` (what-if, holds
  nothing) -> `Placement | PlacementFailure`; `place_and_assume(workload, flavor, ...)`
  holds what it hands out; `assume / confirm / release(workload)`;
  `minimal_victims(flavor, pod_sets, candidates)` (TAS-aware preemption);
  `replacement.replace_node(solver, workload, pod_set, node)` (node failure) and
  `replacement.rehold_pod_set` to hold the repaired placement.
- `events`: the same inputs as values (`TasEvent`), `apply(solver, event)` and
  `snapshot(solver)` so a replica rebuilds identical state from the log.
- `ungate.pods_to_ungate`: which gated pods go to which domain (rank by index
  label, else greedy) and the node selector to add when the gate is removed.
- `from_api`: Kueue/Kubernetes objects (Node, ResourceFlavor + Topology, PodSet)
  to the inputs above.

Quantities are Kueue's integer view: milli-CPU for cpu, whole units otherwise.
"""

from services.tas.core.model import (
    HOSTNAME_LABEL,
    FlavorSpec,
    HeldPodSet,
    NodeInfo,
    Placement,
    PlacementFailure,
    PodSetPlacement,
    PodSetRequest,
    RequestMode,
    TaintSpec,
    TolerationSpec,
    TopologySpecIn,
)
from services.tas.core.solver import TasSolver

__all__ = [
    "HOSTNAME_LABEL",
    "FlavorSpec",
    "HeldPodSet",
    "NodeInfo",
    "Placement",
    "PlacementFailure",
    "PodSetPlacement",
    "PodSetRequest",
    "RequestMode",
    "TaintSpec",
    "TasSolver",
    "TolerationSpec",
    "TopologySpecIn",
]
