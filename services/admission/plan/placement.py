"""Between the core's PlacementRequest / PlacementAnswer and the tas service's SolveRequest /
SolveReply (kq.placement, `kq.v1.tas.solve`). Pure."""

from __future__ import annotations

from kq.api import core as api_core
from kq.placement import Candidate, PodSetPlacementRequest, SolveReply, SolveRequest
from services.admission.core.decisions import PlacementRequest
from services.admission.core.model import PlacementAnswer


def solve_request(cluster: str, req: PlacementRequest, uids: dict[str, str], as_of: int = 0) -> SolveRequest:
    """`uids`: the candidates' uids (namespace/name -> uid) as the core knows them; `as_of`: the
    stream sequence of the newest Workload record the core had applied when it asked."""
    ns, _, name = req.workload.partition("/")
    pod_sets = tuple(
        PodSetPlacementRequest(
            name=a.name, count=a.count, flavor=a.flavor, requests=dict(a.requests),
            topology_request=a.topology_request, implied=a.implied,
            tolerations=tuple(api_core.Toleration(key=t.key, operator=t.operator, value=t.value,
                                                  effect=t.effect)  # type: ignore[arg-type]  # read from kq.api, so one of its literals
                              for t in a.tolerations),
            node_selector=dict(a.node_selector),
        )
        for a in req.pod_sets
    )
    candidates = tuple(Candidate(namespace=k.partition("/")[0], name=k.partition("/")[2], uid=uids.get(k, ""))
                       for k in req.candidates)
    return SolveRequest(id=req.id, cluster=cluster, namespace=ns, name=name, uid=req.uid, pod_sets=pod_sets,
                        candidates=candidates, as_of=as_of,
                        repair_node=req.repair_node)


def placement_answer(req: PlacementRequest, reply: SolveReply, now: float) -> PlacementAnswer:
    return PlacementAnswer(
        workload=req.workload, uid=req.uid, request_id=req.id, placed=reply.placed,
        topology={p.name: p.topology_assignment for p in reply.pod_sets},
        victims=tuple(f"{v.namespace}/{v.name}" for v in reply.victims),
        reason=reply.reason, message=reply.message, at=now,
    )
