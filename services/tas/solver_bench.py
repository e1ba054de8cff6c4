"""Solver benchmark: Kueue-style placements on a generated topology, timed one by one.

`kq bench --solver [--nodes 10000 --levels 4 --workloads 5000 --seed 1]` runs it
(kq.bench.cli looks this module up by name: kq never imports services). The
workload stream is seeded, so two runs do the same work; a workload that does not
fit frees the oldest held ones and tries again, so the cluster stays busy.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections import deque
from dataclasses import dataclass

from services.tas.core import (
    HOSTNAME_LABEL,
    FlavorSpec,
    NodeInfo,
    Placement,
    PodSetRequest,
    TasSolver,
    TopologySpecIn,
)

__all__ = ["BenchResult", "build", "run", "main"]


@dataclass
class BenchResult:
    nodes: int
    levels: int
    placements: int
    failures: int
    seconds: float
    latencies_ms: list[float]  # wall time per decision
    cpu_ms: list[float]  # this process's CPU time per decision (robust on a shared machine)

    def summary(self) -> dict[str, float | int]:
        lat, cpu = sorted(self.latencies_ms), sorted(self.cpu_ms)

        def pct(values: list[float], q: float) -> float:
            return round(values[min(len(values) - 1, int(q * len(values)))], 3) if values else 0.0

        return {
            "nodes": self.nodes,
            "levels": self.levels,
            "decisions": len(lat),
            "placed": self.placements,
            "noFit": self.failures,
            "decisionsPerSecond": round(len(lat) / self.seconds, 1) if self.seconds else 0.0,
            "p50Ms": pct(lat, 0.50),
            "p99Ms": pct(lat, 0.99),
            "maxMs": round(lat[-1], 3) if lat else 0.0,
            "meanMs": round(statistics.fmean(lat), 3) if lat else 0.0,
            "cpuP50Ms": pct(cpu, 0.50),
            "cpuP99Ms": pct(cpu, 0.99),
        }


def level_labels(levels: int) -> tuple[str, ...]:
    return (*(f"bench.kq.io/level-{i}" for i in range(levels - 1)), HOSTNAME_LABEL)


def build(nodes: int, levels: int) -> TasSolver:
    """`nodes` nodes under `levels` levels (hostname last), about the same fan-out at every level."""
    labels = level_labels(levels)
    fan = max(2, round(nodes ** (1 / levels)))
    solver = TasSolver()
    solver.set_flavor(FlavorSpec(name="tas", topology=TopologySpecIn(name="bench", levels=labels),
                                 node_labels={"bench.kq.io/tas": "true"}))
    for i in range(nodes):
        values, rest = [], i // fan
        for _ in range(levels - 1):
            values.append(rest % fan)
            rest //= fan
        values.reverse()
        node_labels = {labels[k]: f"d{k}-{'-'.join(map(str, values[: k + 1]))}" for k in range(levels - 1)}
        node_labels[HOSTNAME_LABEL] = f"n{i:05d}"
        node_labels["bench.kq.io/tas"] = "true"
        solver.upsert_node(NodeInfo(name=f"n{i:05d}", labels=node_labels,
                                    allocatable={"cpu": 16000, "memory": 64 << 30, "pods": 110}))
    return solver


def _workload(rng: random.Random, i: int, labels: tuple[str, ...]) -> list[PodSetRequest]:
    count = rng.choice((1, 2, 2, 4, 4, 8, 8, 16, 32, 64))
    cpu = rng.choice((500, 1000, 2000, 4000))
    req = {"cpu": cpu, "memory": cpu << 20}
    kind = rng.random()
    upper = labels[max(0, len(labels) - 3)]
    rack = labels[-2] if len(labels) > 1 else labels[-1]
    if kind < 0.3:
        return [PodSetRequest(name="main", count=count, requests=req, mode="required", level=rack)]
    if kind < 0.6:
        return [PodSetRequest(name="main", count=count, requests=req, mode="preferred", level=rack)]
    if kind < 0.8:
        return [PodSetRequest(name="main", count=count, requests=req, mode="unconstrained")]
    if kind < 0.85:  # a leader + workers group (podset-group-name) in one rack
        return [PodSetRequest(name="workers", count=count, requests=req, mode="required", level=rack, group="g"),
                PodSetRequest(name="leader", count=1, requests={"cpu": 1000, "memory": 1 << 30}, mode="required",
                              level=rack, group="g")]
    size = 2 if count % 2 == 0 else 1
    return [PodSetRequest(name="main", count=count, requests=req, mode="required", level=upper,
                          slice_level=HOSTNAME_LABEL, slice_size=size)]


def run(nodes: int = 10_000, levels: int = 4, workloads: int = 5_000, seed: int = 1) -> BenchResult:
    solver = build(nodes, levels)
    gc.collect()
    gc.freeze()  # long-lived state out of the collector's way, as the service does after start-up
    labels = level_labels(levels)
    rng = random.Random(seed)
    held: deque[tuple[str, int]] = deque()
    latencies: list[float] = []
    cpu: list[float] = []
    placed = failed = 0
    start = time.perf_counter()
    for i in range(workloads):
        pod_sets = _workload(rng, i, labels)
        key = f"wl-{i}"
        for _attempt in range(5):
            t0, c0 = time.perf_counter(), time.process_time()
            outcome = solver.place_and_assume(key, "tas", pod_sets)
            latencies.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
            if isinstance(outcome, Placement):
                placed += 1
                held.append((key, sum(ps.count for ps in pod_sets)))
                break
            failed += 1
            freed = 0  # steady state: the oldest workloads finish until about as many pods are free
            while held and freed < 2 * sum(ps.count for ps in pod_sets):
                old, pods = held.popleft()
                solver.release(old)
                freed += pods
            solver.settle()  # what the service does after handling these finish events
    return BenchResult(nodes, levels, placed, failed, time.perf_counter() - start, latencies, cpu)


def main(nodes: int, levels: int, workloads: int, seed: int) -> int:
    if nodes < 1 or levels < 1 or workloads < 1:
        print("error: --nodes, --levels and --workloads must be >= 1")
        return 2
    t0 = time.perf_counter()
    result = run(nodes, levels, workloads, seed)
    print(f"solver benchmark: {nodes} nodes, {levels} levels, {workloads} workloads "
          f"(seed {seed}; decision = place + assume; finishes settled outside it; "
          f"setup+run {time.perf_counter() - t0:.1f}s)")
    for k, v in result.summary().items():
        print(f"  {k}: {v}")
    return 0
