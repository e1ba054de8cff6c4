"""Where quota time goes around each run, from kubesim's journal (`kq bench --journal FILE`: every
committed Workload change with its commit time, in commit order).

- *held beyond runtime*: QuotaReserved -> Finished, less the workload's runtimeMs: the runner seeing
  the admission through its watch and patching the finish (Kueue's runner does the same);
- *freed -> next reservation*: a finish or an eviction in a cohort -> the cohort's next reservation,
  counted only while the cohort had a workload pending: the loop through the watcher, the bus and
  admission back to the API (whether the pending workload fitted is the decisions' business, not
  timed here).

Pure: records in, figures out (the caller reads the file).
"""

from __future__ import annotations

from collections.abc import Iterable
from statistics import mean
from typing import Any

import msgspec

from kq.bench.generate import BenchPlan
from kq.chaos.check import WORKLOADS, decode_record  # the journal's records, as `kq chaos` reads them


class Hop(msgspec.Struct, frozen=True):
    count: int
    p50_ms: float
    p90_ms: float
    mean_ms: float


class HopFigures(msgspec.Struct, frozen=True):
    held_beyond_runtime: Hop
    freed_to_next_reservation: Hop


def _hop(seconds: list[float]) -> Hop:
    if not seconds:
        return Hop(count=0, p50_ms=0.0, p90_ms=0.0, mean_ms=0.0)
    xs = sorted(seconds)
    at = lambda p: 1000.0 * xs[min(len(xs) - 1, int(p * len(xs)))]  # noqa: E731
    return Hop(count=len(xs), p50_ms=at(0.5), p90_ms=at(0.9), mean_ms=1000.0 * mean(xs))


def _true(conditions: list[dict[str, Any]], type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions)


def hop_figures(plan: BenchPlan, lines: Iterable[bytes]) -> HopFigures:
    """`lines`: the journal's, in file order. Records of other resources and of workloads not in the
    plan are skipped."""
    cohort_of = {q.name: q.cohort for q in plan.queues}
    planned = {f"{w.namespace}/{w.name}": (cohort_of[w.cluster_queue], w.runtime_ms / 1000.0) for w in plan.workloads}
    holding: dict[str, float] = {}  # workload -> when it reserved (while it holds quota)
    pending: dict[str, set[str]] = {}  # cohort -> workloads waiting for quota
    freed: dict[str, list[float]] = {}  # cohort -> frees not yet followed by a reservation
    held: list[float] = []
    to_next: list[float] = []
    for line in lines:
        rec = decode_record(line)
        if rec.r != WORKLOADS:
            continue
        meta = rec.o.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        known = planned.get(key)
        if known is None:
            continue
        cohort, runtime_s = known
        conds = (rec.o.get("status") or {}).get("conditions") or []
        finished = _true(conds, "Finished")
        reserved = (rec.e != "DELETED" and _true(conds, "QuotaReserved") and not finished
                    and not _true(conds, "Evicted"))
        waiting = pending.setdefault(cohort, set())
        since = holding.get(key)
        if reserved and since is None:
            holding[key] = rec.t
            waiting.discard(key)
            for t in freed.pop(cohort, ()):
                to_next.append(rec.t - t)
        elif not reserved and since is not None:
            del holding[key]
            if finished:
                held.append(rec.t - since - runtime_s)
            if waiting:
                freed.setdefault(cohort, []).append(rec.t)
        if not reserved and not finished and rec.e != "DELETED":
            waiting.add(key)
        else:
            waiting.discard(key)
    return HopFigures(held_beyond_runtime=_hop(held), freed_to_next_reservation=_hop(to_next))


def render_hops(f: HopFigures) -> str:
    rows = [("quota held beyond runtime", f.held_beyond_runtime),
            ("freed -> next reservation in the cohort", f.freed_to_next_reservation)]
    out = ["  from the journal (API commit times): p50 / p90 / mean ms"]
    out += [f"    {name:<42} {h.p50_ms:7.0f} {h.p90_ms:7.0f} {h.mean_ms:7.0f}   ({h.count})" for name, h in rows]
    return "\n".join(out)
