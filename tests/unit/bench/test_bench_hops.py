"""The loop's hops from a hand-made kubesim journal: each case states the records and the figures."""

from __future__ import annotations

import msgspec
import pytest

from kq.bench.generate import BenchPlan, QueuePlan, WorkloadPlan
from kq.bench.hops import WORKLOADS, Hop, HopFigures, hop_figures, render_hops

# Two cohorts: "co" with queues qa and qb, "other" with qc.
QA = QueuePlan(name="qa", class_name="cq", cohort="co", cohort_class="co", nominal_milli=1000, borrowing_limit_milli=None)
QB = QueuePlan(name="qb", class_name="cq", cohort="co", cohort_class="co", nominal_milli=1000, borrowing_limit_milli=None)
QC = QueuePlan(name="qc", class_name="cq", cohort="other", cohort_class="co", nominal_milli=1000,
               borrowing_limit_milli=None)


def _wl(i: int, q: QueuePlan, runtime_ms: int) -> WorkloadPlan:
    return WorkloadPlan(index=i, at_ms=0, namespace=q.name, name=f"w{i}", cluster_queue=q.name, class_name="small",
                        runtime_ms=runtime_ms, priority=0, request_milli=1000, pod_count=1)


W1, W2, W3, W4 = _wl(1, QA, 200), _wl(2, QB, 500), _wl(3, QA, 200), _wl(4, QC, 100)
PLAN = BenchPlan(flavor="rf", queues=(QA, QB, QC), cohorts=("co", "other"), workloads=(W1, W2, W3, W4))


def rec(t: float, w: WorkloadPlan, *conds: str, e: str = "MODIFIED", resource: str = WORKLOADS) -> bytes:
    """A journal line: `conds` are the conditions that are True (R: QuotaReserved, F: Finished, E: Evicted)."""
    names = {"R": "QuotaReserved", "F": "Finished", "E": "Evicted"}
    return msgspec.json.encode({
        "c": "manager", "rv": 1, "t": t, "e": e, "r": resource,
        "o": {"metadata": {"name": w.name, "namespace": w.namespace},
              "status": {"conditions": [{"type": names[c], "status": "True"} for c in conds]}},
    })


def hop(*ms: float) -> Hop:
    """The figures of these latencies (nearest-rank percentiles, as kq.bench.hops)."""
    if not ms:
        return Hop(count=0, p50_ms=0.0, p90_ms=0.0, mean_ms=0.0)
    xs = sorted(ms)
    return Hop(count=len(xs), p50_ms=xs[len(xs) // 2], p90_ms=xs[min(len(xs) - 1, int(0.9 * len(xs)))],
               mean_ms=sum(xs) / len(xs))


CASES = {
    "finish-then-the-cohorts-next-reservation": (
        [rec(0.0, W1, e="ADDED"), rec(0.0, W3, e="ADDED"), rec(0.1, W1, "R"),
         rec(0.35, W1, "R", "F"),  # held 250 ms for a 200 ms run; W3 waits in the same cohort
         rec(0.42, W3, "R"),  # 70 ms after the finish
         rec(0.7, W3, "R", "F")],  # 80 ms beyond its run; nothing waits: no freed hop
        HopFigures(held_beyond_runtime=hop(50.0, 80.0), freed_to_next_reservation=hop(70.0)),
    ),
    "another-cohorts-reservation-does-not-count": (
        [rec(0.0, W1, e="ADDED"), rec(0.0, W2, e="ADDED"), rec(0.0, W4, e="ADDED"), rec(0.1, W1, "R"),
         rec(0.3, W1, "R", "F"),  # W2 waits in "co"
         rec(0.32, W4, "R"),  # "other": not the freed quota's cohort
         rec(0.4, W2, "R")],
        HopFigures(held_beyond_runtime=hop(0.0), freed_to_next_reservation=hop(100.0)),
    ),
    "an-eviction-frees-quota-and-requeues": (
        [rec(0.0, W1, e="ADDED"), rec(0.0, W3, e="ADDED"), rec(0.1, W1, "R"),
         rec(0.2, W1, "R", "E"),  # evicted: frees quota (W3 waits), is not a finished run
         rec(0.25, W1, "E"),  # pending again
         rec(0.3, W3, "R")],
        HopFigures(held_beyond_runtime=hop(), freed_to_next_reservation=hop(100.0)),
    ),
    "other-resources-and-unplanned-workloads-skipped": (
        [rec(0.0, W1, e="ADDED"), rec(0.1, W1, "R"), rec(0.2, W1, "R", "F", resource="jobs.batch"),
         rec(0.3, WorkloadPlan(index=9, at_ms=0, namespace="qa", name="stranger", cluster_queue="qa",
                               class_name="small", runtime_ms=0, priority=0, request_milli=1, pod_count=1), "R"),
         rec(0.4, W1, "R", "F")],
        HopFigures(held_beyond_runtime=hop(100.0), freed_to_next_reservation=hop()),
    ),
}


def _close(a: HopFigures, b: HopFigures) -> bool:
    fields = ("count", "p50_ms", "p90_ms", "mean_ms")
    return all(getattr(getattr(a, h), f) == pytest.approx(getattr(getattr(b, h), f), abs=1e-6)
               for h in ("held_beyond_runtime", "freed_to_next_reservation") for f in fields)


@pytest.mark.parametrize("lines,want", CASES.values(), ids=CASES.keys())
def test_hops(lines: list[bytes], want: HopFigures) -> None:
    got = hop_figures(PLAN, lines)
    assert _close(got, want), got


def test_render_names_both_hops() -> None:
    text = render_hops(CASES["finish-then-the-cohorts-next-reservation"][1])
    assert "quota held beyond runtime" in text and "freed -> next reservation in the cohort" in text
