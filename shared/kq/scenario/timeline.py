"""The scenario's timeline and the "settled" rule, as pure functions.

Steps and timed checks run in order of `at` (milliseconds after the objects
were applied). At the same instant checks come first: they observe the world
as it is at that moment, before that instant's steps change it (a step's
effect is never instantaneous, so the other order would race). Steps at the
same `at` keep the order written. Checks `at: settled` run after the last
step and the last timed check, once the system has been idle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import msgspec

from kq.scenario.model import Check, Scenario, Step

QUIET_MS = 1000  # no change in any cluster for this long (FORMAT.md: idle for 1 s)


class Entry(NamedTuple):
    at_ms: int
    rank: int  # 0: check, 1: step (checks first at the same instant)
    seq: int  # the order written
    item: Step | Check


def timed_entries(scenario: Scenario) -> list[Entry]:
    entries = [Entry(s.at_ms, 1, s.index, s) for s in scenario.steps]
    entries += [Entry(c.at_ms, 0, c.index, c) for c in scenario.checks if c.at_ms is not None]
    return sorted(entries, key=lambda e: (e.at_ms, e.rank, e.seq))


def settled_checks(scenario: Scenario) -> list[Check]:
    return [c for c in scenario.checks if c.at_ms is None]


class ClusterActivity(msgspec.Struct, frozen=True, rename="camel"):
    """One cluster's entry in kubesim's GET /kubesim/state."""

    resource_version: str | int = ""
    ms_since_last_change: int = 0
    pending_timers: int = 0


class KubesimState(msgspec.Struct, frozen=True):
    clusters: dict[str, ClusterActivity]


kubesim_state_decoder = msgspec.json.Decoder(KubesimState)


class Activity(NamedTuple):
    """Everything that says the system is still busy, read at one moment."""

    clusters: Mapping[str, ClusterActivity]
    bus_backlog: Mapping[str, int]  # "stream/consumer" -> messages not yet processed
    waiting: Sequence[str]  # service timers visible in the API, e.g. "ns/w1 requeues at ..."


def busy_reasons(activity: Activity, quiet_ms: int = QUIET_MS) -> list[str]:
    """Why the system is not idle; empty when it is."""
    reasons: list[str] = []
    for name in sorted(activity.clusters):
        a = activity.clusters[name]
        if a.ms_since_last_change < quiet_ms:
            reasons.append(f"cluster {name} changed {a.ms_since_last_change}ms ago")
        if a.pending_timers:
            reasons.append(f"cluster {name} has {a.pending_timers} pending timer(s)")
    for consumer in sorted(activity.bus_backlog):
        if activity.bus_backlog[consumer]:
            reasons.append(f"bus consumer {consumer} has {activity.bus_backlog[consumer]} unprocessed message(s)")
    reasons.extend(activity.waiting)
    return reasons
