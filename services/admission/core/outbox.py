"""Decisions produced while applying events, published with the next cycle's result."""

from __future__ import annotations

from .decisions import ChecksReadyDecision, DeactivationDecision, EvictionDecision, PendingDecision


class Outbox:
    __slots__ = ("pending", "evictions", "deactivations", "checks_ready")

    def __init__(self) -> None:
        self.pending: dict[str, PendingDecision] = {}  # by workload key: only the latest matters
        self.evictions: list[EvictionDecision] = []
        self.deactivations: list[DeactivationDecision] = []
        self.checks_ready: list[ChecksReadyDecision] = []

    def __bool__(self) -> bool:
        return bool(self.pending or self.evictions or self.deactivations or self.checks_ready)

    def take(
        self,
    ) -> tuple[
        list[PendingDecision], list[EvictionDecision], list[DeactivationDecision], list[ChecksReadyDecision]
    ]:
        out = (list(self.pending.values()), self.evictions, self.deactivations, self.checks_ready)
        self.pending = {}
        self.evictions, self.deactivations, self.checks_ready = [], [], []
        return out
