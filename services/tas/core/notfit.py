"""Kueue's "doesn't fit" message, with why nodes were left out (tas_flavor_snapshot.go notFitMessage)."""

from __future__ import annotations

from services.tas.core.tree import CapacityTree
from services.tas.core.views import Shape

__all__ = ["not_fit_message"]


def not_fit_message(tree: CapacityTree, shape: Shape, fitted: int, wanted: int, slice_size: int,
                    required_level: str | None) -> str:
    unit = "pod" if slice_size == 1 else "slice"
    if fitted == 0:
        text = f"topology \"{tree.name}\" doesn't allow to fit any of {wanted} {unit}(s)"
    else:
        text = f"topology \"{tree.name}\" allows to fit only {fitted} out of {wanted} {unit}(s)"
    if required_level is not None:
        text += f" in one domain of the required level {required_level}"
    total, reasons = tree.view(shape).exclusions()
    if reasons:
        text += f". Total nodes: {total}; excluded: {', '.join(reasons)}"
    return text
