"""The cycle-scoped view the scheduler mutates (Kueue pkg/cache/scheduler/snapshot.go).

Rather than copying every ClusterQueue per cycle, the cycle works on the live quota tree and
records what it changes: what-if helpers remove usage and hand back a function that restores
it, and usage reserved only for the length of the cycle (for preemptors waiting on their
victims) is logged and reverted when the cycle ends. Admissions the cycle assumes are real
state changes and stay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from .model import ResourceFlavor
from .quota import FR, QuotaNode, add_usages, remove_usages
from .runtime import ClusterQueueRuntime
from .workloads import ReservedInfo


class Snapshot:
    __slots__ = ("cqs", "flavors", "fresh", "_temporary")

    def __init__(self, cqs: Mapping[str, ClusterQueueRuntime], flavors: Mapping[str, ResourceFlavor]) -> None:
        self.cqs = cqs
        self.flavors = flavors
        # workloads assumed during this cycle: their usage counts, but they are not candidates yet
        self.fresh: set[str] = set()
        self._temporary: list[tuple[QuotaNode, dict[FR, int]]] = []

    def runtime(self, node: QuotaNode) -> ClusterQueueRuntime:
        return self.cqs[node.name]

    def is_active(self, node: QuotaNode) -> bool:
        cq = self.cqs.get(node.name)
        return cq is not None and cq.active

    def remove_workload(self, info: ReservedInfo) -> None:
        cq = self.cqs[info.cq]
        del cq.workloads[info.key]
        remove_usages(cq.node, info.usage)

    def add_workload(self, info: ReservedInfo) -> None:
        cq = self.cqs[info.cq]
        cq.workloads[info.key] = info
        add_usages(cq.node, info.usage)

    def simulate_workload_removal(self, infos: Iterable[ReservedInfo]) -> Callable[[], None]:
        removed = list(infos)
        for info in removed:
            self.remove_workload(info)

        def restore() -> None:
            for info in removed:
                self.add_workload(info)

        return restore

    def simulate_removal_summed(self, infos: Iterable[ReservedInfo],
                                usage_per_cq: Mapping[str, Mapping[FR, int]]) -> Callable[[], None]:
        """simulate_workload_removal of many workloads at once, `usage_per_cq` being their usage
        summed per ClusterQueue: one quota walk per queue instead of one per workload (removals
        add up, so the tree ends the same)."""
        removed = list(infos)
        for info in removed:
            del self.cqs[info.cq].workloads[info.key]
        sums = [(self.cqs[name].node, u) for name, u in usage_per_cq.items()]
        for node, u in sums:
            remove_usages(node, u)

        def restore() -> None:
            for node, u in sums:
                add_usages(node, u)
            for info in removed:
                self.cqs[info.cq].workloads[info.key] = info

        return restore

    def simulate_usage_removal(self, infos: Iterable[ReservedInfo]) -> Callable[[], None]:
        removed = [(self.cqs[i.cq].node, i.usage) for i in infos]
        for node, usage in removed:
            remove_usages(node, usage)

        def restore() -> None:
            for node, usage in removed:
                add_usages(node, usage)

        return restore

    def reserve_for_cycle(self, cq: ClusterQueueRuntime, usage: Mapping[FR, int]) -> None:
        """Hold capacity for the rest of the cycle only (preemptors, unreclaimable preemptions)."""
        kept = {fr: v for fr, v in usage.items() if v > 0}
        if kept:
            add_usages(cq.node, kept)
            self._temporary.append((cq.node, kept))

    def end_cycle(self) -> None:
        for node, usage in reversed(self._temporary):
            remove_usages(node, usage)
        self._temporary.clear()
        self.fresh.clear()
