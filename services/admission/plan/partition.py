"""One scheduler partition (a cluster) inside a leadership term: the core plus what the shell tracks.

Synchronous and clock-free (`now` is passed in), so the term's async code stays a thin loop:
records and markers from the mirror go in through `apply_record`/`apply_marker`, outcomes
through `on_outcome`, and `cycle(now)` runs the core and returns what to publish.

Besides the core the partition keeps:
- the sync markers seen, per kind (the term decides nothing before every kind is listed);
- each reserved Workload's admission exactly as stored, and each queue's generation and
  Active condition (outputs need them to write what the watcher compares field for field);
- the commands in flight, so an outcome can confirm or roll back what the core assumed;
- when queue statuses were last reported, and the pending conditions held back (pending_pacer.py):
  while busy both are written at most once per interval, so the watcher is not flooded;
- echo gates: a write of an older leader (seen in its outcome, with the resourceVersion it
  produced) that the mirror has not shown yet. The partition does not schedule until every
  such write is visible, so quota the old leader handed out is never handed out twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from kq.api import kueue as api
from kq.api.constants import TRACEPARENT_ANNOTATION
from kq.api.meta import find_condition
from kq.messages import WORKLOAD_COMMANDS, CommandOutcome
from kq.metric_updates import MetricUpdate
from kq.mirror import ObjectRecord, SyncMarker
from kq.placement import SolveReply, SolveRequest
from services.admission.core.decisions import CycleResult, PlacementRequest
from services.admission.core.model import SchedulerConfig
from services.admission.core.ownership import OwnsTree
from services.admission.core.state import SchedulerState
from services.admission.plan.inputs import NEEDED_KINDS, convert, workload_key
from services.admission.plan.metrics import Gauged, ReportedStatuses
from services.admission.plan.outputs import WRITER, Outputs, QueueFacts, Sent, api_admission, plan_outputs
from services.admission.plan.pending_pacer import PendingPacer
from services.admission.plan.placement import placement_answer, solve_request
from services.admission.plan.status_pacer import STATUS_ACTIONS, StatusPacer
from services.admission.plan.workload_record import WorkloadRecord


class LostLeadership(Exception):
    """The watcher refused a command of ours as coming from an older epoch: someone else leads."""


def _rv(v: str) -> int | None:
    return int(v) if v.isdigit() else None


class Partition:
    def __init__(self, cluster: str, epoch: int, config: SchedulerConfig, status_interval_s: float = 0.0,
                 pending_interval_s: float = 0.0, pending_in_flight: int | None = None, *, writer: str = WRITER,
                 owns: OwnsTree | None = None, status_in_flight: int | None = None, status_hold_s: float = 0.0) -> None:
        self.cluster = cluster
        self.writer = writer  # sharded admission: one writer per slot (services/admission/slots.py)
        self.on_tree_record: Callable[[], None] | None = None  # called after a ClusterQueue or Cohort record
        self.pacer = PendingPacer(pending_interval_s, pending_in_flight)
        # one status write in flight per queue, a few in all, each held a moment (see StatusPacer)
        self.status_pacer = StatusPacer(status_in_flight, status_hold_s)
        # Queue statuses are written whole: while busy, report them at most this often (Kueue
        # batches its ClusterQueue status updates too); pending changes are reported when due,
        # so statuses converge within this long once the scheduler goes idle.
        self.status_interval_s = status_interval_s
        self.status_reported_at = -math.inf
        self.gauged = Gauged()  # what this term's queue gauges were last reported from (metrics.py)
        self.reported = ReportedStatuses()  # queue statuses not yet in the gauges (built when scraped)
        self.epoch = epoch
        self.state = SchedulerState(config, owns)
        self.synced: set[str] = set()
        self.admissions: dict[str, api.Admission] = {}  # workload key -> status.admission while reserved
        self.queue_facts: dict[str, QueueFacts] = {}  # "cq/<name>" | "lq/<ns>/<name>"
        self.inflight: dict[str, Sent] = {}
        self.echo_gates: dict[str, int] = {}  # workload key -> resourceVersion an older leader's write made
        self.rebuilt = False  # the mirror replay has caught up (see mark_rebuilt)
        self.rounds = 0
        self.refusals = 0
        self.traceparents: dict[str, str] = {}  # workload key -> the trace it belongs to (kq.obs)
        self.asks: list[PlacementRequest] = []  # questions for the topology solver, not sent yet
        self.workload_seq = 0  # KQ_OBJECTS sequence of the newest Workload record applied (SolveRequest.as_of)

    # --- inputs ------------------------------------------------------------------------------------

    def apply_record(self, rec: ObjectRecord, seq: int = 0) -> None:
        """Fold one mirror record in (`seq`: its stream sequence). InputError/InvalidEvent: bad
        input, nothing changed."""
        event, obj = convert(rec)
        self.state.apply(event)
        if rec.kind == "workload":
            self.workload_seq = max(self.workload_seq, seq)
            key = workload_key(rec.namespace, rec.name)
            admission = obj.status.admission if isinstance(obj, WorkloadRecord) else None
            tp = obj.metadata.annotations.get(TRACEPARENT_ANNOTATION) if isinstance(obj, WorkloadRecord) else None
            if tp:
                self.traceparents[key] = tp
            else:
                self.traceparents.pop(key, None)
            if admission is not None:
                self.admissions[key] = admission
            else:
                self.admissions.pop(key, None)
            gate = self.echo_gates.get(key)
            rv = _rv(rec.resource_version)
            if gate is not None and (rec.deleted or rv is None or rv >= gate):
                del self.echo_gates[key]
        elif rec.kind in ("clusterqueue", "localqueue"):
            fkey = f"cq/{rec.name}" if rec.kind == "clusterqueue" else f"lq/{rec.namespace}/{rec.name}"
            if isinstance(obj, (api.ClusterQueue, api.LocalQueue)):
                self.queue_facts[fkey] = QueueFacts(obj.metadata.generation,
                                                    find_condition(obj.status.conditions, "Active"))
            else:
                self.queue_facts.pop(fkey, None)
        if self.on_tree_record is not None and rec.kind in ("clusterqueue", "cohort"):
            self.on_tree_record()

    def holds_quota(self, key: str) -> bool:
        """Does this workload hold quota (reserved or assumed) in a rebuilt state? Its records may
        be applied ahead of a replay backlog (Inputs.ahead)."""
        return self.rebuilt and key in self.state.reserved

    def apply_marker(self, marker: SyncMarker) -> None:
        if marker.kind in NEEDED_KINDS:
            self.synced.add(marker.kind)

    def missing_kinds(self) -> list[str]:
        return [k for k in NEEDED_KINDS if k not in self.synced]

    # --- outcomes ----------------------------------------------------------------------------------

    def on_outcome(self, out: CommandOutcome) -> bool:
        """Apply what the watcher did with a command; True when the core's state changed or a held
        status write can go out now.
        Raises LostLeadership when a command of this term was refused as stale, or a newer leader's
        command was executed."""
        if out.writer != self.writer:
            # Another admission slot's write (sharded): only ever gates, on our own workloads.
            if out.applied:
                self._gate_on_older_write(out)
            return False
        if out.epoch == self.epoch:
            sent = self.inflight.pop(out.command_id, None)
            if sent is None:
                return False
            woke = False
            if sent.action == "pending":
                self.pacer.settled()
            elif sent.action in STATUS_ACTIONS:
                self.status_pacer.settled(sent, out.applied)
                woke = self.status_pacer.has_ready()
            if not out.applied and out.reason == "StaleEpoch":
                raise LostLeadership(f"{self.cluster}: command {out.command_id} refused: epoch {self.epoch} is stale")
            if out.applied:
                if sent.action == "reserve":
                    self.state.admission_applied(sent.target, out.resource_version)
                return woke
            self.refusals += 1
            if sent.action == "reserve":
                self.state.forget(sent.target)
                return True
            if sent.action == "evict":
                self.state.forget_eviction(sent.target)
                return True
            return woke
        if out.epoch > self.epoch:
            # The watcher already took a command from a newer leader: ours would all be refused.
            raise LostLeadership(f"{self.cluster}: epoch {out.epoch} has written, this term is {self.epoch}")
        if out.applied:
            self._gate_on_older_write(out)
        return False

    def _gate_on_older_write(self, out: CommandOutcome) -> None:
        rv = _rv(out.resource_version)
        if rv is None or out.command not in WORKLOAD_COMMANDS or out.cluster != self.cluster:
            return
        key = workload_key(out.namespace, out.name)
        if self.rebuilt and not (self._unseen(key, rv) and self.state.owns_workload(key)):
            return
        self.echo_gates[key] = max(rv, self.echo_gates.get(key, 0))

    def _unseen(self, key: str, rv: int) -> bool:
        known = self.state.workloads.get(key)
        if known is None:
            # The old leader decided on a record the mirror held before this term began; if the
            # rebuilt state has nothing for the key, the workload is gone.
            return False
        seen = _rv(known.resource_version)
        return seen is None or seen < rv

    def mark_rebuilt(self) -> None:
        """The replay caught up: drop the gates the rebuilt state already satisfies (until now
        every older write was kept, the mirror not being read yet)."""
        self.rebuilt = True
        self.echo_gates = {k: rv for k, rv in self.echo_gates.items()
                           if self._unseen(k, rv) and self.state.owns_workload(k)}
        if self.on_tree_record is not None:  # the baseline of which trees are ours
            self.on_tree_record()

    # --- cycles ------------------------------------------------------------------------------------

    def _status_due(self, now: float) -> bool:
        return now >= self.status_reported_at + self.status_interval_s

    def wants_cycle(self, now: float) -> bool:
        if self.echo_gates:
            return False
        if self.state.has_scheduling_work(now):
            return True
        return self.state.has_status_changes() and self._status_due(now)

    def next_wakeup(self) -> float | None:
        """When to run a cycle or plan though no input came: a backoff ends, withheld statuses or
        held pending conditions are due."""
        at = self.pacer.next_due()
        lost = self.status_pacer.next_due()
        if lost is not None:
            at = lost if at is None else min(at, lost)
        if self.echo_gates:
            return at
        woken = self.state.next_wakeup()
        if woken is not None:
            at = woken if at is None else min(at, woken)
        if self.state.has_status_changes():
            due = self.status_reported_at + self.status_interval_s
            at = due if at is None else min(at, due)
        return at

    def _admission_of(self, key: str) -> api.Admission | None:
        stored = self.admissions.get(key)
        if stored is not None:
            return stored
        info = self.state.reserved.get(key)
        return None if info is None else api_admission(info.admission.cluster_queue, info.admission.pod_sets)

    def cycle(self, now: float) -> CycleResult:
        """One scheduling cycle of the core (admissions are assumed inside it); queue statuses
        come with it only when due (see status_interval_s)."""
        report = self._status_due(now)
        result = self.state.schedule(now, report_status=report)
        self.asks.extend(result.placements)
        if report:
            self.status_reported_at = now
        return result

    def plan(self, results: list[CycleResult], now: float) -> tuple[Outputs, list[str]]:
        """What to publish for consecutive cycles' results; the commands are registered as in flight."""
        self.rounds += 1
        results = self.status_pacer.pace(results, now)
        outputs, errors = plan_outputs(results, cluster=self.cluster, epoch=self.epoch, now=now, round_no=self.rounds,
                                       admission_of=self._admission_of, queue_facts=self.queue_facts,
                                       writer=self.writer)
        outputs = self.pacer.pace(outputs, now)
        self.inflight.update(outputs.sent)
        return outputs, errors

    def take_gauges(self) -> list[MetricUpdate]:
        """The queue gauges of the statuses reported since the last call (kq.metrics defer)."""
        return self.reported.take_gauges(self.state, self.gauged)

    def take_asks(self) -> list[tuple[PlacementRequest, SolveRequest]]:
        """The questions to send to the topology solver, as bus requests."""
        asks, self.asks = self.asks, []
        if not asks:
            return []  # every round asks: no pass over the reserved workloads for nothing
        uids = {k: r.uid for k, r in self.state.reserved.items()}
        return [(req, solve_request(self.cluster, req, uids, self.workload_seq)) for req in asks]

    def answer(self, req: PlacementRequest, reply: SolveReply, now: float) -> None:
        self.state.apply(placement_answer(req, reply, now))

    def has_due(self, now: float) -> bool:
        """Held pending conditions are due, or held statuses can go: plan (with no results) to send them."""
        lost = self.status_pacer.next_due()
        return self.pacer.has_due(now) or self.status_pacer.has_ready(now) or (lost is not None and lost <= now)
