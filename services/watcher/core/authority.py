"""Which writer may send which command: the watcher's half of least privilege on the bus.

On a closed bus (kq.bus_users) a service may publish commands only on subjects that end in its
own name. The watcher then checks the rest: the command's `writer` field is that name (so a
service cannot borrow another's epoch or outcomes), and the command is one that writer sends
(podsready cannot admit, gc cannot evict). A command on the short subject form without a writer
comes from a bus that is not closed (tests, older writers) and is judged by its fields alone.
"""

from __future__ import annotations

from kq.messages import (
    AdmitWorkload,
    Command,
    DeactivateWorkload,
    DeleteWorkload,
    EvictWorkload,
    Fence,
    FinishRequeueBackoff,
    FinishWorkload,
    RecordEvent,
    SetActiveCondition,
    SetAdmissionCheckState,
    SetClusterQueueStatus,
    SetLocalQueueStatus,
    SetNominatedClusters,
    SetWorkloadPending,
    SyncJobSetStatus,
    SyncJobStatus,
    SyncObjectStatus,
)

WRITER_COMMANDS: dict[str, frozenset[type]] = {
    "admission": frozenset({AdmitWorkload, EvictWorkload, SetWorkloadPending, DeactivateWorkload,
                            SetClusterQueueStatus, SetLocalQueueStatus, RecordEvent, Fence}),
    "podsready": frozenset({EvictWorkload, DeactivateWorkload, FinishRequeueBackoff, Fence}),
    "dispatcher": frozenset({SetAdmissionCheckState, SetNominatedClusters, FinishWorkload, SyncJobStatus,
                             SyncJobSetStatus, SyncObjectStatus, SetActiveCondition, DeactivateWorkload, Fence}),
    "dispatcher-guard": frozenset({DeactivateWorkload}),
    "gc": frozenset({DeleteWorkload}),
}


def _role(writer: str) -> str:
    """Sharded admission's slot writers ("admission-3") send what admission sends."""
    base, _, slot = writer.rpartition("-")
    return base if base == "admission" and slot.isdigit() else writer


def refuse_writer(subject_writer: str | None, cmd: Command) -> str | None:
    """Why the command may not be carried out as sent (None: it may)."""
    if subject_writer is None:
        return None
    if cmd.writer != subject_writer:
        return f"writer {cmd.writer!r} on {subject_writer!r}'s subject"
    allowed = WRITER_COMMANDS.get(_role(subject_writer))
    if allowed is None:
        return f"{subject_writer!r} sends no commands"
    if type(cmd) not in allowed:
        return f"{subject_writer!r} may not send {type(cmd).__name__}"
    return None
