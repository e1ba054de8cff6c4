"""Evaluate a check: observed + expected -> failures (pure).

A field left out of a check is not checked. Maps (flavors, count, usage,
borrowed) are compared on the entries the check names; lists of topology
domains and nominated clusters are compared whole, in any order. A quantity
the ClusterQueue does not report counts as zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec import UNSET

from kq.quantity import parse_quantity
from kq.scenario.model import Check, ClusterQueueExpect, RemoteExpect, WorkloadExpect
from kq.scenario.observed import Observed, ObservedClusterQueue, ObservedRemote, ObservedWorkload

# (expectation attribute, name in messages), in the order failures are listed.
_WORKLOAD_SCALARS = (
    ("state", "state"),
    ("succeeded", "succeeded"),
    ("cluster_queue", "clusterQueue"),
    ("cluster", "cluster"),
    ("preempted", "preempted"),
    ("preemption_reason", "preemptionReason"),
    ("evictions", "evictions"),
    ("requeue_count", "requeueCount"),
)
_CQ_COUNTS = (
    ("admitted_workloads", "admittedWorkloads"),
    ("pending_workloads", "pendingWorkloads"),
    ("reserving_workloads", "reservingWorkloads"),
    ("active", "active"),
)


def _show(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    return str(v)


def evaluate(check: Check, observed: Observed) -> list[str]:
    failures: list[str] = []
    for key, want in check.workloads.items():
        failures += workload_failures(key, want, observed.workloads.get(key))
    for name, want_cq in check.cluster_queues.items():
        failures += cluster_queue_failures(name, want_cq, observed.cluster_queues.get(name))
    for cluster, want_remote in check.remote.items():
        failures += remote_failures(cluster, want_remote, observed.remote.get(cluster))
    return failures


def workload_failures(key: str, want: WorkloadExpect, got: ObservedWorkload | None) -> list[str]:
    if got is None:
        return [f"{key}: no such workload (neither a Workload nor a Job's Workload of that name)"]
    out: list[str] = []
    for attr, label in _WORKLOAD_SCALARS:
        w = getattr(want, attr)
        if w is not UNSET and w != getattr(got, attr):
            out.append(f"{key}: {label} {_show(getattr(got, attr))}, want {_show(w)}")
    if want.nominated_clusters is not UNSET:
        g = sorted(got.nominated_clusters or ())
        if g != sorted(want.nominated_clusters):
            out.append(f"{key}: nominatedClusters {_show(g)}, want {_show(sorted(want.nominated_clusters))}")
    if want.flavors is not UNSET:
        for podset, resources in sorted(want.flavors.items()):
            have = (got.flavors or {}).get(podset, {})
            for res, flavor in sorted(resources.items()):
                if have.get(res) != flavor:
                    out.append(f"{key}: flavors {podset}.{res} {_show(have.get(res))}, want {flavor}")
    if want.count is not UNSET:
        for podset, n in sorted(want.count.items()):
            have_n = (got.count or {}).get(podset)
            if have_n != n:
                out.append(f"{key}: count {podset} {_show(have_n)}, want {n}")
    if want.topology is not UNSET:
        for podset, domains in sorted(want.topology.items()):
            have_doms = sorted((d.values, d.count) for d in (got.topology or {}).get(podset, ()))
            want_doms = sorted((d.values, d.count) for d in domains)
            if have_doms != want_doms:
                out.append(f"{key}: topology {podset} {_domains(have_doms)}, want {_domains(want_doms)}")
    if want.message is not UNSET and want.message.lower() not in (got.message or "").lower():
        out.append(f"{key}: message {got.message!r} does not contain {want.message!r}")
    return out


def _domains(doms: list[tuple[tuple[str, ...], int]]) -> str:
    return "[" + ", ".join(f"{'/'.join(v)}={n}" for v, n in doms) + "]" if doms else "none"


def cluster_queue_failures(name: str, want: ClusterQueueExpect, got: ObservedClusterQueue | None) -> list[str]:
    if got is None:
        return [f"clusterQueue {name}: no such ClusterQueue"]
    out: list[str] = []
    for attr, label in _CQ_COUNTS:
        w = getattr(want, attr)
        if w is not UNSET and w != getattr(got, attr):
            out.append(f"clusterQueue {name}: {label} {_show(getattr(got, attr))}, want {_show(w)}")
    for attr in ("usage", "borrowed"):
        w = getattr(want, attr)
        if w is not UNSET:
            out += _quantity_failures(f"clusterQueue {name}: {attr}", w, getattr(got, attr))
    return out


def _quantity_failures(
    prefix: str, want: Mapping[str, Mapping[str, str]], got: Mapping[str, Mapping[str, str]]
) -> list[str]:
    out: list[str] = []
    for flavor, resources in sorted(want.items()):
        for res, qty in sorted(resources.items()):
            have = got.get(flavor, {}).get(res, "0")
            if parse_quantity(have) != parse_quantity(qty):
                out.append(f"{prefix} {flavor}.{res} {have}, want {qty}")
    return out


def remote_failures(cluster: str, want: RemoteExpect, got: ObservedRemote | None) -> list[str]:
    present = set(got.present) if got is not None else set()
    out = [f"{cluster}: {o.label()} present, want absent" for o in want.absent if o.label() in present]
    out += [f"{cluster}: {o.label()} absent, want present" for o in want.present if o.label() not in present]
    return out
