"""The issue ledger: decisions issued once until the mirror shows their effect, and decision ids.

An eviction, a deactivation or a checks-ready admission is issued once per workload incarnation;
the ledger remembers it until the Workload record shows the effect (or the shell reports the
command refused), so a cycle in between does not issue it again. Decisions issued while events
are applied wait in the ledger's outbox for the next cycle's result.

Decision ids are `<kind>:<uid>:<resourceVersion>:<n>`, n counting the decisions for that uid:
deterministic, so a replay of the same inputs yields the same ids.
"""

from __future__ import annotations

from typing import Literal

from .decisions import ChecksReadyDecision, DeactivationDecision, EvictionDecision
from .model import Workload

DecisionKind = Literal["reserve", "admit", "preempt", "evict", "deactivate", "pending"]


class DecisionIds:
    __slots__ = ("_counters",)

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}

    def next(self, kind: DecisionKind, uid: str, resource_version: str) -> str:
        n = self._counters.get(uid, 0) + 1
        self._counters[uid] = n
        return f"{kind}:{uid}:{resource_version}:{n}"

    def forget(self, uid: str) -> None:
        self._counters.pop(uid, None)


class IssueLedger:
    __slots__ = ("ids", "_evictions", "_checks_ready", "_deactivations", "_out_evictions", "_out_deactivations",
                 "_out_checks_ready")

    def __init__(self, ids: DecisionIds) -> None:
        self.ids = ids
        # workload key -> uid, for each kind of decision issued and not yet seen in effect
        self._evictions: dict[str, str] = {}
        self._checks_ready: dict[str, str] = {}
        self._deactivations: dict[str, str] = {}
        self._out_evictions: list[EvictionDecision] = []
        self._out_deactivations: list[DeactivationDecision] = []
        self._out_checks_ready: list[ChecksReadyDecision] = []

    # --- queries ---------------------------------------------------------------------------------

    def eviction_issued(self, key: str) -> bool:
        return key in self._evictions

    def deactivation_issued(self, key: str) -> bool:
        return key in self._deactivations

    def checks_ready_issued(self, key: str) -> bool:
        return key in self._checks_ready

    def has_output(self) -> bool:
        return bool(self._out_evictions or self._out_deactivations or self._out_checks_ready)

    # --- issuing ---------------------------------------------------------------------------------

    def issue_eviction(self, w: Workload, reason: str, message: str) -> bool:
        """Evict once; False when an eviction is already on its way."""
        if w.key in self._evictions:
            return False
        self._evictions[w.key] = w.uid
        self._out_evictions.append(EvictionDecision(id=self.ids.next("evict", w.uid, w.resource_version),
                                                    workload=w.key, uid=w.uid, reason=reason, message=message))
        return True

    def issue_preemption(self, key: str, uid: str, resource_version: str) -> str:
        """A preemption is an eviction decided inside a cycle (it goes out with the cycle's own
        result): record it and return its decision id."""
        self._evictions[key] = uid
        return self.ids.next("preempt", uid, resource_version)

    def issue_deactivation(self, w: Workload, reason: str, message: str) -> bool:
        if w.key in self._deactivations:
            return False
        self._deactivations[w.key] = w.uid
        self._out_deactivations.append(DeactivationDecision(id=self.ids.next("deactivate", w.uid, w.resource_version),
                                                            workload=w.key, uid=w.uid, reason=reason, message=message))
        return True

    def issue_checks_ready(self, w: Workload, cluster_queue: str) -> bool:
        if w.key in self._checks_ready:
            return False
        self._checks_ready[w.key] = w.uid
        self._out_checks_ready.append(ChecksReadyDecision(id=self.ids.next("admit", w.uid, w.resource_version),
                                                          workload=w.key, uid=w.uid, cluster_queue=cluster_queue,
                                                          message="The workload is admitted"))
        return True

    def observe_admitted(self, w: Workload, cluster_queue: str) -> None:
        """The record shows Admitted=True that no checks-ready decision of ours asked for (the watcher
        wrote it with the last check's Ready): reported once, as a decision already written."""
        self._out_checks_ready.append(ChecksReadyDecision(id=self.ids.next("admit", w.uid, w.resource_version),
                                                          workload=w.key, uid=w.uid, cluster_queue=cluster_queue,
                                                          message="The workload is admitted", written=True))

    # --- seen, refused, gone ---------------------------------------------------------------------

    def clear_seen(self, w: Workload) -> None:
        """The record shows the effect of what was issued: it may be issued again later."""
        key = w.key
        if key in self._evictions and (w.evicted_reason is not None or w.admission is None):
            del self._evictions[key]
        if key in self._checks_ready and (w.admitted or w.admission is None):
            del self._checks_ready[key]
        # A deactivation is two writes (spec.active, then Evicted while quota is held): done after both.
        if key in self._deactivations and not w.active and (w.evicted_reason is not None or w.admission is None):
            del self._deactivations[key]

    def forget_eviction(self, key: str) -> bool:
        """The eviction was refused; True when one was recorded."""
        return self._evictions.pop(key, None) is not None

    def forget_workload(self, key: str, uid: str | None) -> None:
        self._evictions.pop(key, None)
        self._checks_ready.pop(key, None)
        self._deactivations.pop(key, None)
        if uid is not None:
            self.ids.forget(uid)

    def take(self) -> tuple[list[EvictionDecision], list[DeactivationDecision], list[ChecksReadyDecision]]:
        out = (self._out_evictions, self._out_deactivations, self._out_checks_ready)
        self._out_evictions, self._out_deactivations, self._out_checks_ready = [], [], []
        return out
