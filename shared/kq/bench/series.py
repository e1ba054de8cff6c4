"""`kq bench --queue-series 10,100,1000,5000`: the cost of one admitted workload as the number of
ClusterQueues grows, the total workload count staying the same.

Each size is a live run (the whole stack, as `kq bench CONFIG`) of a generated configuration:
ClusterQueues in cohorts of ten, each with its LocalQueue and namespace, the workloads spread
evenly over the queues and created at one steady total rate over `window_s`, each queue's quota
ample for its share (the point is what a queue costs, not a backlog). The figure per service is
its CPU time from the moment the queues have settled (every ClusterQueue reported, the stack quiet:
their set-up is left out) to the end of the run, divided by the workloads admitted; the wall runs
from the first workload's creation. Flat across the sizes is the goal: per-record and per-cycle work
that grows with the number of queues shows up as a rising row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import msgspec

from kq.bench.config import BenchConfig, CohortSet, QueuesSet, WorkloadsSet, WorkloadTemplate
from kq.bench.metrics import RunLog

DEFAULT_SIZES = (10, 100, 1_000, 5_000)
DEFAULT_WORKLOADS = 10_000
QUEUES_PER_COHORT = 10
RUNTIME_MS = 200
WINDOW_S = 20.0
SETTLE_S = 180.0  # at most this long for the stack to go quiet after the queues' set-up


class SeriesError(ValueError):
    pass


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise SeriesError(f"--queue-series: {text!r} is not a comma-separated list of ClusterQueue counts") from None
    if not sizes or any(n < 1 for n in sizes):
        raise SeriesError(f"--queue-series: {text!r}: each size must be a whole number >= 1")
    return sizes


def series_config(queues: int, workloads: int, window_s: float = WINDOW_S) -> BenchConfig:
    """`queues` ClusterQueues (cohorts of up to ten) sharing `workloads` evenly (rounded up)."""
    if queues < 1 or workloads < 1:
        raise SeriesError("--queue-series needs at least one queue and one workload")
    per_queue = max(1, math.ceil(workloads / queues))
    interval_ms = max(1, int(window_s * 1000 / per_queue))
    # Quota for twice the queue's share of running work (request 1 cpu for RUNTIME_MS each).
    running = per_queue * RUNTIME_MS / (window_s * 1000)
    nominal = max(2, math.ceil(2 * running) + 1)
    template = WorkloadTemplate(class_name="small", runtime_ms=RUNTIME_MS, priority=50, request=1)
    cohorts = []
    full, rest = divmod(queues, QUEUES_PER_COHORT)
    for cls, count, size in (("c", full, QUEUES_PER_COHORT), ("r", 1 if rest else 0, rest)):
        if count == 0:
            continue
        cohorts.append(CohortSet(class_name=cls, count=count, queues_sets=(QueuesSet(
            class_name="q", count=size, nominal_quota=nominal, borrowing_limit=nominal,
            workloads_sets=(WorkloadsSet(count=per_queue, creation_interval_ms=interval_ms, workloads=(template,)),),
        ),)))
    return BenchConfig(cohorts=tuple(cohorts))


class SeriesRow(msgspec.Struct, frozen=True, kw_only=True):
    queues: int
    planned: int
    admitted: int
    finished: int
    wall_s: float | None
    timed_out: bool
    cpu_ms_per_workload: dict[str, float]  # process -> CPU ms per admitted workload (after the set-up)
    peak_rss_bytes: dict[str, int]
    cq_writes_per_workload: float = math.nan  # ClusterQueue watch events (status writes) after the set-up


def series_row(queues: int, planned: int, admitted: int, finished: int, wall_s: float | None, log: RunLog) -> SeriesRow:
    start = {p.name: p.cpu_ms for p in log.processes_at_start}
    per: dict[str, float] = {}
    for p in log.processes:
        used = p.cpu_ms - start.get(p.name, 0)
        per[p.name] = used / admitted if admitted else math.nan
    if log.processes:
        per["all"] = sum(per.values())
    writes = sum(1 for r in log.cq_reports if r.t_ms >= log.workloads_from_ms)
    return SeriesRow(queues=queues, planned=planned, admitted=admitted, finished=finished, wall_s=wall_s,
                     timed_out=log.timed_out, cpu_ms_per_workload=per,
                     peak_rss_bytes={p.name: p.max_rss_bytes for p in log.processes},
                     cq_writes_per_workload=writes / admitted if admitted else math.nan)


_SHOWN = ("admission", "watcher", "kubesim", "nats-server", "tas", "dispatcher", "podsready", "gc", "all")


def render_series(rows: Sequence[SeriesRow]) -> str:
    """A Markdown table: one row per size, CPU ms per admitted workload per process."""
    names = [n for n in _SHOWN if any(n in r.cpu_ms_per_workload for r in rows)]
    names += sorted({n for r in rows for n in r.cpu_ms_per_workload} - set(names))
    head = ["ClusterQueues", "workloads admitted", "wall", *[f"{n} ms/wl" for n in names], "peak RSS admission",
            "CQ status writes/wl"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        wall = "timed out" if r.timed_out else "-" if r.wall_s is None else f"{r.wall_s:.1f} s"
        cells = [f"{r.queues:,}", f"{r.admitted:,} / {r.planned:,}", wall]
        cells += [_ms(r.cpu_ms_per_workload.get(n)) for n in names]
        rss = r.peak_rss_bytes.get("admission")
        cells.append("-" if rss is None else f"{rss / (1 << 20):.0f} MiB")
        cells.append(_ms(r.cq_writes_per_workload))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ms(v: float | None) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:.2f}"


Run = Callable[[BenchConfig], tuple[RunLog, int, int, float | None]]  # -> (log, admitted, finished, wall_s)


def run_series(sizes: Sequence[int], workloads: int, run: Run, say: Callable[[str], None]) -> list[SeriesRow]:
    rows: list[SeriesRow] = []
    for n in sizes:
        cfg = series_config(n, workloads)
        planned = sum(qs.count * cs.count * sum(ws.count for ws in qs.workloads_sets)
                      for cs in cfg.cohorts for qs in cs.queues_sets)
        say(f"== {n} ClusterQueues, {planned} workloads")
        log, admitted, finished, wall_s = run(cfg)
        rows.append(series_row(n, planned, admitted, finished, wall_s, log))
        say(render_series(rows[-1:]).splitlines()[-1])
    return rows
