"""Mutable per-object runtime state: ClusterQueues, Cohorts, LocalQueues (private to the core)."""

from __future__ import annotations

from .model import ClusterQueue, Cohort, LocalQueue, ResourceGroup
from .queues import PendingQueue
from .quota import FR, Quota, QuotaNode
from .workloads import ReservedInfo


def quotas_of(groups: tuple[ResourceGroup, ...]) -> dict[FR, Quota]:
    out: dict[FR, Quota] = {}
    for rg in groups:
        for fq in rg.flavors:
            for rq in fq.resources:
                out[(fq.name, rq.name)] = Quota(rq.nominal, rq.borrowing_limit, rq.lending_limit)
    return out


class CohortRuntime:
    __slots__ = ("name", "spec", "node", "blocked_parent")

    def __init__(self, name: str) -> None:
        self.name = name
        self.spec: Cohort | None = None  # None: implicit (only referenced by others)
        self.node = QuotaNode(name, is_cq=False)
        self.blocked_parent: str | None = None  # parent edge refused because it would close a cycle


class LocalQueueRuntime:
    __slots__ = ("key", "spec", "reserving", "admitted", "reserved_usage", "admitted_usage")

    def __init__(self, spec: LocalQueue) -> None:
        self.key = f"{spec.namespace}/{spec.name}"
        self.spec = spec
        self.reserving = 0
        self.admitted = 0
        self.reserved_usage: dict[FR, int] = {}
        self.admitted_usage: dict[FR, int] = {}

    @property
    def stopped(self) -> bool:
        return self.spec.stop_policy != "None"


class ClusterQueueRuntime:
    __slots__ = (
        "name",
        "spec",
        "node",
        "queue",
        "workloads",
        "admitted_usage",
        "admitted_count",
        "generation",
        "rg_by_resource",
        "flavor_names",
        "checks",
        "active",
        "active_reason",
        "active_message",
        "lqs",
        "status_layout",
        "flavor_groups",
        "rg_flavors",
    )

    def __init__(self, spec: ClusterQueue) -> None:
        self.name = spec.name
        self.spec = spec
        self.node = QuotaNode(spec.name, is_cq=True)
        self.queue = PendingQueue(strict_fifo=spec.queueing_strategy == "StrictFIFO")
        self.workloads: dict[str, ReservedInfo] = {}
        self.admitted_usage: dict[FR, int] = {}
        self.admitted_count = 0
        self.generation = 0
        self.rg_by_resource: dict[str, ResourceGroup] = {}
        self.flavor_names: tuple[str, ...] = ()
        # The flavor assigner's per-spec lookups, made once here rather than for every head:
        self.flavor_groups: dict[str, int] = {}  # flavor -> index of the first resource group listing it
        self.rg_flavors: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {}  # resource -> its group's
        # covered resources and flavor names (in the order the group lists them)
        self.checks: dict[str, frozenset[str]] = {}
        self.active = False
        self.active_reason = "Unknown"
        self.active_message = ""
        self.lqs: dict[str, None] = {}
        # per flavor, its resources (sorted) with their nominal quota: the shape of the status lists
        self.status_layout: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
        self.configure(spec)

    def configure(self, spec: ClusterQueue) -> bool:
        """Adopt a new spec; True when quotas or resource groups changed (the tree must be rebuilt)."""
        changed = (
            self.generation == 0
            or spec.resource_groups != self.spec.resource_groups
            or quotas_of(spec.resource_groups) != self.node.quotas
        )
        self.spec = spec
        self.node.quotas = quotas_of(spec.resource_groups)
        self.node.fair_weight = spec.fair_weight
        strict = spec.queueing_strategy == "StrictFIFO"
        if strict != self.queue.strict_fifo:
            self.queue.strict_fifo = strict
        self.rg_by_resource = {r: rg for rg in spec.resource_groups for r in rg.covered_resources}
        names: list[str] = []
        for rg in spec.resource_groups:
            for fq in rg.flavors:
                if fq.name not in names:
                    names.append(fq.name)
        self.flavor_names = tuple(names)
        groups: dict[str, int] = {}
        for i, rg in enumerate(spec.resource_groups):
            for fq in rg.flavors:
                groups.setdefault(fq.name, i)
        self.flavor_groups = groups
        self.rg_flavors = {r: (frozenset(rg.covered_resources), tuple(fq.name for fq in rg.flavors))
                           for r, rg in self.rg_by_resource.items()}
        quotas = self.node.quotas
        self.status_layout = tuple(
            (
                fq.name,
                tuple((r, quotas[(fq.name, r)].nominal if (fq.name, r) in quotas else 0)
                      for r in sorted(rg.covered_resources)),
            )
            for rg in spec.resource_groups
            for fq in rg.flavors
        )
        all_flavors = frozenset(names)
        self.checks = {
            rule.name: (frozenset(rule.on_flavors) if rule.on_flavors else all_flavors)
            for rule in spec.admission_checks
        }
        if changed:
            self.generation += 1
        return changed

    @property
    def stopped(self) -> bool:
        return self.spec.stop_policy != "None"

    def checks_for(self, flavors: set[str]) -> tuple[str, ...]:
        """Admission checks that apply to an admission using these flavors, sorted by name."""
        return tuple(sorted(name for name, fl in self.checks.items() if not fl.isdisjoint(flavors)))

    def add_admitted(self, info: ReservedInfo, sign: int) -> None:
        au = self.admitted_usage
        for fr, v in info.usage.items():
            au[fr] = au.get(fr, 0) + sign * v
        self.admitted_count += sign
