"""One head of a ClusterQueue's queue as a cycle sees it (Kueue's scheduler entry)."""

from __future__ import annotations

import enum
from typing import Literal

from kq.api.workload import TopologyAssignment

from .assignment import Assignment
from .preemption import Target
from .runtime import ClusterQueueRuntime
from .workloads import PendingInfo


class EntryState(enum.Enum):
    """How far the entry got in the cycle (Kueue entry status)."""

    NOT_NOMINATED = "NotNominated"  # evaluated, but not nominated for admission or preemption
    SKIPPED = "Skipped"  # nominated, then lost to another entry of the same cycle
    ASSUMED = "Assumed"  # admitted: its quota is assumed until the mirror confirms it


# Why the entry goes back to its queue: decides whether it is retried at once or parked.
RequeueReason = Literal[
    "",
    "NamespaceMismatch",
    "NoFit",
    "PreemptionNoCandidates",
    "PendingPreemption",
    "FailedAfterNomination",
    "WaitingForPodsReady",
    "WaitingForTopology",
]
# WaitingForTopology stays at the head and stalls its queue until the solver answers: the heads
# behind it must not be asked about (and handed capacity) on quota the head is about to take.
IMMEDIATE_BEST_EFFORT: frozenset[RequeueReason] = frozenset(
    {"FailedAfterNomination", "PendingPreemption", "WaitingForTopology"})


class Entry:
    __slots__ = (
        "info",
        "cq",
        "assignment",
        "targets",
        "state",
        "message",
        "reason",
        "requeue_reason",
        "epoch",
        "tainted",
        "topology",
        "delayed",
    )

    def __init__(self, info: PendingInfo, cq: ClusterQueueRuntime, epoch: tuple[int, int]) -> None:
        self.info = info
        self.cq = cq
        self.assignment: Assignment | None = None
        self.targets: list[Target] = []
        self.state = EntryState.NOT_NOMINATED
        self.message = ""
        self.reason = ""  # granular QuotaReserved reason
        self.requeue_reason: RequeueReason = ""
        self.epoch = epoch
        self.tainted = False  # evaluated while this cycle held capacity for someone else
        self.topology: dict[str, TopologyAssignment] = {}  # TAS: pod set -> the solver's placement
        self.delayed: frozenset[str] = frozenset()  # TAS pod sets placed elsewhere (MultiKueue's worker)

    @property
    def usage(self) -> dict[tuple[str, str], int]:
        """The nominated assignment's usage (only nominated entries are ordered and processed)."""
        assert self.assignment is not None
        return self.assignment.usage

    def record(self, assignment: Assignment, targets: list[Target]) -> None:
        self.assignment = assignment
        self.targets = targets
        self.message = assignment.message()
        self.info.last_assignment = assignment.last_state

    def skip(self, message: str) -> None:
        self.state = EntryState.SKIPPED
        self.message = message
        self.reason = "WaitingForQuota"
