"""Dominant resource share (Kueue pkg/cache/scheduler/fair_sharing.go).

A node's share is, over the resources it borrows (usage above its subtree quota), the largest
ratio of borrowed amount to what its parent could lend it, divided by its fair-sharing weight.
A node with weight 0 that borrows has an infinite share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .quota import FR, QuotaNode, lendable


class DRS:
    __slots__ = ("weight", "ratio", "dominant", "borrowing", "borrowed_frs")

    def __init__(
        self,
        weight: float,
        ratio: float = 0.0,
        dominant: str = "",
        borrowing: bool = False,
        borrowed_frs: tuple[FR, ...] = (),
    ) -> None:
        self.weight = weight
        self.ratio = ratio
        self.dominant = dominant
        self.borrowing = borrowing
        self.borrowed_frs = borrowed_frs

    def __repr__(self) -> str:
        return f"DRS({self.weighted_share():g}, {self.dominant or '-'}, borrowing={self.borrowing})"

    def is_zero(self) -> bool:
        return self.ratio == 0

    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.ratio != 0

    def weighted_share(self) -> float:
        if self.ratio == 0:
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.ratio / self.weight

    def borrowing_on(self, requested: Mapping[FR, int]) -> bool:
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed_frs)


NEGATIVE_DRS = DRS(1.0, -1.0)


def compare_drs(a: DRS, b: DRS) -> int:
    """-1 when `a` should be preferred for admission (lower share), 1 when `a` is the bigger share."""
    az, bz = a.zero_weight_borrows(), b.zero_weight_borrows()
    if az and bz:
        x, y = a.ratio, b.ratio
    elif az:
        return 1
    elif bz:
        return -1
    else:
        x, y = a.weighted_share(), b.weighted_share()
    return (x > y) - (x < y)


def dominant_resource_share(node: QuotaNode, extra: Mapping[FR, int] | None = None) -> DRS:
    drs = DRS(node.fair_weight)
    if node.parent is None:
        return drs
    borrowed: dict[str, int] = {}
    frs: list[FR] = []
    usage = node.usage
    for fr, quota in node.subtree_quota.items():
        b = usage.get(fr, 0) - quota
        if extra:
            b += extra.get(fr, 0)
        if b > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + b
            frs.append(fr)
    if not borrowed:
        return drs
    drs.borrowing = True
    drs.borrowed_frs = tuple(frs)
    lend = lendable(node.parent)
    for res in sorted(borrowed):
        lr = lend.get(res, 0)
        if lr > 0:
            ratio = borrowed[res] * 1000.0 / lr
            if ratio > drs.ratio:
                drs.ratio = ratio
                drs.dominant = res
    return drs
