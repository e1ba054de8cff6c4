"""A fake shell + watcher around the core, with a virtual clock, for unit tests.

It applies decisions back as the mirror would show them: an admission sets status.admission,
an eviction, preemption or deactivation marks the workload Evicted (still holding quota) and,
one step later, the quota is released, as the job integration does once the job stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec

from services.admission.core import (
    Admission,
    CycleResult,
    Deleted,
    Event,
    SchedulerConfig,
    SchedulerState,
    Workload,
)
from services.admission.core.decisions import (
    AdmissionDecision,
    ClusterQueueStatus,
    EvictionDecision,
    LocalQueueStatus,
    PendingDecision,
    PreemptionDecision,
)
from services.admission.core.model import AdmissionCheckState

replace = msgspec.structs.replace


class World:
    def __init__(self, *objects: Event, config: SchedulerConfig | None = None,
                 owns: Callable[[str], bool] | None = None) -> None:
        self.state = SchedulerState(config, owns)
        self._rv = 0
        self.records: dict[str, Workload] = {}
        self.evictions: dict[str, int] = {}
        self.preemption_reasons: dict[str, str] = {}
        self.messages: dict[str, str] = {}
        self.reasons: dict[str, str] = {}
        self.cq_status: dict[str, ClusterQueueStatus] = {}
        self.lq_status: dict[str, LocalQueueStatus] = {}
        self.results: list[CycleResult] = []
        self._to_release: list[str] = []
        self.now = 0.0
        for o in objects:
            self.apply(o)

    # --- feeding events ------------------------------------------------------------------------

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def apply(self, obj: Event) -> None:
        if isinstance(obj, Workload):
            obj = replace(obj, resource_version=self._next_rv())
            self.records[obj.key] = obj
        self.state.apply(obj)

    def update(self, key: str, **changes: object) -> Workload:
        w = replace(self.records[key], **changes)
        self.apply(w)
        return self.records[key]

    def finish(self, key: str) -> None:
        self.update(key, finished=True)

    def delete(self, key: str) -> None:
        ns, name = key.split("/")
        self.records.pop(key, None)
        self.state.apply(Deleted(kind="Workload", namespace=ns, name=name))

    def set_checks(self, key: str, **states: str) -> None:
        current = {c.name: c for c in self.records[key].admission_checks}
        for name, s in states.items():
            current[name] = AdmissionCheckState(name=name, state=s)  # type: ignore[arg-type]  # tests name check states as plain strings
        self.update(key, admission_checks=tuple(current[n] for n in sorted(current)))

    # --- running cycles --------------------------------------------------------------------------

    def step(self, now: float | None = None, echo: bool = True) -> CycleResult:
        if now is not None:
            self.now = now
        r = self.state.schedule(self.now)
        self.results.append(r)
        for p in r.pending:
            self.messages[p.workload] = p.message
            self.reasons[p.workload] = p.reason
        for s in r.cluster_queues:
            self.cq_status[s.name] = s
        for ls in r.local_queues:
            self.lq_status[f"{ls.namespace}/{ls.name}"] = ls
        if echo:
            self.echo(r)
        return r

    def echo(self, r: CycleResult) -> None:
        """What the watcher and Kueue's controllers would write back for these decisions."""
        for d in r.admissions:
            self.update(
                d.workload,
                admission=Admission(cluster_queue=d.cluster_queue, pod_sets=d.pod_sets),
                quota_reserved_time=self.now,
                admitted=d.admitted,
                admitted_time=self.now if d.admitted else None,
                evicted_reason=None,
                evicted_time=None,
                admission_checks=tuple(AdmissionCheckState(name=c) for c in d.admission_checks),
            )
            self.messages[d.workload] = d.message
        for c in r.checks_ready:
            self.update(c.workload, admitted=True, admitted_time=self.now)
        for p in r.preemptions:
            self.evictions[p.victim] = self.evictions.get(p.victim, 0) + 1
            self.preemption_reasons[p.victim] = p.reason
            self.update(p.victim, evicted_reason="Preempted", evicted_time=self.now)
            self._to_release.append(p.victim)
        for e in r.evictions:
            self.evictions[e.workload] = self.evictions.get(e.workload, 0) + 1
            self.update(e.workload, evicted_reason=e.reason, evicted_time=self.now)
            self._to_release.append(e.workload)
        for deact in r.deactivations:  # the watcher: spec.active=false, then Evicted; quota released later
            self.update(deact.workload, active=False)
            self.update(deact.workload, evicted_reason=deact.reason, evicted_time=self.now)
            if self.records[deact.workload].admission is not None:
                self._to_release.append(deact.workload)

    def release(self) -> None:
        """The workload controller clears the admission of evicted workloads."""
        keys, self._to_release = self._to_release, []
        for key in keys:
            if key in self.records:
                rec = self.records[key]
                ran = int(self.now - rec.admitted_time) if rec.admitted and rec.admitted_time is not None else 0
                self.update(
                    key,
                    admission=None,
                    admitted=False,
                    admitted_time=None,
                    past_execution_s=rec.past_execution_s + ran,
                    quota_reserved_time=None,
                    admission_checks=tuple(AdmissionCheckState(name=c.name) for c in self.records[key].admission_checks),
                )

    def settle(self, now: float | None = None, limit: int = 200, strict: bool = True) -> bool:
        """Run cycles (releasing evicted quota in between) until nothing is left to do.

        Returns whether it settled; with strict, not settling within `limit` cycles is an error
        (preemption can legitimately chase itself under some policies: property tests pass False).
        """
        if now is not None:
            self.now = now
        for _ in range(limit):
            if not self.state.has_work(self.now) and not self._to_release:
                return True
            self.step()
            self.release()
        if strict:
            raise AssertionError(f"did not settle in {limit} cycles")
        return False

    # --- observing ------------------------------------------------------------------------------

    def status(self, key: str) -> str:
        w = self.records[key]
        if w.finished:
            return "finished"
        if not w.active:
            return "deactivated"
        if w.admission is not None:
            return "admitted" if w.admitted else "quotaReserved"
        return "pending"

    def statuses(self, keys: Iterable[str]) -> dict[str, str]:
        return {k: self.status(k) for k in keys}

    def flavors(self, key: str) -> dict[str, dict[str, str]]:
        a = self.records[key].admission
        return {} if a is None else {p.name: dict(p.flavors) for p in a.pod_sets}

    def counts(self, key: str) -> dict[str, int]:
        a = self.records[key].admission
        return {} if a is None else {p.name: p.count for p in a.pod_sets}

    def cluster_queue(self, key: str) -> str | None:
        a = self.records[key].admission
        return None if a is None else a.cluster_queue

    def all_decisions(self) -> list[AdmissionDecision | PreemptionDecision | EvictionDecision | PendingDecision]:
        out: list[AdmissionDecision | PreemptionDecision | EvictionDecision | PendingDecision] = []
        for r in self.results:
            out.extend(r.admissions)
            out.extend(r.preemptions)
            out.extend(r.evictions)
            out.extend(r.pending)
        return out


def world(*objects: Event, config: SchedulerConfig | None = None, flavors: Iterable[str] = ("default",),
          owns: Callable[[str], bool] | None = None) -> World:
    """A World with namespace "default", the given flavors, the objects, and one LocalQueue
    "default/<cq>" per ClusterQueue (so `wl(...).queue("<cq>")` submits to that queue)."""
    from admission_builders import flavor, lq

    from services.admission.core import ClusterQueue, Namespace, ResourceFlavor

    given_flavors = {o.name for o in objects if isinstance(o, ResourceFlavor)}
    pre: list[Event] = [Namespace(name="default")]
    pre += [flavor(f) for f in flavors if f not in given_flavors]
    post: list[Event] = [lq(f"default/{o.name}", o.name) for o in objects if isinstance(o, ClusterQueue)]
    return World(*pre, *objects, *post, config=config, owns=owns)
