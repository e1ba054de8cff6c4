"""A pod shape (requests, tolerations, node selector) and how many pods of it fit in free capacity:
what the capacity tree and its count views both speak in."""

from __future__ import annotations

from typing import NamedTuple

from services.tas.core.model import TolerationSpec

__all__ = ["NONE", "Shape", "count_in"]

NONE = 1 << 62  # more pods than any node holds


class Shape(NamedTuple):
    requests: tuple[tuple[str, int], ...]  # one pod, with ("pods", 1); only positive amounts
    tolerations: tuple[TolerationSpec, ...]
    selector: tuple[tuple[str, str], ...]


def count_in(free: dict[str, int], requests: tuple[tuple[str, int], ...]) -> int:
    best = NONE
    for r, v in requests:
        c = free.get(r, 0) // v
        if c < best:
            best = c
    return max(best, 0) if best != NONE else 0
