"""The seam between the shell's world and the pure core (services/tas/core).

Turns kq.api objects and solve requests into the core's plain inputs, and the core's
outcomes (Placement / PlacementFailure) into the bus reply and the hold record.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kq.placement import HeldPodSet, SolveReply, SolveRequest

HoldKey = tuple[str, ...]


class SolveResult(NamedTuple):
    placed: bool
    held: tuple[HeldPodSet, ...] = ()
    victims: tuple[tuple[str, str, str], ...] = ()  # (namespace, name, uid)
    reason: str = ""
    message: str = ""
    pod_sets: tuple[Any, ...] = ()

    def reply(self, request_id: str) -> SolveReply:
        from kq.placement import Candidate, PodSetTopology

        return SolveReply(
            request_id=request_id,
            placed=self.placed,
            pod_sets=tuple(PodSetTopology(name=h.name, topology_assignment=h.topology_assignment) for h in self.held),
            victims=tuple(Candidate(namespace=ns, name=n, uid=u) for ns, n, u in self.victims),
            reason=self.reason,  # type: ignore[arg-type]
            message=self.message,
        )


class Solver:
    """Placeholder until the core's state facade lands: knows nothing, places nothing."""

    def set_node(self, name: str, node: Any) -> None:
        pass

    def set_pod_usage(self, key: tuple[str, str], node: str | None, requests: dict[str, int]) -> None:
        pass

    def set_flavor(self, name: str, flavor: Any) -> None:
        pass

    def set_topology(self, name: str, topology: Any) -> None:
        pass

    def hold(self, key: HoldKey, pod_sets: tuple[HeldPodSet, ...]) -> None:
        pass

    def release(self, key: HoldKey) -> None:
        pass

    def solve(self, req: SolveRequest, victims: tuple[tuple[str, str], ...], victim_holds: list[HoldKey]) -> SolveResult:
        return SolveResult(placed=False, reason="InvalidRequest", message="topology solver core not available")
