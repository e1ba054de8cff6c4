"""The capacity tree of one TAS flavor: domains per level, leaves, free capacity.

Domains are small integers; arrays indexed by them hold the structure. A leaf is a
node when the lowest level is kubernetes.io/hostname, else the lowest-level domain
summing its nodes (as Kueue does). Free capacity of a leaf = allocatable of its
eligible nodes - requests of counted pods there - capacity held by placements.
Every change touches one leaf and is pushed into the count views
(services.tas.core.views), which keep per-domain aggregates up to date.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Protocol, TypeVar

from services.tas.core.model import HOSTNAME_LABEL, Amounts, FlavorSpec, NodeInfo, TolerationSpec
from services.tas.core.shape import Shape

__all__ = ["CapacityTree", "MAX_VIEWS", "MaintainedView"]


class MaintainedView(Protocol):
    pending: set[int]

    def add_domain(self, d: int) -> None: ...

    def catch_up(self) -> None: ...


V = TypeVar("V", bound=MaintainedView)

MAX_VIEWS = 64  # count views kept (one per pod shape); least recently used dropped first


class CapacityTree:
    def __init__(self, flavor: FlavorSpec) -> None:
        self.flavor = flavor
        self.name = flavor.topology.name
        self.levels = flavor.topology.levels
        self.last = len(self.levels) - 1
        self.host_leaves = self.levels[-1] == HOSTNAME_LABEL
        self.dvalues: list[tuple[str, ...]] = []
        self.dlevel: list[int] = []
        self.dparent: list[int] = []
        self.dchildren: list[list[int]] = []
        self.by_level: list[dict[tuple[str, ...], int]] = [{} for _ in self.levels]
        self.roots: list[int] = []
        self.leaf_nodes: dict[int, list[str]] = {}
        self.nodes: dict[str, NodeInfo] = {}
        self.node_leaf: dict[str, int] = {}
        self.node_used: dict[str, Amounts] = {}
        self.leaf_held: dict[int, Amounts] = {}
        self.orphan_held: dict[tuple[str, ...], Amounts] = {}  # held on leaves not (yet) known
        self.host_node: dict[str, str] = {}  # hostname label -> node name
        self.orphan_foreign: dict[str, Amounts] = {}  # other flavors' holds on hosts not (yet) known
        self._views: OrderedDict[Hashable, MaintainedView] = OrderedDict()

    # --- structure ---

    def matches(self, node: NodeInfo) -> bool:
        labels = node.labels
        if any(labels.get(k) != v for k, v in self.flavor.node_labels.items()):
            return False
        return all(lv in labels for lv in self.levels)

    def _domain(self, values: tuple[str, ...]) -> int:
        level = len(values) - 1
        found = self.by_level[level].get(values)
        if found is not None:
            return found
        parent = self._domain(values[:-1]) if level > 0 else -1
        d = len(self.dvalues)
        self.dvalues.append(values)
        self.dlevel.append(level)
        self.dparent.append(parent)
        self.dchildren.append([])
        self.by_level[level][values] = d
        siblings = self.dchildren[parent] if parent >= 0 else self.roots
        siblings.append(d)
        siblings.sort(key=self.dvalues.__getitem__)
        if level == self.last and values in self.orphan_held:
            self.leaf_held[d] = self.orphan_held.pop(values)
        for view in self._views.values():
            view.add_domain(d)
        return d

    def leaf_of(self, values: tuple[str, ...]) -> int | None:
        return self.by_level[self.last].get(values)

    def is_leaf(self, d: int) -> bool:
        return self.dlevel[d] == self.last

    def ancestor_at(self, d: int, level: int) -> int:
        while self.dlevel[d] > level:
            d = self.dparent[d]
        return d

    def leaves_under(self, d: int) -> Iterator[int]:
        if self.dlevel[d] == self.last:
            yield d
            return
        for c in self.dchildren[d]:
            yield from self.leaves_under(c)

    # --- nodes and usage ---

    def upsert_node(self, node: NodeInfo) -> None:
        old_leaf = self.node_leaf.get(node.name)
        if not self.matches(node):
            self.remove_node(node.name)
            return
        values = tuple(node.labels[lv] for lv in self.levels)
        leaf = self._domain(values)
        if old_leaf is not None and old_leaf != leaf:
            self.remove_node(node.name)
        self.nodes[node.name] = node
        if old_leaf != leaf:
            self.node_leaf[node.name] = leaf
            names = self.leaf_nodes.setdefault(leaf, [])
            names.append(node.name)
            names.sort()
        self.node_used.setdefault(node.name, {})
        host = node.labels.get(HOSTNAME_LABEL)
        if host is not None and self.host_node.get(host) != node.name:
            self.host_node[host] = node.name
            foreign = self.orphan_foreign.pop(host, None)
            if foreign:
                used = self.node_used[node.name]
                for r, v in foreign.items():
                    used[r] = used.get(r, 0) + v
        self._leaf_changed(leaf)

    def remove_node(self, name: str) -> None:
        leaf = self.node_leaf.pop(name, None)
        self.nodes.pop(name, None)
        if leaf is None:
            return
        self.leaf_nodes[leaf].remove(name)
        self._leaf_changed(leaf)

    def add_node_usage(self, node: str, amounts: Amounts, sign: int) -> None:
        """Requests of a pod bound on `node` (sign +1) or gone from it (-1)."""
        used = self.node_used.setdefault(node, {})
        for r, v in amounts.items():
            used[r] = used.get(r, 0) + sign * v
        leaf = self.node_leaf.get(node)
        if leaf is not None:
            self._leaf_changed(leaf)

    def add_held_at(self, values: tuple[str, ...], amounts: Amounts, sign: int) -> None:
        """Assumed capacity by leaf values; kept aside until such a leaf exists."""
        leaf = self.leaf_of(values)
        if leaf is not None:
            self.add_held(leaf, amounts, sign)
            return
        held = self.orphan_held.setdefault(values, {})
        for r, v in amounts.items():
            held[r] = held.get(r, 0) + sign * v
        if not any(held.values()):
            del self.orphan_held[values]

    def add_foreign_held(self, host: str, amounts: Amounts, sign: int) -> None:
        """Capacity another flavor holds on a node this tree may share: it counts as used here."""
        name = self.host_node.get(host)
        if name is not None:
            self.add_node_usage(name, amounts, sign)
            return
        held = self.orphan_foreign.setdefault(host, {})
        for r, v in amounts.items():
            held[r] = held.get(r, 0) + sign * v

    def add_held(self, leaf: int, amounts: Amounts, sign: int) -> None:
        held = self.leaf_held.setdefault(leaf, {})
        for r, v in amounts.items():
            held[r] = held.get(r, 0) + sign * v
        self._leaf_changed(leaf)

    def _leaf_changed(self, leaf: int) -> None:
        # views catch up when next used: repeated changes to a leaf cost one update
        for view in self._views.values():
            view.pending.add(leaf)

    # --- capacity ---

    def eligible(
        self, node: NodeInfo, tolerations: tuple[TolerationSpec, ...], selector: tuple[tuple[str, str], ...]
    ) -> bool:
        if not node.ready or node.unschedulable:
            return False
        for taint in node.taints:
            if taint.effect == "PreferNoSchedule":
                continue
            if not any(t.tolerates(taint) for t in tolerations) and not any(
                t.tolerates(taint) for t in self.flavor.tolerations
            ):
                return False
        return all(node.labels.get(k) == v for k, v in selector)

    def leaf_free(self, leaf: int, shape: Shape, exclude: frozenset[str] = frozenset()) -> Amounts:
        """Free capacity of a leaf for pods of `shape` (only the nodes it may use)."""
        free: Amounts = {}
        for name in self.leaf_nodes.get(leaf, ()):
            node = self.nodes[name]
            if name in exclude or not self.eligible(node, shape.tolerations, shape.selector):
                continue
            used = self.node_used.get(name, {})
            for r, v in node.allocatable.items():
                free[r] = free.get(r, 0) + v - used.get(r, 0)
        for r, v in self.leaf_held.get(leaf, {}).items():
            free[r] = free.get(r, 0) - v
        return free

    def settle(self) -> None:
        for view in self._views.values():
            view.catch_up()

    def cached(self, key: Hashable, make: Callable[[], V]) -> V:
        """The maintained view under `key` (built by `make` on first use), caught up with every change."""
        view = self._views.get(key)
        if view is None:
            view = make()
            self._views[key] = view
            if len(self._views) > MAX_VIEWS:
                self._views.popitem(last=False)
        else:
            self._views.move_to_end(key)
            view.catch_up()
        return view  # type: ignore[return-value]  # the view under a key is the one its `make` built (one type per key)
