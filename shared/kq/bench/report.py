"""The figures for people (a table with Kueue's reference figures and the physical limit beside
ours) and for programs (`--summary FILE`: Kueue's summary.yaml keys, then ours)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import yaml

from kq.bench.generate import BenchPlan
from kq.bench.metrics import Figures


class KueueReference(msgspec.Struct, frozen=True, kw_only=True):
    """Means of Kueue's calibration runs (its client writes at about 42 workloads/s)."""

    wall_s: float
    usage_percent: float
    time_to_admission_s: dict[str, str]  # workload class -> mean (a range where Kueue's classes split)


KUEUE_REFERENCE: dict[str, KueueReference] = {
    "baseline": KueueReference(wall_s=351.1, usage_percent=55.9,
                               time_to_admission_s={"large": "16.5", "medium": "76.8", "small": "215.5"}),
    "large-scale": KueueReference(wall_s=1179.4, usage_percent=38.6,
                                  time_to_admission_s={"large": "105.6", "medium": "256.4", "small": "700.4"}),
    "tas": KueueReference(wall_s=401.5, usage_percent=62.4,
                          time_to_admission_s={"large": "37.9-39.6", "medium": "106.3-107.1", "small": "237.8-246.8"}),
}


def reference_for(config_path: str | Path) -> KueueReference | None:
    """Kueue's figures for a configuration named like one of its own (baseline.yaml, ...)."""
    return KUEUE_REFERENCE.get(Path(config_path).stem)


def _s(ms: float | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f} s"


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _ref_tta(ref: KueueReference | None, cls: str) -> str:
    if ref is None:
        return ""
    for name, value in ref.time_to_admission_s.items():
        if cls == name or cls.startswith(f"{name}-"):
            return f"{value} s"
    return ""


def render(figures: Figures, plan: BenchPlan, *, config: str, mode_detail: str = "") -> str:
    f = figures
    ref = reference_for(config)
    cohorts = len(plan.cohorts)
    lines = [
        f"kq bench {config}  ({f.mode}{', ' + mode_detail if mode_detail else ''})",
        f"  {len(plan.queues)} ClusterQueues in {cohorts} cohorts; workloads: {f.expected} planned, "
        f"{f.created} created, {f.admitted} admitted, {f.finished} finished{'  (TIMED OUT)' if f.timed_out else ''}",
        "",
        f"  {'':34}{'kq':>14}{'Kueue':>14}{'physical limit':>17}",
    ]

    def row(label: str, ours: str, kueue: str = "", limit: str = "") -> None:
        lines.append(f"  {label:34}{ours:>14}{kueue:>14}{limit:>17}")

    row("wall", _s(f.wall_ms), f"{ref.wall_s:.1f} s" if ref else "", _s(f.physical_wall_ms))
    if f.mode == "live":
        row("  start-up / shutdown (apart)", f"{_s(f.startup_ms)} / {_s(f.shutdown_ms)}")
    for cls, c in f.cq_classes.items():
        row(f"usage, class {cls}", f"{c.usage_percent:.1f} %", f"{ref.usage_percent:.1f} %" if ref else "",
            f"{f.physical_usage_percent:.1f} %")
        row("  runtime-only work", f"{c.runtime_usage_percent:.1f} %")
        row("  admitted runs later preempted", f"{c.evicted_work_percent:.1f} %")
        row("  idle while work waited", f"{c.idle_while_pending_percent:.1f} %")
        row("  idle, nothing waiting", f"{c.idle_while_empty_percent:.1f} %")
    lines.append("  mean time to admission (API times; runner-observed)")
    for cls, w in f.wl_classes.items():
        ours = f"{w.average_time_to_admission_ms / 1000:.1f}; {w.average_observed_time_to_admission_ms / 1000:.1f} s"
        row(f"  {cls}", ours, _ref_tta(ref, cls))
    if len(f.phases) > 1:
        lines.append("  phases (each ends when its class's last workload finished; runner-observed)")
        for ph in f.phases:
            span = (ph.end_ms - ph.start_ms) / 1000
            rate = f"{ph.finished / span:,.0f}/s" if span > 0 else "-"
            lines.append(f"    {ph.start_ms / 1000:5.1f}-{ph.end_ms / 1000:5.1f} s  {ph.ends_with:10}"
                         f"{ph.finished:>8,} finished {rate:>9}   cpu held {ph.held_percent:5.1f} % of quota")
    ev = ", ".join(f"{cls} {w.total_evictions}" for cls, w in f.wl_classes.items())
    lines += [
        "",
        f"  evictions: {ev}",
        f"  dropped workload events: {f.dropped_events}",
        f"  over quota: {', '.join(f.over_quota) if f.over_quota else 'none'} "
        f"(peak cohort reservation {f.max_cohort_usage_percent:.1f} % of its quota)",
    ]
    if f.mode == "virtual":
        lines.append(f"  admission cycles: {f.cycles}")
    if f.processes:
        per = ", ".join(f"{p.name} {_bytes(p.max_rss_bytes)} / {p.cpu_ms / 1000:.1f} s cpu" for p in f.processes)
        lines.append(f"  peak memory (all processes): {_bytes(f.max_rss_bytes)}")
        lines.append(f"  per process (peak RSS / cpu): {per}")
    if f.runner is not None:
        lines.append(
            f"  {f.runner.name}: {_bytes(f.runner.max_rss_bytes)} peak RSS / {f.runner.cpu_ms / 1000:.1f} s cpu"
        )
    if f.cpu_ms_per_workload:
        per = ", ".join(f"{name} {ms:.2f}" for name, ms in f.cpu_ms_per_workload.items())
        driver = f.driver_cpu_ms_per_workload
        lines.append(f"  cpu ms per workload from the queues' creation on: {per}"
                     + (f"; the bench driver (not in all) {driver:.2f}" if driver is not None else ""))
    if ref is not None:
        lines.append("  Kueue: means of its calibration runs; its client writes to the API server at ~42 workloads/s")
    return "\n".join(lines)


def summary(figures: Figures) -> dict[str, Any]:
    """Kueue's summary keys (recorder.Summary), then kq's own."""
    f = figures
    wall = f.wall_ms
    doc: dict[str, Any] = {
        "clusterQueueClasses": {
            cls: {
                "cpuUsed": c.cpu_used,
                "cpuAverageUsage": c.cpu_average_usage,
                "nominalQuota": c.nominal_quota,
                "firstEventTime": c.first_event_ms,
                "lastEventTime": c.last_event_ms,
            }
            for cls, c in f.cq_classes.items()
        },
        "workloadClasses": {
            cls: {
                "count": w.count,
                "totalEvictions": w.total_evictions,
                "averageTimeToAdmissionMs": w.average_time_to_admission_ms,
                "averageTimeToFinishMs": w.average_time_to_finish_ms,
            }
            for cls, w in f.wl_classes.items()
        },
        "droppedWorkloadEvents": f.dropped_events,
        "cmdStats": {
            "wallMs": int(wall) if wall is not None else -1,
            "startupMs": int(f.startup_ms),
            "shutdownMs": int(f.shutdown_ms),
            "maxRssBytes": f.max_rss_bytes,
        },
        "usagePercent": {cls: round(c.usage_percent, 2) for cls, c in f.cq_classes.items()},
        "runtimeUsagePercent": {cls: round(c.runtime_usage_percent, 2) for cls, c in f.cq_classes.items()},
        "observedTimeToAdmissionMs": {cls: w.average_observed_time_to_admission_ms for cls, w in f.wl_classes.items()},
        "workloads": {"expected": f.expected, "created": f.created, "admitted": f.admitted, "finished": f.finished},
        "overQuotaClusterQueues": list(f.over_quota),
        "phases": [{"endsWith": ph.ends_with, "startMs": int(ph.start_ms), "endMs": int(ph.end_ms),
                    "finished": ph.finished, "heldPercent": round(ph.held_percent, 2)} for ph in f.phases],
        "mode": f.mode,
        "timedOut": f.timed_out,
    }
    return doc


SUMMARY_KEYS: Mapping[str, tuple[str, ...]] = {
    "clusterQueueClasses.*": ("cpuUsed", "cpuAverageUsage", "nominalQuota", "firstEventTime", "lastEventTime"),
    "workloadClasses.*": ("count", "totalEvictions", "averageTimeToAdmissionMs", "averageTimeToFinishMs"),
    "cmdStats": ("wallMs", "startupMs", "shutdownMs", "maxRssBytes"),
    "": ("droppedWorkloadEvents", "usagePercent", "runtimeUsagePercent"),
}


def missing_keys(doc: Mapping[str, Any]) -> list[str]:
    """The SUMMARY_KEYS a summary document lacks ("clusterQueueClasses (empty)" when it has no class)."""
    out: list[str] = []
    for where, names in SUMMARY_KEYS.items():
        if where.endswith(".*"):
            groups = doc.get(where[:-2]) or {}
            if not groups:
                out.append(f"{where[:-2]} (empty)")
            nodes = [(f"{where[:-2]}.{k}", v) for k, v in groups.items()]
        elif where:
            nodes = [(where, doc.get(where) or {})]
        else:
            nodes = [("(top)", doc)]
        out += [f"{path}.{n}" for path, node in nodes for n in names if n not in node]
    return out


def write_summary(figures: Figures, path: str | Path) -> None:
    text = yaml.safe_dump(summary(figures), sort_keys=False)
    Path(path).write_text(text)
