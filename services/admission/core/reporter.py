"""The status reporter: what changed and must be reported, and what was reported last.

Queue statuses are computed lazily: anything that may change one marks the queue dirty, and the
next reporting cycle computes it and reports it only when it differs from the last report.
A pending workload's condition (reason, message) is reported only when it changed too.
"""

from __future__ import annotations

from .decisions import ClusterQueueStatus, LocalQueueStatus, PendingDecision
from .ledger import DecisionIds
from .model import Workload


class StatusReporter:
    __slots__ = ("_dirty_cqs", "_dirty_lqs", "_reported_cq", "_reported_lq", "_reported_pending", "_pending")

    def __init__(self) -> None:
        self._dirty_cqs: dict[str, None] = {}
        self._dirty_lqs: dict[str, None] = {}
        self._reported_cq: dict[str, ClusterQueueStatus] = {}
        self._reported_lq: dict[str, LocalQueueStatus] = {}
        self._reported_pending: dict[str, tuple[str, str]] = {}
        self._pending: dict[str, PendingDecision] = {}  # by workload key: only the latest matters

    # --- queue statuses --------------------------------------------------------------------------

    def mark_cq(self, name: str) -> None:
        self._dirty_cqs[name] = None

    def mark_lq(self, key: str) -> None:
        self._dirty_lqs[key] = None

    def forget_cq(self, name: str) -> None:
        self._reported_cq.pop(name, None)
        self._dirty_cqs.pop(name, None)

    def forget_lq(self, key: str) -> None:
        self._reported_lq.pop(key, None)
        self._dirty_lqs.pop(key, None)

    def has_changes(self) -> bool:
        return bool(self._dirty_cqs or self._dirty_lqs)

    def take_dirty(self) -> tuple[list[str], list[str]]:
        """The queues marked since the last call (sorted), each to be computed and offered once."""
        cqs, lqs = sorted(self._dirty_cqs), sorted(self._dirty_lqs)
        self._dirty_cqs.clear()
        self._dirty_lqs.clear()
        return cqs, lqs

    def offer_cq(self, status: ClusterQueueStatus) -> bool:
        """True when the status differs from the last reported one (it is now the reported one)."""
        if self._reported_cq.get(status.name) == status:
            return False
        self._reported_cq[status.name] = status
        return True

    def offer_lq(self, key: str, status: LocalQueueStatus) -> bool:
        if self._reported_lq.get(key) == status:
            return False
        self._reported_lq[key] = status
        return True

    # --- pending workloads -----------------------------------------------------------------------

    def report_pending(self, w: Workload, reason: str, message: str, ids: DecisionIds) -> None:
        key = w.key
        if self._reported_pending.get(key) == (reason, message):
            return
        self._reported_pending[key] = (reason, message)
        self._pending[key] = PendingDecision(id=ids.next("pending", w.uid, w.resource_version), workload=key,
                                             uid=w.uid, reason=reason, message=message)

    def forget_pending(self, key: str) -> None:
        """The workload left the pending state (or is gone): a later pending report goes out again."""
        self._reported_pending.pop(key, None)
        self._pending.pop(key, None)

    def has_pending(self) -> bool:
        return bool(self._pending)

    def take_pending(self) -> list[PendingDecision]:
        out = list(self._pending.values())
        self._pending = {}
        return out
