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
from kq.api.kueue import ResourceFlavor, Topology, Workload
from kq.api.meta import find_condition
from kq.api.registry import decode_object
from kq.mirror import ObjectRecord
from kq.placement import (
    HeldPodSet,
    HoldRecord,
    PlacementHeld,
    PlacementReleased,
    SolveReply,
    SolveRequest,
)
from kq.quantity import resource_amount
from services.tas.solving import Solver

NEEDED_KINDS: tuple[str, ...] = ("node", "pod", "resourceflavor", "topology", "workload")

WlKey = tuple[str, str]


def pod_requests(pod: Pod) -> dict[str, int]:
    """Effective requests of a pod in Kueue's integer view (containers summed, init max, overhead)."""
    total: dict[str, int] = {}
    spec = pod.spec
    for c in spec.containers:
        for r, q in {**c.resources.limits, **c.resources.requests}.items():
            total[r] = total.get(r, 0) + resource_amount(r, q)
    for c in spec.init_containers:
        for r, q in {**c.resources.limits, **c.resources.requests}.items():
            total[r] = max(total.get(r, 0), resource_amount(r, q))
    for r, q in (getattr(spec, "overhead", None) or {}).items():
        total[r] = total.get(r, 0) + resource_amount(r, q)
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


class World:
    def __init__(self, cluster: str, *, hold_ttl_s: float) -> None:
        self.cluster = cluster
        self.hold_ttl_s = hold_ttl_s
        self.synced: set[str] = set()
        self.solver = Solver()
        self.workload_uids: dict[WlKey, str] = {}
        self.confirmed: dict[WlKey, tuple[str, tuple[HeldPodSet, ...]]] = {}  # key -> (uid, pod sets)
        self.handed_out: dict[WlKey, PlacementHeld] = {}

    # --- sync ---------------------------------------------------------------------------------------

    def apply_marker(self, kind: str) -> None:
        if kind in NEEDED_KINDS:
            self.synced.add(kind)

    def missing_kinds(self) -> list[str]:
        return [k for k in NEEDED_KINDS if k not in self.synced]

    # --- mirror -------------------------------------------------------------------------------------

    def apply_record(self, rec: ObjectRecord) -> None:
        if rec.kind not in NEEDED_KINDS:
            return
        obj: Any = None if rec.deleted else decode_object(rec.kind, rec.raw)
        if rec.kind == "node":
            self.solver.set_node(rec.name, obj)
        elif rec.kind == "pod":
            self._pod(rec.namespace, rec.name, obj)
        elif rec.kind == "resourceflavor":
            self.solver.set_flavor(rec.name, obj)
        elif rec.kind == "topology":
            self.solver.set_topology(rec.name, obj)
        elif rec.kind == "workload":
            self._workload(rec.namespace, rec.name, obj)

    def _pod(self, ns: str, name: str, pod: Pod | None) -> None:
        """Pods kq placed through a topology assignment are counted by their workload's hold;
        every other bound, running pod takes capacity from its node."""
        counts = (
            pod is not None
            and bool(pod.spec.node_name)
            and pod.status.phase not in ("Succeeded", "Failed")
            and WORKLOAD_ANNOTATION not in pod.metadata.annotations
        )
        if counts:
            assert pod is not None
            self.solver.set_pod_usage((ns, name), pod.spec.node_name, pod_requests(pod))
        else:
            self.solver.set_pod_usage((ns, name), None, {})

    def _workload(self, ns: str, name: str, wl: Workload | None) -> None:
        key = (ns, name)
        if wl is None:
            self.workload_uids.pop(key, None)
            self._set_confirmed(key, None)
            self._drop_handed_out(key)
            return
        uid = wl.metadata.uid
        self.workload_uids[key] = uid
        held = self._confirmed_pod_sets(wl) if _holds_quota(wl) else ()
        self._set_confirmed(key, (uid, held) if held else None)
        if held or self.handed_out.get(key, None) is not None and self.handed_out[key].uid != uid:
            self._drop_handed_out(key)  # confirmed (or a new incarnation): the answer is spent

    def _confirmed_pod_sets(self, wl: Workload) -> tuple[HeldPodSet, ...]:
        admission = wl.status.admission
        assert admission is not None
        specs = {ps.name: ps for ps in wl.spec.pod_sets}
        out: list[HeldPodSet] = []
        for psa in admission.pod_set_assignments:
            ta = psa.topology_assignment
            spec = specs.get(psa.name)
            if ta is None or spec is None:
                continue
            flavor = next(iter(sorted(set(psa.flavors.values()))), "")
            requests = pod_requests(Pod(spec=spec.template.spec))
            out.append(HeldPodSet(name=psa.name, flavor=flavor, requests=requests, topology_assignment=ta))
        return tuple(out)

    def _set_confirmed(self, key: WlKey, value: tuple[str, tuple[HeldPodSet, ...]] | None) -> None:
        old = self.confirmed.get(key)
        if old == value:
            return
        if old is not None:
            self.solver.release(("confirmed",) + key)
            del self.confirmed[key]
        if value is not None:
            self.confirmed[key] = value
            self.solver.hold(("confirmed",) + key, value[1])

    def _drop_handed_out(self, key: WlKey) -> None:
        if self.handed_out.pop(key, None) is not None:
            self.solver.release(("handed-out",) + key)

    # --- holds --------------------------------------------------------------------------------------

    def apply_hold(self, rec: HoldRecord, now: float | None = None) -> None:
        key = (rec.namespace, rec.name)
        current = self.handed_out.get(key)
        if isinstance(rec, PlacementReleased):
            if current is not None and current.request_id == rec.request_id:
                self._drop_handed_out(key)
            return
        if current is not None and current.request_id == rec.request_id:
            return  # our own record coming back
        if key in self.confirmed and self.confirmed[key][0] == rec.uid:
            return  # already confirmed by the status
        if now is not None and rec.at + self.hold_ttl_s < now:
            return
        self._drop_handed_out(key)
        self.handed_out[key] = rec
        self.solver.hold(("handed-out",) + key, rec.pod_sets)

    def expire(self, now: float) -> None:
        for key in [k for k, h in self.handed_out.items() if h.at + self.hold_ttl_s < now]:
            self._drop_handed_out(key)

    # --- solving ------------------------------------------------------------------------------------

    def solve(self, req: SolveRequest, now: float) -> tuple[SolveReply, PlacementHeld | None]:
        self.expire(now)
        key = (req.namespace, req.name)
        self._drop_handed_out(key)  # a new question for the same workload replaces the old answer
        confirmed = self.confirmed.get(key)
        if confirmed is not None and confirmed[0] == req.uid:
            self.solver.release(("confirmed",) + key)  # it is being re-placed: its own capacity is free
        try:
            victims = tuple((c.namespace, c.name) for c in req.candidates)
            result = self.solver.solve(req, victims, [("confirmed",) + (c.namespace, c.name) for c in req.candidates])
        finally:
            if confirmed is not None and confirmed[0] == req.uid:
                self.solver.hold(("confirmed",) + key, confirmed[1])
        reply: SolveReply = result.reply(req.id)
        if not reply.placed:
            return reply, None
        held = PlacementHeld(request_id=req.id, cluster=req.cluster, namespace=req.namespace, name=req.name,
                             uid=req.uid, at=now, pod_sets=result.held)
        self.apply_hold(held)
        return reply, held
