"""The TAS solver: capacity trees per flavor, held capacity per workload, placements.

One object owns all state; every input is an event (services.tas.core.events) so
a replica rebuilds the same state by replaying the log. Assumed capacity: a decision
holds what it hands out from `hold` until `release` (confirm only marks it
admitted); pods of a workload with a hold are not counted again on their nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from kq.api.topology import TopologyDomain, compact_topology_assignment
from services.tas.core.counts import FastCounts, FullCounts, GroupCounts, Source, State
from services.tas.core.model import (
    HOSTNAME_LABEL,
    Amounts,
    FlavorSpec,
    HeldPodSet,
    NodeInfo,
    Placement,
    PlacementFailure,
    PodSetPlacement,
    PodSetRequest,
)
from services.tas.core.placement import NoFit, Params, find_assignment
from services.tas.core.requests import not_fit_message, params_of, pod_amounts, shape_of
from services.tas.core.tree import CapacityTree
from services.tas.core.views import shape_view

__all__ = ["TasSolver", "HoldRecord"]


class HoldRecord:
    __slots__ = ("flavor", "pod_sets", "state")

    def __init__(self, flavor: str, pod_sets: tuple[HeldPodSet, ...]) -> None:
        self.flavor = flavor
        self.pod_sets = pod_sets
        self.state: Literal["assumed", "confirmed"] = "assumed"


def _scaled(requests: Amounts, count: int) -> Amounts:
    return {r: v * count for r, v in pod_amounts(requests).items()}


class TasSolver:
    def __init__(self, *, reference: bool = False) -> None:
        """`reference`: compute counts over the whole tree for every placement (tests only)."""
        self.reference = reference
        self.trees: dict[str, CapacityTree] = {}
        self.nodes: dict[str, NodeInfo] = {}
        self.pods: dict[str, tuple[str, Amounts, str | None]] = {}  # key -> (node, amounts, workload)
        self.pods_of: dict[str, set[str]] = {}
        self.holds: dict[str, HoldRecord] = {}

    # --- inputs ---

    def set_flavor(self, flavor: FlavorSpec) -> None:
        old = self.trees.get(flavor.name)
        if old is not None and old.flavor == flavor:
            return
        tree = CapacityTree(flavor)
        for node in sorted(self.nodes.values(), key=lambda n: n.name):
            tree.upsert_node(node)
        for node_name, amounts, wl in self.pods.values():
            if wl is None or wl not in self.holds:
                tree.add_node_usage(node_name, amounts, +1)
        if old is not None:  # its holds leave the other trees with the old tree
            for hold in self.holds.values():
                if hold.flavor == flavor.name:
                    self._apply_hold(hold, -1)
        for hold in self.holds.values():  # other flavors' holds on shared nodes
            if hold.flavor != flavor.name and hold.flavor in self.trees:
                self._apply_hold(hold, +1, only=tree)
        self.trees[flavor.name] = tree
        for hold in self.holds.values():
            if hold.flavor == flavor.name:
                self._apply_hold(hold, +1)

    def remove_flavor(self, name: str) -> None:
        if name not in self.trees:
            return
        for hold in self.holds.values():
            if hold.flavor == name:
                self._apply_hold(hold, -1)
        del self.trees[name]

    def upsert_node(self, node: NodeInfo) -> None:
        self.nodes[node.name] = node
        for tree in self.trees.values():
            tree.upsert_node(node)

    def remove_node(self, name: str) -> None:
        self.nodes.pop(name, None)
        for tree in self.trees.values():
            tree.remove_node(name)

    def pod_bound(self, key: str, node: str, requests: Amounts, workload: str | None = None) -> None:
        """A pod bound to `node` (any pod, kq's or not); idempotent per key."""
        if key in self.pods:
            self.pod_gone(key)
        amounts = pod_amounts(requests)
        self.pods[key] = (node, amounts, workload)
        if workload is not None:
            self.pods_of.setdefault(workload, set()).add(key)
        if workload is None or workload not in self.holds:
            for tree in self.trees.values():
                tree.add_node_usage(node, amounts, +1)

    def pod_gone(self, key: str) -> None:
        entry = self.pods.pop(key, None)
        if entry is None:
            return
        node, amounts, wl = entry
        if wl is not None:
            self.pods_of.get(wl, set()).discard(key)
        if wl is None or wl not in self.holds:
            for tree in self.trees.values():
                tree.add_node_usage(node, amounts, -1)

    def settle(self) -> None:
        """Bring every count view up to date now (the shell calls it after non-decision events,
        so that their cost is paid there rather than by the next placement)."""
        for tree in self.trees.values():
            tree.settle()

    # --- held capacity ---

    def assume(self, workload: str, flavor: str, pod_sets: tuple[HeldPodSet, ...]) -> None:
        """Hold what a decision handed out (idempotent: a second hold replaces the first)."""
        if workload in self.holds:
            self.release(workload)
        record = HoldRecord(flavor, pod_sets)
        self.holds[workload] = record
        self._apply_hold(record, +1)
        self._count_pods(workload, -1)

    def confirm(self, workload: str) -> None:
        record = self.holds.get(workload)
        if record is not None:
            record.state = "confirmed"

    def release(self, workload: str) -> None:
        record = self.holds.pop(workload, None)
        if record is None:
            return
        self._apply_hold(record, -1)
        self._count_pods(workload, +1)

    def _count_pods(self, workload: str, sign: int) -> None:
        for key in sorted(self.pods_of.get(workload, ())):
            node, amounts, _ = self.pods[key]
            for tree in self.trees.values():
                tree.add_node_usage(node, amounts, sign)

    def _apply_hold(self, record: HoldRecord, sign: int, only: CapacityTree | None = None) -> None:
        """A hold is capacity used on its flavor's leaves and, when those are nodes, on the same
        nodes in every other flavor's tree (flavors whose node sets overlap)."""
        tree = self.trees.get(record.flavor)
        if tree is None:
            return
        others = [only] if only is not None else [t for t in self.trees.values() if t is not tree]
        for ps in record.pod_sets:
            amounts = _scaled(ps.requests, ps.count)
            if only is None:
                tree.add_held_at(ps.values, amounts, sign)
            if tree.host_leaves:
                for other in others:
                    other.add_foreign_held(ps.values[-1], amounts, sign)

    @staticmethod
    def held_pod_sets(placement: Placement, pod_sets: Sequence[PodSetRequest]) -> tuple[HeldPodSet, ...]:
        by_name = {ps.name: ps for ps in pod_sets}
        return tuple(
            HeldPodSet(pod_set=p.pod_set, values=d.values, count=d.count, requests=by_name[p.pod_set].requests)
            for p in placement.pod_sets for d in p.domains
        )

    # --- placement ---

    def place(self, flavor: str, pod_sets: Sequence[PodSetRequest], *,
              without: Sequence[str] = ()) -> Placement | PlacementFailure:
        """Where the pod sets would go now (nothing held); `without`: as if those holds were released."""
        tree = self.trees.get(flavor)
        if tree is None:
            name = pod_sets[0].name if pod_sets else ""
            return PlacementFailure(flavor=flavor, pod_set=name, kind="UnknownFlavor",
                                    message=f"no topology-aware flavor {flavor!r}")
        removed = [self.holds[w] for w in without if w in self.holds and self.holds[w].flavor == flavor]
        for record in removed:
            self._apply_hold(record, -1)
        temp: list[tuple[int, Amounts]] = []
        try:
            return self._place(tree, pod_sets, temp)
        finally:
            for leaf, amounts in reversed(temp):
                tree.add_held(leaf, amounts, -1)
            for record in reversed(removed):
                self._apply_hold(record, +1)

    def place_and_assume(self, workload: str, flavor: str,
                       pod_sets: Sequence[PodSetRequest]) -> Placement | PlacementFailure:
        outcome = self.place(flavor, pod_sets)
        if isinstance(outcome, Placement):
            self.assume(workload, flavor, self.held_pod_sets(outcome, pod_sets))
        return outcome

    def _place(self, tree: CapacityTree, pod_sets: Sequence[PodSetRequest],
               temp: list[tuple[int, Amounts]]) -> Placement | PlacementFailure:
        groups: dict[str, list[PodSetRequest]] = {}
        for i, ps in enumerate(pod_sets):
            groups.setdefault(ps.group if ps.group is not None else f"\x00{i}", []).append(ps)
        out: list[PodSetPlacement] = []
        last = len(groups) - 1
        for g, members in enumerate(groups.values()):
            result = self.place_group(tree, members)
            if isinstance(result, PlacementFailure):
                return result
            out.extend(result)
            if g == last:
                break
            for placed in result:  # later groups see what this one takes (Kueue's assumedUsage)
                req = next(ps for ps in members if ps.name == placed.pod_set)
                for d in placed.domains:
                    leaf = tree.leaf_of(d.values)
                    assert leaf is not None
                    amounts = _scaled(req.requests, d.count)
                    tree.add_held(leaf, amounts, +1)
                    temp.append((leaf, amounts))
        order = {ps.name: i for i, ps in enumerate(pod_sets)}
        out.sort(key=lambda p: order[p.pod_set])
        return Placement(flavor=tree.flavor.name, pod_sets=tuple(out))

    def place_group(self, tree: CapacityTree, members: list[PodSetRequest],
                     restrict: int | None = None, exclude: frozenset[str] = frozenset(),
                     ) -> list[PodSetPlacement] | PlacementFailure:
        if len(members) > 2:
            return PlacementFailure(flavor=tree.flavor.name, pod_set=members[2].name, kind="InvalidRequest",
                                    message=f"pod set group {members[0].group!r} has {len(members)} pod sets; "
                                    "a group is one leader and one worker pod set")
        workers, leader = members[0], None
        if len(members) == 2:
            leader = members[1]
            if leader.count > workers.count:
                workers, leader = leader, workers
            if leader.count != 1:
                return PlacementFailure(flavor=tree.flavor.name, pod_set=leader.name, kind="InvalidRequest",
                                        message=f"pod set group {workers.group!r}: the leader pod set "
                                        f"{leader.name} must have exactly one pod")
        params = params_of(tree, workers, 1 if leader is not None else 0)
        if isinstance(params, PlacementFailure):
            return params
        if workers.count == 0:
            return [self.pod_set_placement(tree, workers, [])]
        shape = shape_of(workers)
        src: Source
        lead = shape_of(leader).requests if leader is not None else None
        if self.reference or restrict is not None or exclude:
            src = FullCounts(tree, shape, params.slice_level, params.slice_size, lead, restrict, exclude)
        elif lead is None:
            src = FastCounts(shape_view(tree, shape).slice_counts(params.slice_level, params.slice_size))
        else:
            key = ("group", shape, lead, params.slice_level, params.slice_size)
            src = tree.cached(key, lambda: GroupCounts(tree, shape, params.slice_level, params.slice_size, lead))
        found = find_assignment(tree, State(src), params)
        if isinstance(found, NoFit):
            return self._no_fit(tree, workers, params, found)
        placed = [self.pod_set_placement(tree, workers, found.workers)]
        if leader is not None:
            placed.append(self.pod_set_placement(tree, leader, found.leaders))
        return placed

    def _no_fit(self, tree: CapacityTree, ps: PodSetRequest, params: Params, nf: NoFit) -> PlacementFailure:
        if nf.empty_level is not None:
            return PlacementFailure(flavor=tree.flavor.name, pod_set=ps.name, kind="NoFit",
                                    message=f"no topology domains at level: {tree.levels[nf.empty_level]}",
                                    level=tree.levels[nf.empty_level])
        level = tree.levels[params.level] if params.required else None
        message = not_fit_message(tree, shape_of(ps), nf.fitted, nf.wanted, params.slice_size, level)
        return PlacementFailure(flavor=tree.flavor.name, pod_set=ps.name, kind="NoFit", message=message,
                                level=tree.levels[params.level])

    @staticmethod
    def pod_set_placement(tree: CapacityTree, ps: PodSetRequest, chosen: list[tuple[int, int]]) -> PodSetPlacement:
        domains = tuple(TopologyDomain(tree.dvalues[d], n) for d, n in chosen)
        if tree.host_leaves:
            compact = compact_topology_assignment(
                (HOSTNAME_LABEL,), [TopologyDomain(d.values[-1:], d.count) for d in domains])
        else:
            compact = compact_topology_assignment(tree.levels, list(domains))
        return PodSetPlacement(pod_set=ps.name, levels=tree.levels, domains=domains, assignment=compact)

    # --- what-if ---

    def minimal_victims(self, flavor: str, pod_sets: Sequence[PodSetRequest],
                        candidates: Sequence[str]) -> tuple[str, ...] | None:
        """Kueue's classical TAS preemption search on capacity alone.

        Candidates (workloads with holds) are removed in the order given (the
        caller's Kueue candidate ordering: lowest priority first) until the pod
        sets fit; then, from the second-to-last removed backwards, each is put
        back when the pod sets still fit. None when they do not fit even with
        every candidate removed. Quota is the caller's to check alongside.
        """
        if isinstance(self.place(flavor, pod_sets), Placement):
            return ()
        removed: list[str] = []
        for key in candidates:
            if key not in self.holds or key in removed:
                continue
            removed.append(key)
            if isinstance(self.place(flavor, pod_sets, without=removed), Placement):
                for i in range(len(removed) - 2, -1, -1):
                    trial = removed[:i] + removed[i + 1 :]
                    if isinstance(self.place(flavor, pod_sets, without=trial), Placement):
                        removed = trial
                return tuple(removed)
        return None
