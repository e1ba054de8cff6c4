"""Topology-aware scheduling in the admission cycle: the questions asked of the topology solver
and its answers (owner: PlacementBook), and what a cycle makes of them.

Two-phase and pure: a head whose flavor assignment fits and needs a placement (a pod set with a
topologyRequest, or every flavor of its ClusterQueue a TAS flavor: implied unconstrained) is not
admitted in that cycle; the cycle emits a PlacementRequest (with the workloads it may preempt,
in Kueue's candidate order) and parks the head. The shell asks the tas service and applies the
answer as a PlacementAnswer event, which brings the head back; the next cycle admits it with
the answer's topology assignments, preempts the answer's victims, or leaves it pending with the
answer's message (naming the level or the slice size).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet

import msgspec

from .decisions import AdmissionDecision, PlacementRequest, PodSetAsk, TopologyRepair
from .model import PlacementAnswer, PodSet, ResourceFlavor
from .preemption import candidate_order, satisfies_policy
from .runtime import ClusterQueueRuntime
from .workloads import PendingInfo, ReservedInfo

ANSWER_TTL_S = 10.0  # well within the solver's hold (30 s by default)


class PlacementBook:
    """One outstanding question per workload, and its answer once it came."""

    def __init__(self) -> None:
        self.asked: dict[str, PlacementRequest] = {}
        self.answers: dict[str, PlacementAnswer] = {}
        self._attempts: dict[str, int] = {}
        self._out: list[PlacementRequest] = []
        self.provisional: dict[str, AdmissionDecision] = {}  # assumed while the solver answers
        self._ready: list[AdmissionDecision] = []  # placed: to publish with the next cycle
        self._repairs: list[TopologyRepair] = []  # node failures repaired: to publish with the next cycle

    def current(self, key: str, fingerprint: str) -> PlacementRequest | None:
        req = self.asked.get(key)
        return req if req is not None and req.fingerprint == fingerprint else None

    def answer_to(self, req: PlacementRequest) -> PlacementAnswer | None:
        a = self.answers.get(req.workload)
        return a if a is not None and a.request_id == req.id else None

    def stale(self, key: str, now: float) -> bool:
        """An answer kept too long: the solver's hold on it may have lapsed, ask again."""
        a = self.answers.get(key)
        return a is not None and a.placed and now - a.at > ANSWER_TTL_S

    def ask(self, req_without_id: PlacementRequest) -> PlacementRequest:
        n = self._attempts.get(req_without_id.workload, 0) + 1
        self._attempts[req_without_id.workload] = n
        req = msgspec.structs.replace(req_without_id, id=f"tas.{req_without_id.uid}.{n}")
        self.asked[req.workload] = req
        self.answers.pop(req.workload, None)
        self._out.append(req)
        return req

    def accept(self, a: PlacementAnswer) -> bool:
        req = self.asked.get(a.workload)
        if req is None or req.id != a.request_id:
            return False  # an answer to a question no longer asked
        self.answers[a.workload] = a
        return True

    def consume(self, key: str) -> None:
        self.asked.pop(key, None)
        self.answers.pop(key, None)

    def forget(self, key: str) -> None:
        self.consume(key)
        self._attempts.pop(key, None)
        self.provisional.pop(key, None)

    def complete(self, d: AdmissionDecision) -> None:
        self._ready.append(d)

    def take_ready(self) -> list[AdmissionDecision]:
        out, self._ready = self._ready, []
        return out

    def repaired(self, r: TopologyRepair) -> None:
        self._repairs.append(r)

    def take_repairs(self) -> list[TopologyRepair]:
        out, self._repairs = self._repairs, []
        return out

    def take(self) -> list[PlacementRequest]:
        out, self._out = self._out, []
        return out

    def has_output(self) -> bool:
        return bool(self._out or self._ready or self._repairs)


def _kueue_amounts(requests: dict[str, int]) -> dict[str, int]:
    """Milli-units -> Kueue's integer view: milli-cpu, whole units for everything else."""
    return {r: (v if r == "cpu" else v // 1000) for r, v in requests.items() if v > 0}


def _requested(ps: PodSet) -> bool:
    r = ps.topology_request
    return r is not None and bool(r.required or r.preferred or r.unconstrained or r.pod_set_slice_required_topology)


def is_tas_only(cq: ClusterQueueRuntime, flavors: Mapping[str, ResourceFlavor]) -> bool:
    """Every flavor of the queue names a Topology: pod sets without a request are implied unconstrained."""
    return bool(cq.flavor_names) and all(
        (f := flavors.get(n)) is not None and f.topology_name for n in cq.flavor_names)


def tas_mismatch(ps: PodSet, flavor: ResourceFlavor, cq: ClusterQueueRuntime, flavors: Mapping[str, ResourceFlavor],
                 covered: AbstractSet[str]) -> str | None:
    """Why this flavor cannot serve this pod set's topology request (Kueue
    checkPodSetAndFlavorMatchForTAS), so the flavor assigner tries the next flavor; None: it can.
    A pod set asking for a topology skips flavors without one (unless they only provide
    resources it does not request); a pod set asking for none skips TAS flavors, unless every
    flavor of the queue is one (implied unconstrained)."""
    if _requested(ps):
        if flavor.topology_name is None:
            if not any(ps.requests.get(r, 0) > 0 for r in covered):
                return None
            return f"Flavor \"{flavor.name}\" does not support TopologyAwareScheduling"
        return None
    if flavor.topology_name is not None and not is_tas_only(cq, flavors):
        return f"Flavor \"{flavor.name}\" supports only TopologyAwareScheduling"
    return None


def pod_set_asks(pod_sets: list[tuple[PodSet, int, set[str]]], cq: ClusterQueueRuntime,
                 flavors: dict[str, ResourceFlavor]) -> list[PodSetAsk] | str:
    """What to ask for each pod set that needs a placement ([] when none does), or why it cannot
    be placed at all. `pod_sets`: (spec, admitted count, flavors assigned to it)."""
    all_tas = is_tas_only(cq, flavors)
    asks: list[PodSetAsk] = []
    for spec, count, assigned in pod_sets:
        tas = sorted(n for n in assigned if (f := flavors.get(n)) is not None and f.topology_name)
        requested = _requested(spec)
        if requested and not tas:
            names = ", ".join(sorted(assigned))
            return (
                f"couldn't assign flavors to pod set {spec.name}: "
                f"flavor {names} does not support TopologyAwareScheduling"
            )
        if not tas or not (requested or all_tas):
            continue
        asks.append(PodSetAsk(
            name=spec.name, count=count, flavor=tas[0], requests=_kueue_amounts(spec.requests),
            topology_request=spec.topology_request if requested else None, implied=not requested,
            tolerations=spec.tolerations, node_selector=spec.node_selector,
        ))
    return asks


def fingerprint(asks: list[PodSetAsk]) -> str:
    return "|".join(f"{a.name}:{a.count}:{a.flavor}" for a in asks)


def candidates(info: PendingInfo, cq: ClusterQueueRuntime, reserved: list[ReservedInfo],
               cqs: Mapping[str, ClusterQueueRuntime]) -> tuple[str, ...]:
    """Workloads the solver may pick victims from, in Kueue's candidate order: this queue's under
    withinClusterQueue, the cohort's under reclaimWithinCohort. Evicted workloads still holding
    quota come first, as in Kueue: they are on their way out (picking one issues nothing new), and
    the solver still counts their placement, so leaving them out made it find no victim, or evict
    others beside them."""
    policy = cq.spec.preemption
    root = cq.node.root()
    out: list[ReservedInfo] = []
    for c in reserved:
        if c.key == info.key:
            continue
        if c.cq == cq.name:
            if policy.within_cluster_queue != "Never" and satisfies_policy(info, c, policy.within_cluster_queue):
                out.append(c)
        elif policy.reclaim_within_cohort != "Never" and cq.spec.cohort is not None:
            other = cqs.get(c.cq)
            if (
                other is not None
                and other.node.root() is root
                and satisfies_policy(info, c, policy.reclaim_within_cohort)
            ):
                out.append(c)
    out.sort(key=candidate_order(cq.name))
    return tuple(c.key for c in out)
