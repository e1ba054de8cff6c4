"""What the burst bench knows of each Workload, from its watch: the accounting that says whether
any work was lost.

A Workload is finished, admitted, pending with the QuotaReserved=False condition admission
writes on the heads it tried (Kueue's "Pending" reason), or new (no decision written: most of a
long queue, as in Kueue). Whether admission knows a new or pending one is asked of admission
itself (its visibility API); `not_in` gives the ones it did not list.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

import msgspec

State = Literal["new", "pending", "admitted", "finished"]
STATES: tuple[State, ...] = ("new", "pending", "admitted", "finished")


class _Cond(msgspec.Struct, frozen=True):
    type: str = ""
    status: str = ""


class _Status(msgspec.Struct, frozen=True):
    conditions: tuple[_Cond, ...] = ()


class _Meta(msgspec.Struct, frozen=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    resource_version: str = ""


class _Workload(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()
    status: _Status = _Status()


_decoder = msgspec.json.Decoder(_Workload)


def workload_state(conditions: tuple[_Cond, ...]) -> State:
    by_type = {c.type: c.status for c in conditions}
    if by_type.get("Finished") == "True":
        return "finished"
    if by_type.get("Admitted") == "True" or by_type.get("QuotaReserved") == "True":
        return "admitted"  # holding quota: no longer a pending workload
    if by_type.get("QuotaReserved") == "False":
        return "pending"
    return "new"


class WorkloadLedger:
    """Workload key -> state, and how many are in each state (kept as events arrive)."""

    def __init__(self) -> None:
        self._state: dict[str, State] = {}
        self._rv: dict[str, int] = {}
        self.counts: Counter[str] = Counter()
        self.ever_admitted = 0

    def feed(self, etype: str, raw: bytes) -> str:
        """One watch event (or listed object); returns its resourceVersion."""
        wl = _decoder.decode(raw)
        meta = wl.metadata
        key = f"{meta.namespace}/{meta.name}"
        if etype == "DELETED":
            old = self._state.pop(key, None)
            self._rv.pop(key, None)
            if old is not None:
                self.counts[old] -= 1
            return meta.resource_version
        rv = int(meta.resource_version) if meta.resource_version.isdigit() else 0
        if rv and rv <= self._rv.get(key, 0):
            return meta.resource_version  # an older copy (a re-list racing the watch)
        self._rv[key] = rv
        new = workload_state(wl.status.conditions)
        old = self._state.get(key)
        if old != new:
            if old is not None:
                self.counts[old] -= 1
            self.counts[new] += 1
            self._state[key] = new
            if new in ("admitted", "finished") and old not in ("admitted", "finished"):
                self.ever_admitted += 1
        return meta.resource_version

    def __len__(self) -> int:
        return len(self._state)

    def not_in(self, listed: set[str]) -> list[str]:
        """Workloads neither admitted nor finished (as now seen) that are missing from `listed`."""
        return sorted(k for k, s in self._state.items() if s in ("new", "pending") and k not in listed)
