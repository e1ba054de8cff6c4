"""The topology-aware scheduling core: capacity trees, held capacity, Kueue's placement. Pure."""

from services.tas.core.model import (
    HOSTNAME_LABEL,
    FlavorSpec,
    HeldPodSet,
    NodeInfo,
    Placement,
    PlacementFailure,
    PodSetPlacement,
    PodSetRequest,
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
    "TaintSpec",
    "TasSolver",
    "TolerationSpec",
    "TopologySpecIn",
]
