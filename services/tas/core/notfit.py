"""Kueue's "doesn't fit" message, with why nodes were left out (tas_flavor_snapshot.go notFitMessage)."""

from __future__ import annotations

from services.tas.core.tree import CapacityTree
from services.tas.core.views import Shape, count_in

__all__ = ["not_fit_message"]


def _exclusions(tree: CapacityTree, shape: Shape) -> tuple[int, list[str]]:
    total = 0
    taints: dict[str, int] = {}
    selector = 0
    resources: dict[str, int] = {}
    for leaf, names in tree.leaf_nodes.items():
        for name in names:
            node = tree.nodes[name]
            if not node.ready or node.unschedulable:
                continue  # Kueue's cache does not hold such nodes at all
            total += 1
            untolerated = [
                t for t in node.taints
                if t.effect != "PreferNoSchedule"
                and not any(x.tolerates(t) for x in shape.tolerations + tree.flavor.tolerations)
            ]
            if untolerated:
                t = untolerated[0]
                name_ = f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                taints[name_] = taints.get(name_, 0) + 1
                continue
            if any(node.labels.get(k) != v for k, v in shape.selector):
                selector += 1
                continue
        free = tree.leaf_free(leaf, shape)
        if names and count_in(free, shape.requests) == 0 and any(
            tree.eligible(tree.nodes[n], shape.tolerations, shape.selector) for n in names
        ):
            limiting = min(shape.requests, key=lambda rv: (free.get(rv[0], 0) // rv[1], rv[0]))[0]
            resources[limiting] = resources.get(limiting, 0) + 1
    reasons = [f'taint "{k}": {v}' for k, v in taints.items()]
    if selector:
        reasons.append(f"nodeSelector: {selector}")
    reasons += [f'resource "{k}": {v}' for k, v in resources.items()]
    return total, sorted(reasons)


def not_fit_message(tree: CapacityTree, shape: Shape, fitted: int, wanted: int, slice_size: int,
                    required_level: str | None) -> str:
    unit = "pod" if slice_size == 1 else "slice"
    if fitted == 0:
        text = f"topology \"{tree.name}\" doesn't allow to fit any of {wanted} {unit}(s)"
    else:
        text = f"topology \"{tree.name}\" allows to fit only {fitted} out of {wanted} {unit}(s)"
    if required_level is not None:
        text += f" in one domain of the required level {required_level}"
    total, reasons = _exclusions(tree, shape)
    if reasons:
        text += f". Total nodes: {total}; excluded: {', '.join(reasons)}"
    return text
