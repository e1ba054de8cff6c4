"""What the dispatcher core decides on and what it decides.

Times are seconds on the shell's one clock (`now`), passed in; the core never reads a clock.
A Plan lists intents; the shell turns remote intents into API calls on the worker (deletes
first, then creates, then the Job) and manager intents into commands for the watcher.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from kq.api.kueue import Workload

from .kinds import JOB_TOKENS, RemoteJob  # what MultiKueue runs remotely

ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
Mode = Literal["AllAtOnce", "Incremental", "External"]


def mode_for(dispatcher_name: str) -> Mode:
    """Kueue's two built-in dispatchers; any other name means an external one nominates."""
    if dispatcher_name == ALL_AT_ONCE:
        return "AllAtOnce"
    if dispatcher_name == INCREMENTAL:
        return "Incremental"
    return "External"


# The manager's lease on a running copy (annotation on the worker's Workload, RFC 3339): the
# worker-side guard (core/guard.py) stops a copy whose lease ran out, so a worker cut off from its
# manager stops the job before the manager, workerLostTimeout after losing it, runs it elsewhere.
LEASE_ANNOTATION = "kq.dev/multikueue-lease-until"
LEASE_FRACTION = 0.75  # of workerLostTimeout: how far ahead a renewal reaches
RENEW_FRACTION = 0.125  # of workerLostTimeout: how often a lease is renewed
# Below this workerLostTimeout there is no lease (Kueue's plain semantics): renewals would come
# faster than every 2 s, a write load that never lets a worker's API go quiet.
LEASE_MIN_TIMEOUT_S = 16.0
# A copy finished: the manager's Job (or JobSet, ...) gets the worker's status, and the manager's own
# integration finishes the Workload from it, with the same reason and message as the copy's. The
# dispatcher's Finish waits this long for that before it is sent: sent at once it came second every
# time and was refused (a command, a decision and an outcome a job for nothing).
FINISH_HOLD_S = 2.0
# ... counted from the moment the manager's object shows the worker's finished status (its integration
# finishes the Workload from that very update): counted from the copy's finish, under load the hold ran
# out before the status had even landed, and 1.8 Finish commands a job were sent and refused. Should
# the status never land, the Finish goes this long after the copy finished.
FINISH_UNSYNCED_S = 10.0


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    origin: str
    worker_lost_timeout_s: float
    mode: Mode = "AllAtOnce"
    round_timeout_s: float = 300.0
    step_size: int = 3
    # Kind tokens (core/kinds.py) whose integration is enabled: as in Kueue, only those have an adapter.
    kinds: tuple[str, ...] = JOB_TOKENS

    @property
    def lease_enabled(self) -> bool:
        return self.worker_lost_timeout_s >= LEASE_MIN_TIMEOUT_S

    @property
    def lease_s(self) -> float:
        return self.worker_lost_timeout_s * LEASE_FRACTION

    @property
    def renew_every_s(self) -> float:
        return self.worker_lost_timeout_s * RENEW_FRACTION


class ClusterView(msgspec.Struct, frozen=True, kw_only=True):
    """A worker as the dispatcher's connection to it stands. `available`: connected and fully
    listed, so `remotes` is the truth for it; otherwise nothing is known of it."""

    name: str
    available: bool
    lost_since: float | None = None  # when it was last seen connected (None: never connected)
    kinds: tuple[str, ...] | None = None  # the job kinds (core/kinds.py tokens) it serves; None: not known


class Inputs(msgspec.Struct, frozen=True, kw_only=True):
    local: Workload
    check: str  # the MultiKueue admission check's name on `local`
    clusters: tuple[ClusterView, ...]  # the MultiKueueConfig's clusters that exist, in config order
    remotes: dict[str, Workload]  # copies of `local` on available clusters (same namespace/name)
    remote_jobs: dict[str, RemoteJob]  # the Job (or JobSet) of `local` on available clusters
    local_job: RemoteJob | None  # the manager Job or JobSet controlling `local`, when the mirror has it
    owner: tuple[str, str] | None = None  # (apiVersion, kind) of `local`'s controller
    round_started: float | None = None  # Incremental: when the current nomination round began
    round_nominated: tuple[str, ...] = ()  # Incremental: what that round nominated (until the mirror shows it)
    finish_held_since: float | None = None  # when a Finish was first held back (Plan.hold_finish)
    finish_synced_since: float | None = None  # ... and first held with the manager's status synced (Plan.finish_synced)
    now: float


class SetCheck(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    state: Literal["Pending", "Ready", "Retry", "Rejected"]
    message: str
    cluster_name: str | None = None
    topology_ready: tuple[str, ...] = ()  # delayed TAS requests the winner's copy has placed


class Nominate(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    clusters: tuple[str, ...]


class Finish(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    reason: str
    message: str


class SyncJob(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The manager object's status becomes this: its kind's status type in kq.api (a JobStatus,
    JobSetStatus, KubeflowJobStatus, RayJobStatus, ...)."""

    status: Any


ManagerIntent = SetCheck | Nominate | Finish | SyncJob


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    delete: tuple[str, ...] = ()  # clusters whose copy (Workload and Job) goes
    create: tuple[str, ...] = ()  # clusters that get a copy of the Workload
    create_job: str | None = None  # the cluster that gets the Job (after the deletes)
    renew_lease: tuple[str, float] | None = None  # (winner, until): its copy's LEASE_ANNOTATION, before its Job
    manager: tuple[ManagerIntent, ...] = ()
    wake_in: float | None = None  # decide again after this many seconds (timers)
    round_started: float | None = None  # Incremental: a new round began now, nominating `round_nominated`
    round_nominated: tuple[str, ...] = ()
    reset_round: bool = False  # Incremental: the workload left dispatch (no quota): forget its round
    awaiting_nomination: bool = False  # External: waiting for someone to nominate
    hold_finish: bool = False  # a finished copy's Finish is held back (FINISH_HOLD_S): remember since when
    finish_synced: bool = False  # ... and the manager's object shows the copy's status: remember since when
    why: str = ""  # the branch taken, for the decision log
