"""Admission's part of one trace per workload (kq.obs): a span for each workload a round of cycles
decided something about, in the trace the workload carries, with what was decided and why; the
commands about that workload carry the span as their parent, so the watcher's writes join it."""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry.trace import Span, Tracer

from kq.messages import RecordEvent
from kq.obs import extract_context, headers_for
from services.admission.core.decisions import CycleResult
from services.admission.plan.outputs import Outgoing


def _decided(results: Iterable[CycleResult]) -> dict[str, tuple[str, str]]:
    """workload key -> (decision, reason), the last of the round."""
    out: dict[str, tuple[str, str]] = {}
    for r in results:
        for q in r.pending:
            out[q.workload] = ("Pending", q.reason)
        for a in r.admissions:
            out[a.workload] = ("Admitted" if a.admitted else "QuotaReserved", a.cluster_queue)
        for c in r.checks_ready:
            out[c.workload] = ("Admitted", "AdmissionChecksReady")
        for p in r.preemptions:
            out[p.victim] = ("Preempted", p.reason)
        for e in r.evictions:
            out[e.workload] = ("Evicted", e.reason)
        for x in r.deactivations:
            out[x.workload] = ("Deactivated", x.reason)
    return out


def _about(o: Outgoing) -> str | None:
    m = o.message
    if isinstance(m, RecordEvent):
        return f"{m.involved.namespace}/{m.involved.name}" if m.involved.kind == "Workload" else None
    ns, name = getattr(m, "namespace", None), getattr(m, "name", None)
    return f"{ns}/{name}" if ns is not None and name is not None and hasattr(m, "uid") else None


def trace_decisions(tracer: Tracer, cluster: str, traceparents: dict[str, str], results: list[CycleResult],
                    commands: list[Outgoing]) -> list[Outgoing]:
    """The commands, those about a traced workload carrying its decision span."""
    decided = _decided(results)
    spans: dict[str, Span] = {}
    out: list[Outgoing] = []
    for o in commands:
        key = _about(o)
        tp = traceparents.get(key) if key is not None else None
        if key is None or tp is None or key not in decided:
            out.append(o)
            continue
        span = spans.get(key)
        if span is None:
            what, why = decided[key]
            span = spans[key] = tracer.start_span(
                f"admission.decide {what}", context=extract_context({"traceparent": tp}),
                attributes={"kq.cluster": cluster, "kq.workload": key, "kq.decision": what, "kq.reason": why})
            span.end()
        out.append(o._replace(headers=headers_for(span)))
    return out
