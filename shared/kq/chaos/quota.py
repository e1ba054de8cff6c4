"""The quota rules of a cohort tree, written from Kueue's documented semantics, independent of
kq's admission code: given what each ClusterQueue uses, is any node over its limits or any
lender under its guarantee?

For each node, bottom up, per (flavor, resource):
- a ClusterQueue needs `max(0, used - nominal)` from its cohort and has `max(0, nominal - used)` spare;
- a cohort supplies its own nominal plus what its children may lend of their spare (at most
  their lendingLimit: the rest is guaranteed to them), and needs from its parent what its
  children need beyond that;
- a node with a borrowingLimit may need at most that much, and the root may need nothing.

This one rule covers both halves of the invariant: nobody above nominal + borrowingLimit, and
nobody borrowing the part of a lender that its lendingLimit keeps back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kq.quantity import QuantityError, to_milli

FR = tuple[str, str]  # (flavor, resource)
INF = float("inf")


@dataclass(frozen=True, slots=True)
class Limits:
    nominal: int = 0
    borrowing: int | None = None
    lending: int | None = None


@dataclass(slots=True)
class Node:
    name: str
    is_cq: bool
    parent: str | None = None
    quota: dict[FR, Limits] = field(default_factory=dict)


def _milli(v: Any) -> int | None:
    if v is None:
        return None
    try:
        return to_milli(v)
    except QuantityError:
        return None


def quota_of(spec: Mapping[str, Any]) -> dict[FR, Limits]:
    out: dict[FR, Limits] = {}
    for rg in spec.get("resourceGroups") or ():
        for fl in rg.get("flavors") or ():
            for r in fl.get("resources") or ():
                out[(fl["name"], r["name"])] = Limits(_milli(r.get("nominalQuota")) or 0,
                                                      _milli(r.get("borrowingLimit")),
                                                      _milli(r.get("lendingLimit")))
    return out


class Tree:
    """ClusterQueues and Cohorts of one cluster (cohorts named only by a ClusterQueue exist too)."""

    def __init__(self) -> None:
        self.cqs: dict[str, Node] = {}
        self.cohorts: dict[str, Node] = {}

    def set_cq(self, name: str, spec: Mapping[str, Any] | None) -> None:
        if spec is None:
            self.cqs.pop(name, None)
            return
        self.cqs[name] = Node(name, True, spec.get("cohortName") or spec.get("cohort") or None, quota_of(spec))

    def set_cohort(self, name: str, spec: Mapping[str, Any] | None) -> None:
        if spec is None:
            self.cohorts.pop(name, None)
            return
        self.cohorts[name] = Node(name, False, spec.get("parentName") or None, quota_of(spec))

    def _cohort(self, name: str) -> Node:
        return self.cohorts.get(name) or Node(name, False)

    def root_of(self, cq: str) -> str | None:
        node = self.cqs.get(cq)
        if node is None or node.parent is None:
            return None
        seen: set[str] = set()
        name = node.parent
        while True:
            parent = self._cohort(name).parent
            if parent is None or parent in seen:
                return name
            seen.add(name)
            name = parent

    def children(self) -> dict[str, list[Node]]:
        kids: dict[str, list[Node]] = {}
        for n in (*self.cqs.values(), *self.cohorts.values()):
            if n.parent is not None:
                kids.setdefault(n.parent, []).append(n)
        return kids


def violations(tree: Tree, usage: Mapping[str, Mapping[FR, int]], cqs: Iterable[str]) -> list[str]:
    """What is broken in the trees of these ClusterQueues (messages name the node and resource)."""
    out: list[str] = []
    kids = tree.children()
    roots: set[str] = set()
    for cq in cqs:
        node = tree.cqs.get(cq)
        if node is None:
            continue
        root = tree.root_of(cq)
        if root is None:  # alone: nominal is all it has
            for fr, used in usage.get(cq, {}).items():
                lim = node.quota.get(fr, Limits())
                if used > lim.nominal:
                    out.append(f"ClusterQueue {cq} {fr[0]}/{fr[1]} uses {used}m > nominal {lim.nominal}m")
        else:
            roots.add(root)
    for root in sorted(roots):
        frs = {fr for cq in _cqs_under(root, kids) for fr in (*tree.cqs[cq].quota, *usage.get(cq, {}))}
        for fr in sorted(frs):
            need, _ = _walk(tree._cohort(root), fr, kids, usage, out)
            if need > 0:
                out.append(f"cohort tree {root} {fr[0]}/{fr[1]} uses {need}m beyond all its quota")
    return out


def _cqs_under(name: str, kids: Mapping[str, list[Node]]) -> list[str]:
    out: list[str] = []
    for k in kids.get(name, ()):
        out += [k.name] if k.is_cq else _cqs_under(k.name, kids)
    return out


def _walk(node: Node, fr: FR, kids: Mapping[str, list[Node]], usage: Mapping[str, Mapping[FR, int]],
          out: list[str], depth: int = 0) -> tuple[float, float]:
    """(need from the parent, spare it could lend) of `node` for one flavor/resource; records
    a violation where a node needs more than its borrowingLimit."""
    lim = node.quota.get(fr, Limits())
    if node.is_cq:
        used = usage.get(node.name, {}).get(fr, 0)
        need: float = max(0, used - lim.nominal)
        spare: float = max(0, lim.nominal - used)
    else:
        supply: float = lim.nominal
        demand: float = 0
        for child in kids.get(node.name, ()) if depth < 32 else ():  # a cycle is not a tree: stop
            c_need, c_spare = _walk(child, fr, kids, usage, out, depth + 1)
            c_lim = child.quota.get(fr, Limits())
            demand += c_need
            supply += min(c_spare, c_lim.lending if c_lim.lending is not None else INF)
        need, spare = max(0.0, demand - supply), max(0.0, supply - demand)
    if lim.borrowing is not None and need > lim.borrowing and node.parent is not None:
        kind = "ClusterQueue" if node.is_cq else "cohort"
        out.append(f"{kind} {node.name} {fr[0]}/{fr[1]} borrows {need:.0f}m > borrowingLimit {lim.borrowing}m")
    return need, spare
