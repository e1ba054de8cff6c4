"""Run a scenario file (FORMAT.md) against the admission core alone, on a virtual clock.

Objects go through kq.api (the scenario loader) and `from_api`, as the service will feed them;
the fake world echoes decisions back instantly. Only Workload-based scenarios are supported.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from admission_world import World
from msgspec import UNSET

from kq.api import kueue as api
from kq.quantity import to_milli
from kq.scenario.load import load_file
from kq.scenario.model import ApplyAction, Check, DeleteAction, FinishAction
from services.admission.core import Deleted, FairSharingConfig, SchedulerConfig, Workload
from services.admission.core.from_api import event_from_api

TICK_MS = 100


def _config(raw: dict) -> SchedulerConfig:
    fs = None
    if "fairSharing" in raw:
        strategies = (raw["fairSharing"] or {}).get("preemptionStrategies")
        fs = FairSharingConfig(preemption_strategies=tuple(strategies)) if strategies else FairSharingConfig()
    timestamp = "Eviction"
    wfpr = raw.get("waitForPodsReady") or {}
    timestamp = (wfpr.get("requeuingStrategy") or {}).get("timestamp", timestamp)
    return SchedulerConfig(fair_sharing=fs, requeuing_timestamp=timestamp)


def _apply_object(world: World, obj: object, now: float) -> None:
    if isinstance(obj, api.Workload):
        meta = msgspec.structs.replace(obj.metadata, uid=obj.metadata.uid or f"uid-{obj.metadata.name}")
        obj = msgspec.structs.replace(obj, metadata=meta)
    event = event_from_api(obj)
    if event is None:
        return
    if isinstance(event, Workload):
        event = msgspec.structs.replace(event, creation_time=now)
    world.apply(event)


def check_failures(world: World, check: Check) -> list[str]:
    failures: list[str] = []
    for key, want in check.workloads.items():
        if key not in world.records:
            failures.append(f"{key}: missing")
            continue
        got = {
            "state": world.status(key),
            "cluster_queue": world.cluster_queue(key),
            "flavors": world.flavors(key),
            "count": world.counts(key),
            "preempted": key in world.preemption_reasons,
            "preemption_reason": world.preemption_reasons.get(key),
            "evictions": world.evictions.get(key, 0),
        }
        for field, value in got.items():
            expected = getattr(want, field)
            if expected is not UNSET and expected != value:
                failures.append(f"{key}: {field} {value!r}, want {expected!r}")
        if want.message is not UNSET and want.message.lower() not in world.messages.get(key, "").lower():
            failures.append(f"{key}: message {world.messages.get(key)!r}, want it to contain {want.message!r}")
    for name, cq_want in check.cluster_queues.items():
        status = world.cq_status.get(name)
        if status is None:
            failures.append(f"ClusterQueue {name}: no status reported")
            continue
        counts = {
            "admitted_workloads": status.admitted_workloads,
            "pending_workloads": status.pending_workloads,
            "reserving_workloads": status.reserving_workloads,
            "active": status.active,
        }
        for field, value in counts.items():
            expected = getattr(cq_want, field)
            if expected is not UNSET and expected != value:
                failures.append(f"ClusterQueue {name}: {field} {value!r}, want {expected!r}")
        for field, attr in (("usage", "total"), ("borrowed", "borrowed")):
            expected_usage = getattr(cq_want, field)
            if expected_usage is UNSET:
                continue
            have = {
                (f.name, r.name): getattr(r, attr) for f in status.flavors_reservation for r in f.resources
            }
            for flavor, resources in expected_usage.items():
                for res, qty in resources.items():
                    if have.get((flavor, res), 0) != to_milli(qty):
                        failures.append(f"ClusterQueue {name}: {field} {flavor}/{res} {have.get((flavor, res))}m, want {qty}")
    return failures


def run_scenario(path: Path) -> tuple[World, list[str]]:
    sc = load_file(path)
    world = World(config=_config(sc.kueue_config))
    for lo in sc.objects.get(sc.manager, ()):
        _apply_object(world, lo.obj, 0.0)
    step_times = [s.at_ms for s in sc.steps]
    check_times = [c.at_ms for c in sc.checks if c.at_ms is not None]
    end = max(step_times + check_times + [0]) + 1000
    failures: list[str] = []
    steps = list(sc.steps)
    for t in range(0, end + TICK_MS, TICK_MS):
        now = t / 1000.0
        while steps and steps[0].at_ms <= t:
            action = steps.pop(0).action
            match action:
                case ApplyAction():
                    _apply_object(world, action.obj.obj, now)
                case FinishAction():
                    world.finish(action.ref.key())
                case DeleteAction():
                    world.delete(action.ref.key()) if action.kind == "Workload" else world.apply(
                        Deleted(kind=action.kind, namespace=action.ref.namespace or "", name=action.ref.name)  # type: ignore[arg-type]  # the scenario loader checked the kind
                    )
                case _:
                    raise NotImplementedError(f"action {type(action).__name__} in {path.name}")
        world.settle(now)
        for c in sc.checks:
            if c.at_ms is not None and t <= c.at_ms < t + TICK_MS:
                failures += [f"at {c.at_label}: {f}" for f in check_failures(world, c)]
    for c in sc.checks:
        if c.at_ms is None:
            failures += [f"at settled: {f}" for f in check_failures(world, c)]
    return world, failures
