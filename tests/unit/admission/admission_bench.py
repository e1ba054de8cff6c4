"""The admission core alone through a scheduler-performance config (shared/bench/*.yaml), on a virtual clock.

    .venv/bin/python tests/unit/admission/admission_bench.py /work/shared/bench/baseline.yaml [--tick 0.01]

Workloads are created as the config says; an admitted workload finishes `runtimeMs` later; an
evicted one releases its quota on the next tick and runs its full runtime again when readmitted.
Prints admissions, preemptions, the virtual time to drain, the core's own CPU time and throughput,
and usage: admitted cpu-seconds over (summed nominal quota x virtual wall time).
Not a test: timing on a shared machine is too noisy to assert on.
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from pathlib import Path

import msgspec
import yaml

sys.path.insert(0, str(Path(__file__).parent))

from admission_builders import cq, flavor, lq

from services.admission.core import Admission, Namespace, PodSet, SchedulerState, Workload

replace = msgspec.structs.replace


def run(config: dict, tick: float) -> dict[str, float]:
    state = SchedulerState()
    state.apply(flavor("default"))
    arrivals: list[tuple[float, int, str, str, int, int, int]] = []
    nominal_total = 0
    seq = 0
    for c in config["cohorts"]:
        for ci in range(c["count"]):
            for qs in c["queuesSets"]:
                for qi in range(qs["count"]):
                    name = f"{c['className']}{ci}-{qs['className']}{qi}"
                    nominal_total += qs["nominalQuota"]
                    state.apply(Namespace(name=name))
                    state.apply(
                        cq(name)
                        .cohort(f"{c['className']}{ci}")
                        .flavor("default", cpu=(str(qs["nominalQuota"]), str(qs["borrowingLimit"])))
                        .preemption(within=qs["withinClusterQueue"], reclaim=qs["reclaimWithinCohort"])
                        .obj()
                    )
                    state.apply(lq(f"{name}/main", name))
                    for ws in qs["workloadsSets"]:
                        templates = ws["workloads"]
                        for k in range(ws["count"]):
                            t = templates[k % len(templates)]
                            seq += 1
                            arrivals.append(
                                (k * ws["creationIntervalMs"] / 1000, seq, name, t["className"], t["runtimeMs"], t["priority"], t["request"])
                            )
    arrivals.sort()
    records: dict[str, Workload] = {}
    rv = 0

    def apply(w: Workload) -> None:
        nonlocal rv
        rv += 1
        w = replace(w, resource_version=str(rv))
        records[w.key] = w
        state.apply(w)

    finishing: list[tuple[float, str, str]] = []
    running: dict[str, tuple[float, int]] = {}
    release: list[str] = []
    admitted = preempted = cycles = 0
    busy = core = 0.0
    now, i = 0.0, 0
    while True:
        while i < len(arrivals) and arrivals[i][0] <= now + 1e-9:
            t, s, ns, cls, runtime, prio, req = arrivals[i]
            i += 1
            apply(
                Workload(
                    namespace=ns, name=f"{cls}-{s}", uid=f"u{s}", queue_name="main", priority=prio, creation_time=t,
                    pod_sets=(PodSet(name="main", count=1, requests={"cpu": req * 1000}),), job_uid=str(runtime),
                )
            )
        while finishing and finishing[0][0] <= now + 1e-9:
            _, key, uid = heapq.heappop(finishing)
            w = records[key]
            if w.uid == uid and key in running and w.evicted_reason is None:
                start, cpu = running.pop(key)
                busy += (now - start) * cpu
                apply(replace(w, finished=True))
        for key in release:
            apply(replace(records[key], admission=None, admitted=False, quota_reserved_time=None))
        release = []
        c0 = time.perf_counter()
        while state.has_scheduling_work(now):
            r = state.schedule(now)
            cycles += 1
            for d in r.admissions:
                w = records[d.workload]
                apply(replace(w, admission=Admission(cluster_queue=d.cluster_queue, pod_sets=d.pod_sets),
                              quota_reserved_time=now, admitted=True, evicted_reason=None, evicted_time=None))
                admitted += 1
                running[w.key] = (now, w.pod_sets[0].requests["cpu"] // 1000)
                heapq.heappush(finishing, (now + int(w.job_uid) / 1000, w.key, w.uid))
            for p in r.preemptions:
                apply(replace(records[p.victim], evicted_reason="Preempted", evicted_time=now))
                start, cpu = running.pop(p.victim)
                busy += (now - start) * cpu
                release.append(p.victim)
                preempted += 1
            if r.preemptions:
                break  # victims release their quota on the next tick
        core += time.perf_counter() - c0
        if i >= len(arrivals) and not finishing and not state.pending and not state.reserved:
            break
        now = round(now + tick, 6)
    return {
        "workloads": len(arrivals),
        "admissions": admitted,
        "preemptions": preempted,
        "cycles": cycles,
        "virtual_wall_s": now,
        "core_cpu_s": round(core, 2),
        "admissions_per_core_s": round(admitted / core) if core else 0,
        "usage": round(busy / (nominal_total * now), 3) if now else 0,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--tick", type=float, default=0.01)
    args = ap.parse_args()
    result = run(yaml.safe_load(Path(args.config).read_text()), args.tick)
    print(yaml.safe_dump(result, sort_keys=False), end="")


if __name__ == "__main__":
    main()
