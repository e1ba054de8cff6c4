"""From a pod set's request to the placement's parameters, and the user-facing refusals and "doesn't fit"."""

from __future__ import annotations

from services.tas.core.model import FailureKind, PlacementFailure, PodSetRequest
from services.tas.core.placement import Params
from services.tas.core.tree import CapacityTree
from services.tas.core.views import Shape, shape_view

__all__ = ["shape_of", "params_of", "pod_amounts", "not_fit_message"]


def pod_amounts(requests: dict[str, int]) -> dict[str, int]:
    """One pod's requests as capacity sees them: plus one `pods` (Kueue's OnePodRequest)."""
    out = {r: v for r, v in requests.items() if v > 0}
    out["pods"] = out.get("pods", 0) + 1
    return out


def shape_of(ps: PodSetRequest) -> Shape:
    return Shape(
        requests=tuple(sorted(pod_amounts(ps.requests).items())),
        tolerations=ps.tolerations,
        selector=tuple(sorted(ps.node_selector.items())),
    )


def _fail(
    tree: CapacityTree, ps: PodSetRequest, kind: FailureKind, message: str, level: str | None
) -> PlacementFailure:
    return PlacementFailure(flavor=tree.flavor.name, pod_set=ps.name, kind=kind,
                            message=message, level=level)


def params_of(tree: CapacityTree, ps: PodSetRequest, leader_count: int) -> Params | PlacementFailure:
    levels = tree.levels
    if ps.mode in ("required", "preferred"):
        if not ps.level:
            return _fail(tree, ps, "InvalidRequest", f"pod set {ps.name}: topology level not specified", None)
        key = ps.level
    elif ps.mode == "slices-only":
        key = levels[0]
    else:
        key = levels[-1]
    if key not in levels:
        return _fail(tree, ps, "UnknownLevel",
                     f"no requested topology level: {key} (topology {tree.name!r} has {', '.join(levels)})", key)
    if (ps.slice_level is None) != (ps.slice_size is None):
        return _fail(tree, ps, "InvalidRequest",
                     f"pod set {ps.name}: podset-slice-required-topology and podset-slice-size must be set together",
                     ps.slice_level)
    slice_key = ps.slice_level if ps.slice_level is not None else levels[-1]
    size = ps.slice_size if ps.slice_size is not None else 1
    if size < 1:
        return _fail(tree, ps, "InvalidRequest", f"pod set {ps.name}: podset-slice-size must be at least 1", None)
    if slice_key not in levels:
        return _fail(tree, ps, "UnknownLevel", f"no requested topology level for slices: {slice_key} "
                     f"(topology {tree.name!r} has {', '.join(levels)})", slice_key)
    level, slice_level = levels.index(key), levels.index(slice_key)
    if level > slice_level:
        return _fail(tree, ps, "InvalidRequest",
                     f"podset slice topology {slice_key} is above the podset topology {key}", slice_key)
    if ps.count % size != 0:
        return _fail(tree, ps, "SliceSizeNotDivisor",
                     f"pod set {ps.name}: podset-slice-size {size} does not divide the pod count {ps.count}",
                     slice_key)
    return Params(pods=ps.count, slice_size=size, level=level, slice_level=slice_level,
                  required=ps.mode == "required",
                  least_free=ps.mode in ("unconstrained", "implied", "slices-only"),
                  leader_count=leader_count)


def not_fit_message(tree: CapacityTree, shape: Shape, fitted: int, wanted: int, slice_size: int,
                    required_level: str | None) -> str:
    unit = "pod" if slice_size == 1 else "slice"
    if fitted == 0:
        text = f"topology \"{tree.name}\" doesn't allow to fit any of {wanted} {unit}(s)"
    else:
        text = f"topology \"{tree.name}\" allows to fit only {fitted} out of {wanted} {unit}(s)"
    if required_level is not None:
        text += f" in one domain of the required level {required_level}"
    total, reasons = shape_view(tree, shape).exclusions()
    if reasons:
        text += f". Total nodes: {total}; excluded: {', '.join(reasons)}"
    return text
