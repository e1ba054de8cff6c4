"""What one call of `SchedulerState.schedule(now)` decided: frozen records with reasons.

The shell turns these into bus commands; every record carries a deterministic `id`
(derived from the workload uid, its resourceVersion and a per-workload decision counter)
to be used as the JetStream message id.
"""

from __future__ import annotations

import msgspec

from kq.api.workload import PodSetTopologyRequest

from .model import PodSetAssignment, Toleration


class _Out(msgspec.Struct, frozen=True, kw_only=True):
    pass


class AdmissionDecision(_Out, frozen=True, kw_only=True):
    """Reserve quota for a workload. `admitted` is False while admission checks are outstanding."""

    id: str
    workload: str  # namespace/name
    uid: str
    resource_version: str
    cluster_queue: str
    pod_sets: tuple[PodSetAssignment, ...]
    borrowing: bool
    admission_checks: tuple[str, ...]  # checks the workload must pass (their states start Pending)
    admitted: bool
    message: str


class TopologyRepair(_Out, frozen=True, kw_only=True):
    """TAS node failure: the same admission with the failed node replaced in its pod sets'
    topology assignments (status.unhealthyNodes cleared)."""

    id: str
    workload: str
    uid: str
    cluster_queue: str
    pod_sets: tuple[PodSetAssignment, ...]
    admitted: bool
    node: str  # the failed node replaced


class PreemptionDecision(_Out, frozen=True, kw_only=True):
    id: str
    victim: str
    victim_uid: str
    victim_cluster_queue: str
    preemptor: str
    preemptor_uid: str
    reason: str  # InClusterQueue | InCohortReclamation | InCohortFairSharing | InCohortReclaimWhileBorrowing
    message: str


class EvictionDecision(_Out, frozen=True, kw_only=True):
    """Evict for a reason other than preemption: AdmissionCheck, ClusterQueueStopped, LocalQueueStopped."""

    id: str
    workload: str
    uid: str
    reason: str
    message: str


class DeactivationDecision(_Out, frozen=True, kw_only=True):
    """Set spec.active=false (an admission check rejected the workload)."""

    id: str
    workload: str
    uid: str
    reason: str
    message: str


class ChecksReadyDecision(_Out, frozen=True, kw_only=True):
    """Every admission check is Ready: set Admitted=True on a workload that already reserves quota."""

    id: str
    workload: str
    uid: str
    cluster_queue: str
    message: str
    # Admitted=True is already written: the watcher sets it with the last check's Ready (a MultiKueue
    # check, services/watcher/core/mk_commands.py); only its Event and metrics are left to do.
    written: bool = False


class PendingDecision(_Out, frozen=True, kw_only=True):
    """Why a workload is not admitted (QuotaReserved=False). Only emitted when it changed.

    `reason` is Kueue's granular reason (WaitingForQuota, Misconfigured, ...); Kueue with its default
    feature gates writes the condition reason "Pending" and this message.
    """

    id: str
    workload: str
    uid: str
    reason: str
    message: str


class ResourceUsage(_Out, frozen=True, kw_only=True):
    name: str
    total: int
    borrowed: int = 0


class FlavorUsage(_Out, frozen=True, kw_only=True):
    name: str
    resources: tuple[ResourceUsage, ...]


class ClusterQueueStatus(_Out, frozen=True, kw_only=True):
    name: str
    pending_workloads: int
    reserving_workloads: int
    admitted_workloads: int
    flavors_reservation: tuple[FlavorUsage, ...]
    flavors_usage: tuple[FlavorUsage, ...]
    active: bool
    active_reason: str  # Ready | Stopped | FlavorNotFound | AdmissionCheckNotFound | ...
    active_message: str
    weighted_share: float | None = None  # fair sharing only; inf when weight 0 and borrowing


class LocalQueueStatus(_Out, frozen=True, kw_only=True):
    namespace: str
    name: str
    pending_workloads: int
    reserving_workloads: int
    admitted_workloads: int
    flavors_reservation: tuple[FlavorUsage, ...]  # totals only (borrowed is always 0)
    flavors_usage: tuple[FlavorUsage, ...]
    active: bool
    active_reason: str
    active_message: str


class PodSetAsk(_Out, frozen=True, kw_only=True):
    name: str
    count: int
    flavor: str  # the TAS flavor its flavor assignment picked
    requests: dict[str, int]  # one pod, Kueue's integer view (milli-cpu, whole units otherwise)
    topology_request: PodSetTopologyRequest | None  # None: implied unconstrained
    implied: bool
    tolerations: tuple[Toleration, ...] = ()
    node_selector: dict[str, str] = {}


class PlacementRequest(_Out, frozen=True, kw_only=True):
    """Ask the topology solver to place a workload's pod sets (answered by a PlacementAnswer event)."""

    id: str
    workload: str  # namespace/name
    uid: str
    cluster_queue: str
    fingerprint: str  # pod sets, counts and flavors asked about: a change asks again
    pod_sets: tuple[PodSetAsk, ...]
    candidates: tuple[str, ...] = ()  # namespace/name of workloads it may preempt, in eviction order
    repair_node: str = ""  # node failure: replace this node in the admitted placement (tas_repair.py)


class CycleResult(_Out, frozen=True, kw_only=True):
    cycle: int
    admissions: tuple[AdmissionDecision, ...] = ()
    preemptions: tuple[PreemptionDecision, ...] = ()
    evictions: tuple[EvictionDecision, ...] = ()
    deactivations: tuple[DeactivationDecision, ...] = ()
    checks_ready: tuple[ChecksReadyDecision, ...] = ()
    pending: tuple[PendingDecision, ...] = ()
    cluster_queues: tuple[ClusterQueueStatus, ...] = ()
    local_queues: tuple[LocalQueueStatus, ...] = ()
    placements: tuple[PlacementRequest, ...] = ()
    repairs: tuple[TopologyRepair, ...] = ()

    def empty(self) -> bool:
        return not (
            self.placements
            or self.repairs
            or self.admissions
            or self.preemptions
            or self.evictions
            or self.deactivations
            or self.checks_ready
            or self.pending
            or self.cluster_queues
            or self.local_queues
        )
