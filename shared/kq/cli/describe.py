"""`kq describe workload`: the current state with its reason, and the decisions that led there.

Pure rendering: the caller reads the workload from the mirror and the decisions from
KQ_EVENTS (kq.cli.busread) and passes `now`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from kq.cli.busread import HistoryEntry
from kq.cli.tables import Table, age, render
from kq.cli.views import workload_reason, workload_state
from kq.messages import (
    Decision,
    WorkloadAdmittedEvent,
    WorkloadEvictedEvent,
    WorkloadPendingEvent,
    WorkloadPreemptedEvent,
)


def _flavors(assignments: dict[str, dict[str, str]]) -> str:
    parts = []
    for podset in sorted(assignments):
        res = ", ".join(f"{r}={f}" for r, f in sorted(assignments[podset].items()))
        parts.append(f"{podset}: {res}")
    return "; ".join(parts)


def decision_summary(d: Decision) -> tuple[str, str]:
    """(what, details) of one decision."""
    match d:
        case WorkloadAdmittedEvent():
            how = f"{d.cluster_queue} ({_flavors(d.flavors)})" + (" borrowing" if d.borrowing else "")
            return "Admitted", f"{how}: {d.message}" if d.message else how
        case WorkloadPendingEvent():
            return "Pending", f"{d.reason}: {d.message}" if d.message else d.reason
        case WorkloadPreemptedEvent():
            return "Preempted", f"{d.reason} by {d.preemptor}: {d.message}"
        case WorkloadEvictedEvent():
            return "Evicted", f"{d.reason}: {d.message}"
    raise TypeError(f"unknown decision {type(d).__name__}")  # a new Decision type needs a line here


def _requests(podset: Any) -> str:
    per_pod: dict[str, str] = {}
    for ctr in podset.template.spec.containers:
        if ctr.resources is not None:
            for res, q in ctr.resources.requests.items():
                per_pod[res] = str(q) if res not in per_pod else f"{per_pod[res]}+{q}"
    inner = ", ".join(f"{k}: {v}" for k, v in sorted(per_pod.items()))
    return f"{podset.count} x {{{inner}}}"


def describe_workload(wl: Any, cluster: str, history: Sequence[HistoryEntry], now: datetime) -> str:
    meta, spec, status = wl.metadata, wl.spec, wl.status
    lines: list[tuple[str, str]] = [("Name", meta.name), ("Namespace", meta.namespace), ("Cluster", cluster)]
    owner = meta.controller_ref()
    if owner is not None:
        lines.append(("Owner", f"{owner.kind} {owner.name}"))
    lines.append(("Queue", spec.queue_name or "<none>"))
    if spec.priority is not None:
        lines.append(("Priority", str(spec.priority)))
    state = workload_state(wl)
    lines.append(("State", state))
    reason = workload_reason(wl)
    if reason is not None:
        lines.append(("Reason", f"{reason.reason}: {reason.message}" if reason.message else reason.reason))
    if status.admission is not None:
        fl = {psa.name: dict(psa.flavors) for psa in status.admission.pod_set_assignments}
        lines.append(("Reserved in", f"{status.admission.cluster_queue} ({_flavors(fl)})"))
    if status.cluster_name:
        lines.append(("Runs on", status.cluster_name))
    if status.requeue_state is not None and status.requeue_state.count:
        lines.append(("Requeued", f"{status.requeue_state.count} times"))
    lines.append(("Created", age(meta.creation_timestamp, now) + " ago"))
    width = max(len(k) for k, _ in lines) + 2
    out = [f"{k + ':':<{width}}{v}" for k, v in lines]
    out.append("Pod sets:")
    out += [f"  {ps.name}: {_requests(ps)}" for ps in spec.pod_sets] or ["  <none>"]
    out.append("Conditions:")
    if status.conditions:
        conditions: list[tuple[str, ...]] = [
            (x.type, x.status, x.reason, age(x.last_transition_time, now), x.message) for x in status.conditions
        ]
        table = Table(("TYPE", "STATUS", "REASON", "AGE", "MESSAGE"), conditions)
        out += ["  " + ln for ln in render(table).splitlines()]
    else:
        out.append("  <none>")
    out.append("Decisions:")
    if history:
        rows: list[tuple[str, ...]] = []
        for h in history:
            if h.decision is None:
                rows.append(("", "<unreadable>", h.error))
            else:
                what, details = decision_summary(h.decision)
                rows.append((age(h.decision.at, now), what, details))
        out += ["  " + ln for ln in render(Table(("AGE", "DECISION", "DETAILS"), rows)).splitlines()]
    else:
        out.append("  <none recorded>")
    return "\n".join(out) + "\n"
