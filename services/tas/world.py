"""One cluster as the solver sees it: mirror records and hold records in, core inputs out.

The shell side of services/tas: decodes Topologies, ResourceFlavors, Nodes, Pods and Workloads
into the core's plain inputs and keeps the held capacity the core must respect:
- confirmed: a Workload whose status.admission carries a topologyAssignment and that still
  holds its quota (not finished, not evicted back to pending);
- handed out: a PlacementHeld record (our own answer, published before replying) that no
  Workload status has confirmed yet, that was not superseded by a newer answer for the same
  workload, and that is younger than hold_ttl_s.
Both are rebuilt from the log on start, so a replaced replica respects the same holds.
"""

from __future__ import annotations

from typing import Any

from kq.api.constants import WORKLOAD_ANNOTATION
from kq.api.core import Node, Pod
from kq.api.kueue import ResourceFlavor, Workload
from kq.api.meta import find_condition
from kq.api.registry import decode_object
from kq.api.topology import topology_domains
from kq.mirror import ObjectRecord
from kq.placement import (
    Candidate,
    HeldDomain,
    HoldRecord,
    PlacementHeld,
    PlacementReleased,
    PodSetTopology,
    SolveReply,
    SolveRequest,
)
from kq.quantity import resource_amount
from services.tas.core import HOSTNAME_LABEL, HeldPodSet, Placement, PlacementFailure, PodSetPlacement, TasSolver
from services.tas.core.replacement import rehold_pod_set, replace_node
from services.tas.solving import failed_reply, flavor_spec, held_domains, node_info, placed_reply, pod_set_request

NEEDED_KINDS: tuple[str, ...] = ("node", "pod", "resourceflavor", "topology", "workload")
# Workloads and Pods are followed only once some ResourceFlavor names a Topology (service.py):
# without a topology-aware flavor nothing is placed, so neither what Workloads hold nor what Pods
# use on their nodes matters. Reading every Workload record of a large cluster for nothing was most
# of this service's CPU; Pods are ~6 records a job (created, bound, running, ready, done, deleted),
# in every cluster a kq serves (21 in the MultiKueue bench).
LATE_KINDS: tuple[str, ...] = ("pod", "workload")
BASE_KINDS: tuple[str, ...] = tuple(k for k in NEEDED_KINDS if k not in LATE_KINDS)
_TOPOLOGY_ASSIGNMENT = b'"topologyAssignment"'  # Workload status.admission.podSetAssignments[].topologyAssignment


def pod_requests(pod: Pod) -> dict[str, int]:
    """Effective requests of a pod in Kueue's integer view (containers summed, init max)."""
    total: dict[str, int] = {}
    for c in pod.spec.containers:
        for r, q in {**c.resources.limits, **c.resources.requests}.items():
            total[r] = total.get(r, 0) + resource_amount(r, q)
    for c in pod.spec.init_containers:
        for r, q in {**c.resources.limits, **c.resources.requests}.items():
            total[r] = max(total.get(r, 0), resource_amount(r, q))
    return total


def _holds_quota(wl: Workload) -> bool:
    st = wl.status
    if st.admission is None:
        return False
    fin = find_condition(st.conditions, "Finished")
    if fin is not None and fin.status == "True":
        return False
    qr = find_condition(st.conditions, "QuotaReserved")
    return qr is None or qr.status == "True"


class _Confirmed:
    __slots__ = ("uid", "flavor", "pod_sets")

    def __init__(self, uid: str, flavor: str, pod_sets: list[tuple[str, Any, dict[str, int]]]) -> None:
        self.uid = uid
        self.flavor = flavor
        self.pod_sets = pod_sets  # (pod set, TopologyAssignment, one pod's requests)

    def uses(self, node: str) -> bool:
        return any(d.values[-1] == node for _, ta, _ in self.pod_sets for d in topology_domains(ta))

    def same(self, other: _Confirmed | None) -> bool:
        return other is not None and (self.uid, self.flavor, self.pod_sets) == (other.uid, other.flavor, other.pod_sets)


class World:
    def __init__(self, cluster: str, *, hold_ttl_s: float) -> None:
        self.cluster = cluster
        self.hold_ttl_s = hold_ttl_s
        self.synced: set[str] = set()
        self.solver = TasSolver()
        self.topologies: dict[str, tuple[str, ...]] = {}
        self.flavors: dict[str, ResourceFlavor] = {}
        self.node_labels: dict[str, dict[str, str]] = {}
        self.by_hostname: dict[str, dict[str, str]] = {}  # kubernetes.io/hostname value -> node labels
        self.confirmed: dict[str, _Confirmed] = {}  # "ns/name" -> what its status holds
        self.handed_out: dict[str, PlacementHeld] = {}  # "ns/name" -> our unconfirmed answer
        self.solves = 0
        self.workload_seq = 0  # KQ_OBJECTS sequence of the newest Workload record applied

    # --- sync ---------------------------------------------------------------------------------------

    def apply_marker(self, kind: str) -> None:
        if kind in NEEDED_KINDS:
            self.synced.add(kind)

    def missing_kinds(self, kinds: tuple[str, ...] = NEEDED_KINDS) -> list[str]:
        return [k for k in kinds if k not in self.synced]

    def wants_workloads(self) -> bool:
        """Some flavor names a Topology: Workloads may hold placements (its Topology may come later)."""
        return any(f.spec.topology_name for f in self.flavors.values())

    # --- mirror -------------------------------------------------------------------------------------

    def apply_record(self, rec: ObjectRecord, seq: int = 0) -> None:
        """Fold one mirror record in; `seq`: its KQ_OBJECTS stream sequence."""
        if rec.kind not in NEEDED_KINDS:
            return
        if rec.kind == "workload":
            self.workload_seq = max(self.workload_seq, seq)
            if not self._may_hold(rec):
                return
        obj: Any = None if rec.deleted else decode_object(rec.kind, rec.raw)
        if rec.kind == "node":
            self._node(rec.name, obj)
        elif rec.kind == "pod":
            self._pod(rec.namespace, rec.name, obj)
        elif rec.kind == "resourceflavor":
            if obj is None:
                self.flavors.pop(rec.name, None)
            else:
                self.flavors[rec.name] = obj
            self._sync_flavors()
        elif rec.kind == "topology":
            if obj is None:
                self.topologies.pop(rec.name, None)
            else:
                self.topologies[rec.name] = tuple(lv.node_label for lv in obj.spec.levels)
            self._sync_flavors()
        elif rec.kind == "workload":
            self._workload(f"{rec.namespace}/{rec.name}", obj)

    def _may_hold(self, rec: ObjectRecord) -> bool:
        """Whether a Workload record can change what the solver holds, without decoding it: only one
        whose admission carries a topology assignment (a byte search: Kubernetes JSON names fields
        plainly), or one the world already holds something for (confirmed, or our answer: so a
        workload that stops holding, or is deleted, is released). Every other Workload, the bulk where
        no flavor is topology-aware, would decode only to change nothing."""
        key = f"{rec.namespace}/{rec.name}"
        return key in self.confirmed or key in self.handed_out or (
            not rec.deleted and _TOPOLOGY_ASSIGNMENT in rec.raw)

    def _sync_flavors(self) -> None:
        """Each TAS flavor whose Topology exists has a capacity tree; the others have none."""
        self._release_holds()
        wanted = {}
        for name, f in self.flavors.items():
            levels = self.topologies.get(f.spec.topology_name or "")
            if f.spec.topology_name and levels:
                wanted[name] = flavor_spec(f, levels)
        for name in list(self.solver.trees):
            if name not in wanted:
                self.solver.remove_flavor(name)
        for name in sorted(wanted):
            self.solver.set_flavor(wanted[name])
        self._reapply_holds()

    def _node(self, name: str, node: Node | None) -> None:
        old = self.node_labels.pop(name, None)
        if old is not None and HOSTNAME_LABEL in old:
            self.by_hostname.pop(old[HOSTNAME_LABEL], None)
        if node is None:
            self.solver.remove_node(name)
            return
        known = old is not None
        if not known:
            self._release_holds()  # a new leaf: holds naming it are applied again below, exactly once
        self.node_labels[name] = labels = dict(node.metadata.labels)
        if HOSTNAME_LABEL in labels:
            self.by_hostname[labels[HOSTNAME_LABEL]] = labels
        self.solver.upsert_node(node_info(node))
        if not known:
            self._reapply_holds()

    def _pod(self, ns: str, name: str, pod: Pod | None) -> None:
        """Every bound, running pod takes capacity from its node; a TAS pod only while its
        workload holds no placement (the hold already counts it)."""
        key = f"{ns}/{name}"
        if pod is None or not pod.spec.node_name or pod.status.phase in ("Succeeded", "Failed"):
            self.solver.pod_gone(key)
            return
        wl = pod.metadata.annotations.get(WORKLOAD_ANNOTATION)
        self.solver.pod_bound(key, pod.spec.node_name, pod_requests(pod), f"{ns}/{wl}" if wl else None)

    def _workload(self, key: str, wl: Workload | None) -> None:
        if wl is None:
            self.confirmed.pop(key, None)
            self.handed_out.pop(key, None)
            self._apply(key)
            return
        new = self._confirmed_of(wl) if _holds_quota(wl) else None
        old = self.confirmed.get(key)
        if new is None and old is None:
            held = self.handed_out.get(key)
            if held is not None and held.uid != wl.metadata.uid:
                del self.handed_out[key]
                self._apply(key)
            return
        if new is not None and new.same(old):
            return
        if new is None:
            del self.confirmed[key]
        else:
            self.confirmed[key] = new
            held = self.handed_out.get(key)
            if held is None or not (held.repair_node and new.uses(held.repair_node)):
                self.handed_out.pop(key, None)  # confirmed: the answer is spent (a repair once it shows)
        self._apply(key)

    def _confirmed_of(self, wl: Workload) -> _Confirmed | None:
        admission = wl.status.admission
        assert admission is not None
        specs = {ps.name: ps for ps in wl.spec.pod_sets}
        flavor = ""
        pod_sets: list[tuple[str, Any, dict[str, int]]] = []
        for psa in admission.pod_set_assignments:
            ta = psa.topology_assignment
            spec = specs.get(psa.name)
            if ta is None or spec is None:
                continue
            flavor = flavor or next((f for f in sorted(set(psa.flavors.values())) if f in self.flavors), "")
            pod_sets.append((psa.name, ta, pod_requests(Pod(spec=spec.template.spec))))
        return _Confirmed(wl.metadata.uid, flavor, pod_sets) if pod_sets else None

    # --- holds --------------------------------------------------------------------------------------

    def _levels_of(self, flavor: str) -> tuple[str, ...]:
        f = self.flavors.get(flavor)
        return self.topologies.get(f.spec.topology_name or "", ()) if f is not None else ()

    def _leaf_values(self, flavor: str, levels: tuple[str, ...], values: tuple[str, ...]) -> tuple[str, ...] | None:
        """Every level's value of a domain; Kueue writes only the hostname when it is the lowest level."""
        full = self._levels_of(flavor)
        if tuple(levels) == full:
            return values
        if tuple(levels) == (HOSTNAME_LABEL,) and full and full[-1] == HOSTNAME_LABEL:
            labels = self.by_hostname.get(values[0])
            if labels is not None:
                return tuple(labels.get(lv, "") for lv in full)
        return None

    def _apply(self, key: str) -> None:
        """The solver holds, for this workload, what its status confirms, else our answer, else nothing."""
        c = self.confirmed.get(key)
        h = self.handed_out.get(key)
        if c is not None and (h is None or not h.repair_node):
            held: list[HeldPodSet] = []
            for name, ta, requests in c.pod_sets:
                for d in topology_domains(ta):
                    values = self._leaf_values(c.flavor, tuple(ta.levels), tuple(d.values))
                    if values is not None:
                        held.append(HeldPodSet(pod_set=name, values=values, count=d.count, requests=requests))
            self.solver.assume(key, c.flavor, tuple(held))
            self.solver.confirm(key)
            return
        if h is not None:
            self.solver.assume(key, h.flavor, tuple(
                HeldPodSet(pod_set=d.pod_set, values=tuple(d.values), count=d.count, requests=dict(d.requests))
                for d in h.domains))
            if c is not None:
                self.solver.confirm(key)
            return
        self.solver.release(key)

    def _release_holds(self) -> None:
        """Take every hold out while the tree's shape changes (a hold counts only the leaves that
        existed when it was applied, so it must come out under the same shape)."""
        for key in sorted(set(self.confirmed) | set(self.handed_out)):
            self.solver.release(key)

    def _reapply_holds(self) -> None:
        for key in sorted(set(self.confirmed) | set(self.handed_out)):
            self._apply(key)

    def apply_hold(self, rec: HoldRecord, now: float | None = None) -> None:
        key = f"{rec.namespace}/{rec.name}"
        current = self.handed_out.get(key)
        if isinstance(rec, PlacementReleased):
            if current is not None and current.request_id == rec.request_id:
                del self.handed_out[key]
                self._apply(key)
            return
        if current is not None and current.request_id == rec.request_id:
            return  # our own record coming back
        c = self.confirmed.get(key)
        if c is not None and c.uid == rec.uid and not (rec.repair_node and c.uses(rec.repair_node)):
            return  # already confirmed by the status
        if now is not None and rec.at + self.hold_ttl_s < now:
            return
        self.handed_out[key] = rec
        self._apply(key)

    def expire(self, now: float) -> None:
        for key in [k for k, h in self.handed_out.items() if h.at + self.hold_ttl_s < now]:
            del self.handed_out[key]
            self._apply(key)

    # --- solving ------------------------------------------------------------------------------------

    def behind(self, req: SolveRequest) -> bool:
        """Has the asker seen Workload records this world has not applied yet? Then its candidates
        (and its own state) may disagree with our holds: a victim whose eviction admission saw but
        we did not would still hold its capacity here, so the answer would name no victim, or
        others than needed, and a requeued victim would be re-placed on its own old hold."""
        return req.as_of > self.workload_seq

    def solve(self, req: SolveRequest, now: float) -> tuple[SolveReply, PlacementHeld | None]:
        self.expire(now)
        self.solves += 1
        key = f"{req.namespace}/{req.name}"
        if key in self.handed_out:  # a new question for the same workload replaces the old answer
            del self.handed_out[key]
            self._apply(key)
        if req.repair_node:
            return self._repair(req, key, now)
        flavors = sorted({ps.flavor for ps in req.pod_sets})
        if len(flavors) != 1:
            return SolveReply(request_id=req.id, placed=False, reason="InvalidRequest",
                              message=f"pod sets on several topology-aware flavors: {', '.join(flavors)}"), None
        flavor = flavors[0]
        f = self.flavors.get(flavor)
        if f is None or not f.spec.topology_name or self._levels_of(flavor) == ():
            missing = f.spec.topology_name if f is not None else None
            why = f"Topology {missing!r} not found" if missing else f"no topology-aware flavor {flavor!r}"
            return SolveReply(request_id=req.id, placed=False,
                              reason="TopologyNotFound" if missing else "UnknownFlavor", message=why), None
        pod_sets = [pod_set_request(ps) for ps in req.pod_sets]
        own = key in self.solver.holds  # re-placing an admitted workload: its own capacity is free
        outcome = self.solver.place(flavor, pod_sets, without=[key] if own else [])
        victims: tuple[Candidate, ...] = ()
        if isinstance(outcome, PlacementFailure) and outcome.kind == "NoFit" and req.candidates:
            by_key = {f"{c.namespace}/{c.name}": c for c in req.candidates}
            found = self.solver.minimal_victims(flavor, pod_sets, list(by_key))
            if found:
                victims = tuple(by_key[k] for k in found)
                outcome = self.solver.place(flavor, pod_sets, without=list(found))
        if isinstance(outcome, PlacementFailure):
            return failed_reply(req.id, outcome), None
        assert isinstance(outcome, Placement)
        reply = placed_reply(req.id, [outcome], victims)
        # Placed only once the victims are gone: held all the same (over the victims' own holds
        # until they are released), so a victim requeued and asking again, or any lower-priority
        # workload, cannot take the capacity the preemption frees before the preemptor asks again
        # (Kueue reserves it in the cycle for the same reason, updateAssignmentForTAS).
        held = PlacementHeld(request_id=req.id, cluster=req.cluster, namespace=req.namespace, name=req.name,
                             uid=req.uid, at=now, flavor=flavor, domains=held_domains(outcome, pod_sets))
        self.handed_out[key] = held
        self._apply(key)
        return reply, held

    def _repair(self, req: SolveRequest, key: str, now: float) -> tuple[SolveReply, PlacementHeld | None]:
        """Node failure: the pods of each asked pod set that were on the failed node are placed
        again within the request's constraints (services/tas/core/replacement.py); the others stay."""
        placements: list[PodSetPlacement] = []
        for ps in req.pod_sets:
            request = pod_set_request(ps)
            found = replace_node(self.solver, key, request, req.repair_node)
            if isinstance(found, PlacementFailure):
                self._apply(key)  # back to what the status (or our last answer) holds
                return failed_reply(req.id, found), None
            placement, _ = found
            rehold_pod_set(self.solver, key, placement, request.requests)
            placements.append(placement)
        record = self.solver.holds[key]
        held = PlacementHeld(request_id=req.id, cluster=req.cluster, namespace=req.namespace, name=req.name,
                             uid=req.uid, at=now, flavor=record.flavor, repair_node=req.repair_node,
                             domains=tuple(HeldDomain(pod_set=h.pod_set, values=tuple(h.values), count=h.count,
                                                      requests=dict(h.requests)) for h in record.pod_sets))
        self.handed_out[key] = held
        self._apply(key)
        reply = SolveReply(request_id=req.id, placed=True, pod_sets=tuple(
            PodSetTopology(name=p.pod_set, topology_assignment=p.assignment) for p in placements))
        return reply, held
