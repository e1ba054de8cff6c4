"""The TAS ungater (shell): releases the topology-gated pods of admitted workloads onto their domains,
and records failed nodes in the status of the admitted workloads placed on them.

Pods of a TAS workload are created with the `kueue.x-k8s.io/topology` scheduling gate and the
`kueue.x-k8s.io/workload` annotation (see core/job_pods.py). For each such workload the ungater
plans, per pod set, which gated pod goes to which domain of status.admission's
topologyAssignment (core/ungate.py), and writes one merge patch per pod: the domain's level
labels as nodeSelector and the gate removed, conditional on the pod's resourceVersion (409:
look again). The scheduler then binds the pod inside its domain.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kq.api.constants import TOPOLOGY_SCHEDULING_GATE, WORKLOAD_ANNOTATION
from kq.api.core import Pod
from kq.api.kueue import Workload
from kq.kube import Conflict, KubeClient, KubeError, NotFound
from kq.obs import get_logger
from services.watcher.core.job_pods import JOB_COMPLETION_INDEX_ANNOTATION, PODSET_LABEL
from services.watcher.core.node_failures import HOSTNAME_LABEL, node_failed, unhealthy_patch, uses_node
from services.watcher.core.ungate import Ungate, is_topology_gated, plan_ungates
from services.watcher.objects import ClusterObjects

WlKey = tuple[str, str]  # (namespace, workload name)
_NODES: WlKey = ("", "")  # queue item: record node failures


def _workload_of(pod: Pod) -> WlKey | None:
    name = pod.metadata.annotations.get(WORKLOAD_ANNOTATION)
    return (pod.metadata.namespace, name) if name else None


class TopologyUngater:
    def __init__(self, client: KubeClient, objects: ClusterObjects, *, retry_s: float = 0.2) -> None:
        self.client = client
        self.objects = objects
        self.retry_s = retry_s
        self._pods: dict[WlKey, set[str]] = {}  # workload -> names of its pods (TAS pods only)
        self._queue: asyncio.Queue[WlKey] = asyncio.Queue()
        self._queued: set[WlKey] = set()
        self.ungated = 0
        self._failed: list[tuple[str, str]] = []  # (node name, hostname label) of failed nodes to record
        self.log = get_logger("kq.watcher.ungater", cluster=objects.cluster)

    def on_change(self, kind: str, old: Any, new: Any) -> None:
        if kind == "pod":
            for pod, present in ((old, False), (new, True)):
                if pod is None or (key := _workload_of(pod)) is None:
                    continue
                names = self._pods.setdefault(key, set())
                if present:
                    names.add(pod.metadata.name)
                    if is_topology_gated(pod):
                        self.mark(key)
                elif new is None:
                    names.discard(pod.metadata.name)
                    if not names:
                        del self._pods[key]
                    self.mark(key)  # a released pod went: its domain has room again
        elif kind == "workload" and new is not None:
            key = (new.metadata.namespace, new.metadata.name)
            if key in self._pods:
                self.mark(key)
        elif kind == "node":
            node = new if new is not None else old
            if node is not None and node_failed(new):
                self._failed.append((node.metadata.name, node.metadata.labels.get(HOSTNAME_LABEL, node.metadata.name)))
                self._queue.put_nowait(_NODES)

    async def _record_failures(self) -> None:
        """Record each failed node in the status of the admitted TAS workloads placed on it."""
        failed, self._failed = self._failed, []
        for name, hostname in failed:
            for wl in self.objects.all("workload"):
                if not uses_node(wl, name, hostname):
                    continue
                patch = unhealthy_patch(wl, name)
                if patch is None:
                    continue
                try:
                    await self.client.patch("workload", wl.metadata.namespace, wl.metadata.name, patch,
                                            patch_type="merge", subresource="status")
                    self.log.info("node failure recorded", workload=f"{wl.metadata.namespace}/{wl.metadata.name}",
                                  node=name)
                except NotFound:
                    continue
                except Conflict:
                    self._failed.append((name, hostname))  # the workload moved: look again
                    asyncio.get_running_loop().call_later(self.retry_s, self._queue.put_nowait, _NODES)

    def mark(self, key: WlKey) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def run(self) -> None:
        while True:
            key = await self._queue.get()
            if key == _NODES:
                try:
                    await self._record_failures()
                except KubeError as e:
                    self.log.warning("recording a node failure interrupted; will retry", error=str(e))
                    asyncio.get_running_loop().call_later(self.retry_s, self._queue.put_nowait, _NODES)
                continue
            self._queued.discard(key)
            try:
                again = await self._release(key)
            except asyncio.CancelledError:
                raise
            except KubeError as e:
                self.log.warning("ungating interrupted; will retry", workload=key, error=str(e))
                again = True
            except Exception as e:  # a bug: say so loudly, look again later
                self.log.error("ungating failed", workload=key, error=repr(e), exc_info=e)
                again = True
            if again:
                asyncio.get_running_loop().call_later(self.retry_s, self.mark, key)

    def _plan(self, wl: Workload) -> list[Ungate]:
        admission = wl.status.admission
        if admission is None:
            return []
        names = sorted(self._pods.get((wl.metadata.namespace, wl.metadata.name), ()))
        pods = [p for n in names if (p := self.objects.get("pod", wl.metadata.namespace, n)) is not None]
        nodes = {n.metadata.name: n.metadata.labels for n in self.objects.all("node")}
        out: list[Ungate] = []
        for psa in admission.pod_set_assignments:
            if psa.topology_assignment is None:
                continue
            spec = next((ps for ps in wl.spec.pod_sets if ps.name == psa.name), None)
            req = spec.topology_request if spec is not None else None
            index_key = (req.pod_index_label if req is not None else None) or JOB_COMPLETION_INDEX_ANNOTATION
            mine = [p for p in pods if p.metadata.labels.get(PODSET_LABEL, psa.name) == psa.name]
            out += plan_ungates(psa.topology_assignment, mine, index_key, nodes)
        return out

    async def _release(self, key: WlKey) -> bool:
        """Ungate what can go now; True when something must be looked at again."""
        wl = self.objects.get("workload", *key)
        if wl is None:
            return False
        again = False
        for u in self._plan(wl):
            patch = {
                "metadata": {"resourceVersion": u.resource_version},
                "spec": {"nodeSelector": u.node_selector,
                         "schedulingGates": [{"name": g} for g in u.remaining_gates] or None},
            }
            try:
                await self.client.patch("pod", u.namespace, u.name, patch, patch_type="merge")
            except NotFound:
                continue
            except Conflict:
                again = True  # the pod moved: plan again from its newest state
                continue
            self.ungated += 1
            self.log.info("pod ungated", pod=f"{u.namespace}/{u.name}", gate=TOPOLOGY_SCHEDULING_GATE,
                          node_selector=u.node_selector)
        return again
