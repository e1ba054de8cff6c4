"""Names in a scenario resolved against the API: kinds, and `ns/NAME` as a Workload.

FORMAT.md: `ns/NAME` is the Workload called NAME or, where there is none, the
Workload owned by the Job (or JobSet, Pod, StatefulSet) called NAME (such
Workloads have generated names).
"""

from __future__ import annotations

from collections.abc import Iterable

from kq.api.kueue import Workload
from kq.api.registry import UnknownKindError, kind_info

JOB_KINDS = ("Job", "JobSet", "Pod", "StatefulSet", "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob",
             "MPIJob", "RayJob", "RayCluster", "TrainJob", "AppWrapper")


def known_kind(kind: str) -> bool:
    try:
        kind_info(kind)
    except UnknownKindError:
        return False
    return True


def is_namespaced(kind: str) -> bool:
    return kind_info(kind).namespaced


def canonical_kind(kind: str) -> str:
    """"workload" / "wl" -> "Workload"."""
    return kind_info(kind).kind


def resolve_workload(workloads: Iterable[Workload], namespace: str, name: str) -> Workload | None:
    """The Workload NAME in `namespace`, else the one a Job/JobSet/Pod/StatefulSet NAME owns (its controller first)."""
    in_ns = [w for w in workloads if w.metadata.namespace == namespace]
    for w in in_ns:
        if w.metadata.name == name:
            return w
    owned: list[tuple[bool, str, Workload]] = []
    for w in in_ns:
        for ref in w.metadata.owner_references:
            if ref.kind in JOB_KINDS and ref.name == name:
                owned.append((not ref.controller, w.metadata.name, w))
    # Deterministic when several match (a stale copy being replaced): controller refs, then by name.
    return min(owned, key=lambda t: (t[0], t[1]))[2] if owned else None
