"""Read what a check needs from the clusters' API at the check's moment.

The imperative half of observation: lists objects through KubeClient, decodes
them into kq.api types and hands them to the pure derivations in
`kq.scenario.observed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import msgspec

from kq.api.kueue import ClusterQueue, Workload
from kq.api.meta import condition_is_true, find_condition, parse_time
from kq.api.registry import decode_object
from kq.config import WaitForPodsReady, duration_seconds
from kq.kube import KubeClient, KubeError
from kq.scenario.model import Check, RemoteObject
from kq.scenario.observed import (
    Observed,
    ObservedClusterQueue,
    ObservedRemote,
    ObservedWorkload,
    observe_cluster_queue,
    observe_workload,
    topology_view,
)
from kq.scenario.refs import canonical_kind, resolve_workload


class ObserveError(Exception):
    """The state could not be read (API unreachable, an object kq.api cannot decode)."""


class Observer:
    def __init__(self, clients: Mapping[str, KubeClient], manager: str,
                 pods_ready: WaitForPodsReady | None = None) -> None:
        self.clients = clients
        self.manager = manager
        self.pods_ready = pods_ready if pods_ready is not None and pods_ready.enable is not False else None

    async def _list(self, cluster: str, kind: str) -> list:
        try:
            raws, _ = await self.clients[cluster].list(kind)
        except KubeError as e:
            raise ObserveError(f"cluster {cluster}: listing {kind}: {e}") from e
        out = []
        for raw in raws:
            try:
                out.append(decode_object(kind, raw))
            except (msgspec.ValidationError, msgspec.DecodeError) as e:
                raise ObserveError(f"cluster {cluster}: a {kind} kq.api cannot decode: {e}: {raw[:300]!r}") from e
        return out

    async def workloads(self, cluster: str) -> list[Workload]:
        return await self._list(cluster, "Workload")

    async def observe(self, check: Check) -> Observed:
        workloads: dict[str, ObservedWorkload | None] = {}
        if check.workloads:
            wls = await self.workloads(self.manager)
            view = None
            if any(a.topology_assignment is not None for w in wls if w.status.admission is not None
                   for a in w.status.admission.pod_set_assignments):
                view = topology_view(await self._list(self.manager, "ResourceFlavor"),
                                     await self._list(self.manager, "Topology"),
                                     await self._list(self.manager, "Node"))
            for key in check.workloads:
                ns, _, name = key.partition("/")
                wl = resolve_workload(wls, ns, name)
                workloads[key] = observe_workload(wl, view) if wl is not None else None
        cluster_queues: dict[str, ObservedClusterQueue | None] = {}
        if check.cluster_queues:
            listed_cqs: list[ClusterQueue] = await self._list(self.manager, "ClusterQueue")
            cqs = {cq.metadata.name: cq for cq in listed_cqs}
            for name in check.cluster_queues:
                cluster_queues[name] = observe_cluster_queue(cqs[name]) if name in cqs else None
        remote: dict[str, ObservedRemote] = {}
        for cluster, want in check.remote.items():
            asked = list(want.present) + list(want.absent)
            listed: list[Workload] | None = None  # read once per cluster, only when a Workload is asked about
            found = []
            for o in asked:
                if canonical_kind(o.kind) == "Workload":
                    listed = listed if listed is not None else await self.workloads(cluster)
                    assert o.ref.namespace is not None
                    found.append(await self._remote_workload(cluster, listed, o.ref.namespace, o.ref.name))
                else:
                    found.append(await self._exists(cluster, o))
            remote[cluster] = ObservedRemote(
                present=tuple(o.label() for o, f in zip(asked, found, strict=False) if f),
                absent=tuple(o.label() for o, f in zip(asked, found, strict=False) if not f),
            )
        return Observed(workloads=workloads, cluster_queues=cluster_queues, remote=remote)

    async def _remote_workload(self, cluster: str, listed: list[Workload], ns: str, name: str) -> bool:
        """A copy on a worker that no Job there owns yet (MultiKueue: not admitted there) has the
        manager Workload's name: resolve NAME on the manager, then look for that name."""
        if resolve_workload(listed, ns, name) is not None:
            return True
        if cluster == self.manager:
            return False
        local = resolve_workload(await self.workloads(self.manager), ns, name)
        return local is not None and any(
            w.metadata.namespace == ns and w.metadata.name == local.metadata.name for w in listed)

    async def _exists(self, cluster: str, obj: RemoteObject) -> bool:
        try:
            return await self.clients[cluster].get(obj.kind, obj.ref.namespace, obj.ref.name) is not None
        except KubeError as e:
            raise ObserveError(f"cluster {cluster}: reading {obj.label()}: {e}") from e

    async def waiting_timers(self, now: datetime) -> list[str]:
        """Service timers visible in the API: workloads waiting out a requeue backoff."""
        out: list[str] = []
        for cluster in sorted(self.clients):
            for wl in await self.workloads(cluster):
                rs = wl.status.requeue_state
                if rs is None or rs.requeue_at is None or condition_is_true(wl.status.conditions, "QuotaReserved"):
                    continue
                if wl.spec.active is False or condition_is_true(wl.status.conditions, "Finished"):
                    continue
                if parse_time(rs.requeue_at) > now:
                    out.append(
                        f"{cluster}: {wl.metadata.namespace}/{wl.metadata.name} waits to be requeued at {rs.requeue_at}"
                    )
            if self.pods_ready is not None:
                timers = pods_ready_timers(await self.workloads(cluster), self.pods_ready, now)
                out += [f"{cluster}: {w}" for w in timers]
        return out


def pods_ready_timers(workloads: list[Workload], cfg: WaitForPodsReady, now: datetime) -> list[str]:
    """Admitted workloads whose pods are not ready and whose waitForPodsReady deadline is still ahead
    (or only just passed: the eviction takes a moment to show)."""
    out: list[str] = []
    grace = timedelta(seconds=2)
    timeout = duration_seconds(cfg.timeout)
    recovery = timeout if cfg.recovery_timeout is None else duration_seconds(cfg.recovery_timeout)
    for wl in workloads:
        conds = wl.status.conditions
        admitted = find_condition(conds, "Admitted")
        if admitted is None or admitted.status != "True" or not admitted.last_transition_time:
            continue
        if wl.spec.active is False or condition_is_true(conds, "Finished") or condition_is_true(conds, "Evicted"):
            continue
        ready = find_condition(conds, "PodsReady")
        if ready is not None and ready.status == "True":
            continue
        if ready is None or ready.reason != "WaitForRecovery":
            deadline = parse_time(admitted.last_transition_time) + timedelta(seconds=timeout)
        elif recovery > 0 and ready.last_transition_time:
            deadline = parse_time(ready.last_transition_time) + timedelta(seconds=recovery)
        else:
            continue
        if deadline + grace > now:
            out.append(f"{wl.metadata.namespace}/{wl.metadata.name} waits for its pods until {deadline.isoformat()}")
    return out
