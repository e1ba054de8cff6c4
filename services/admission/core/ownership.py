"""Sharded admission: which cohort trees this core decides for. Pure.

Admission can be split into `shards` slots; a slot owns whole cohort trees, keyed by the name of
the tree's root (the root cohort, or the ClusterQueue itself when it has no cohort). Quota never
crosses trees (preemption and borrowing stay within one), so a core that decides only for its own
trees decides exactly what one core deciding for everything would have decided for them.

The core keeps the whole state (every tree is applied as usual: a tree may become ours after a
cohort edit), and this filter keeps it from *deciding* for trees it does not own:

- heads are taken only from owned ClusterQueues (so admissions and preemptions are ours only);
- queue statuses, pending conditions, evictions, deactivations and checks-ready admissions are
  reported only for owned queues and the workloads in them.

A workload belongs to the ClusterQueue it holds quota in, else to its LocalQueue's ClusterQueue.
A name that resolves to no ClusterQueue is its own root (a LocalQueue pointing at a missing
ClusterQueue reports through the slot that queue would have); a workload whose LocalQueue is
unknown belongs to the root "" (exactly one slot reports its pending condition).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import msgspec

from .decisions import CycleResult
from .parts import Parts

# Does this core decide for the tree whose root has this name?
OwnsTree = Callable[[str], bool]

NO_QUEUE_ROOT = ""


def slot_of(cluster: str, root: str, shards: int) -> int:
    """The slot of a cohort tree: a hash stable across processes and versions (not Python's hash)."""
    if shards <= 1:
        return 0
    digest = hashlib.blake2b(f"{cluster}\x00{root}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def root_of_cq(p: Parts, cq_name: str) -> str:
    cq = p.tree.cqs.get(cq_name)
    return cq.node.root().name if cq is not None else cq_name


def cq_of_lq(p: Parts, lq_key: str) -> str | None:
    lq = p.tree.lqs.get(lq_key)
    return lq.spec.cluster_queue if lq is not None else None


def cq_of_workload(p: Parts, key: str) -> str | None:
    """The ClusterQueue a workload holds quota in, else the one its LocalQueue points at."""
    reserved = p.book.reserved.get(key)
    if reserved is not None:
        return reserved.cq
    w = p.book.workloads.get(key)
    if w is None:
        return None
    return cq_of_lq(p, f"{w.namespace}/{w.queue_name}")


def owns_cq(p: Parts, cq_name: str) -> bool:
    return p.owns is None or p.owns(root_of_cq(p, cq_name))


def owns_lq(p: Parts, lq_key: str) -> bool:
    if p.owns is None:
        return True
    cq = cq_of_lq(p, lq_key)
    return p.owns(NO_QUEUE_ROOT if cq is None else root_of_cq(p, cq))


def owns_workload(p: Parts, key: str) -> bool:
    if p.owns is None:
        return True
    cq = cq_of_workload(p, key)
    return p.owns(NO_QUEUE_ROOT if cq is None else root_of_cq(p, cq))


def owned_result(p: Parts, result: CycleResult) -> CycleResult:
    """The part of a cycle's result this core reports (heads were already only ours)."""
    if p.owns is None:
        return result
    return msgspec.structs.replace(
        result,
        evictions=tuple(d for d in result.evictions if owns_workload(p, d.workload)),
        deactivations=tuple(d for d in result.deactivations if owns_workload(p, d.workload)),
        checks_ready=tuple(d for d in result.checks_ready if owns_workload(p, d.workload)),
        pending=tuple(d for d in result.pending if owns_workload(p, d.workload)),
        # TAS node-failure repairs are asked for reserved workloads, whichever slot owns them
        placements=tuple(d for d in result.placements if owns_workload(p, d.workload)),
        repairs=tuple(d for d in result.repairs if owns_workload(p, d.workload)),
    )
