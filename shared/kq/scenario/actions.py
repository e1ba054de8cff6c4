"""Carry out scenario steps against the real clusters: the API through KubeClient,
simulated pods and connections through kubesim's control API.

kubesim control API (HTTP JSON): POST /kubesim/clusters/{c}/finish
{namespace, name, succeeded}; POST .../pods {namespace, name, ready} or
{namespace, name, neverReady: true}; POST .../disconnect; POST .../reconnect;
GET /kubesim/state.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Mapping
from typing import Any

import aiohttp

from kq.api import LoadedObject
from kq.kube import REMOTE_USER_AGENT, AlreadyExists, KubeClient, KubeError
from kq.scenario.model import (
    ApplyAction,
    ConnectionAction,
    DeleteAction,
    FinishAction,
    ObjectRef,
    PatchStatusAction,
    PodsAction,
    Step,
    format_ms,
)
from kq.scenario.observe import Observer
from kq.scenario.refs import canonical_kind, resolve_workload
from kq.scenario.timeline import KubesimState, kubesim_state_decoder

KQ_NAMESPACE = "kq-system"  # where the manager's kq keeps its Secrets (FORMAT.md "MultiKueue scenarios")


class StepError(Exception):
    """A step could not be carried out (the scenario then fails, naming the step)."""


class KubesimControl:
    def __init__(self, session: aiohttp.ClientSession, base_url: str) -> None:
        self.session = session
        self.base = base_url.rstrip("/")

    async def _post(self, cluster: str, verb: str, body: Mapping[str, Any] | None = None) -> None:
        url = f"{self.base}/kubesim/clusters/{cluster}/{verb}"
        try:
            async with self.session.post(url, json=dict(body) if body is not None else {}) as resp:
                if resp.status >= 300:
                    raise StepError(f"kubesim {verb} on {cluster}: {resp.status} {(await resp.text())[:300]}")
        except aiohttp.ClientError as e:
            raise StepError(f"kubesim {verb} on {cluster}: {e}") from e

    async def finish(self, cluster: str, ref: ObjectRef, succeeded: bool) -> None:
        await self._post(cluster, "finish", {"namespace": ref.namespace, "name": ref.name, "succeeded": succeeded})

    async def pods(self, cluster: str, ref: ObjectRef, ready: bool | None, never_ready: bool) -> None:
        body: dict[str, Any] = {"namespace": ref.namespace, "name": ref.name}
        if never_ready:
            body["neverReady"] = True
        else:
            body["ready"] = ready
        await self._post(cluster, "pods", body)

    async def connection(self, cluster: str, connected: bool) -> None:
        """The manager's MultiKueue clients lose (or regain) that cluster; the cluster keeps working."""
        if connected:
            await self._post(cluster, "reconnect")
        else:
            await self._post(cluster, "disconnect", {"userAgentPrefix": REMOTE_USER_AGENT})

    async def state(self) -> KubesimState:
        async with self.session.get(f"{self.base}/kubesim/state") as resp:
            resp.raise_for_status()
            return kubesim_state_decoder.decode(await resp.read())


def describe(step: Step) -> str:
    """One line naming what a step does, for progress output."""
    a = step.action
    where = f" on {step.cluster}" if step.cluster != "manager" else ""
    match a:
        case ApplyAction(obj=obj):
            md = obj.obj.metadata
            name = f"{md.namespace}/{md.name}" if md.namespace else md.name
            return f"apply {obj.kind_info.kind} {name}{where}"
        case DeleteAction(kind=kind, ref=ref):
            return f"delete {kind} {ref.key()}{where}"
        case FinishAction(ref=ref, succeeded=ok):
            return f"{'finish' if ok else 'fail'} {ref.key()}{where}"
        case PodsAction(ref=ref, ready=ready, never_ready=never):
            what = "never ready" if never else ("ready" if ready else "not ready")
            return f"pods of {ref.key()} {what}{where}"
        case ConnectionAction(target=target, connected=connected):
            return f"{'reconnect' if connected else 'disconnect'} {target}"
        case PatchStatusAction(kind=kind, ref=ref):
            return f"patch status of {kind} {ref.key()}{where}"
    raise AssertionError(f"unknown action {a!r}")


class StepRunner:
    def __init__(self, clients: Mapping[str, KubeClient], sim: KubesimControl, observer: Observer) -> None:
        self.clients = clients
        self.sim = sim
        self.observer = observer

    async def run(self, step: Step) -> None:
        try:
            await self._run(step)
        except KubeError as e:
            raise StepError(f"step {step.index} at {format_ms(step.at_ms)} ({describe(step)}): {e}") from e
        except StepError as e:
            raise StepError(f"step {step.index} at {format_ms(step.at_ms)} ({describe(step)}): {e}") from e

    async def _run(self, step: Step) -> None:
        c = step.cluster
        match step.action:
            case ApplyAction(obj=obj):
                await self.apply(c, obj)
            case DeleteAction(kind=kind, ref=ref):
                name = await self._name(c, kind, ref)
                await self.clients[c].delete(kind, ref.namespace, name, propagation="Background")
            case FinishAction(ref=ref, succeeded=ok):
                await self.sim.finish(c, ref, ok)
            case PodsAction(ref=ref, ready=ready, never_ready=never):
                await self.sim.pods(c, ref, ready, never)
            case ConnectionAction(target=target, connected=connected):
                await self.sim.connection(target, connected)
            case PatchStatusAction(kind=kind, ref=ref, status=status):
                name = await self._name(c, kind, ref)
                await self.clients[c].patch(
                    kind, ref.namespace, name, {"status": status}, patch_type="merge", subresource="status"
                )

    async def _name(self, cluster: str, kind: str, ref: ObjectRef) -> str:
        """A Workload named in a step resolves like one named in a check (a Job's Workload by the Job's name)."""
        if canonical_kind(kind) != "Workload":
            return ref.name
        assert ref.namespace is not None
        wl = resolve_workload(await self.observer.workloads(cluster), ref.namespace, ref.name)
        if wl is None:
            raise StepError(f"no Workload {ref.key()} (nor one owned by a Job of that name)")
        return wl.metadata.name

    async def apply(self, cluster: str, lo: LoadedObject) -> None:
        """Create, or update with a merge patch when it exists; then write its status if it has one."""
        client = self.clients[cluster]
        info = lo.kind_info
        body = lo.body
        ns = lo.obj.metadata.namespace or None
        name = lo.obj.metadata.name
        try:
            await client.create(info.kind, ns, body)
        except AlreadyExists:
            update = {k: v for k, v in body.items() if k not in ("apiVersion", "kind", "status")}
            await client.patch(info.kind, ns, name, update, patch_type="merge")
        if info.has_status and body.get("status"):
            status = {"status": body["status"]}
            await client.patch(info.kind, ns, name, status, patch_type="merge", subresource="status")

    async def give_worker_kubeconfigs(self, manager: str, kubeconfigs: Mapping[str, str]) -> None:
        """A Secret <worker>-kubeconfig (key kubeconfig) in the manager's kq namespace per worker."""
        client = self.clients[manager]
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KQ_NAMESPACE}}
        with contextlib.suppress(AlreadyExists):
            await client.create("Namespace", None, namespace)
        for worker in sorted(kubeconfigs):
            name = f"{worker}-kubeconfig"
            data = {"kubeconfig": base64.b64encode(kubeconfigs[worker].encode()).decode()}
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": KQ_NAMESPACE},
                "type": "Opaque",
                "data": data,
            }
            try:
                await client.create("Secret", KQ_NAMESPACE, secret)
            except AlreadyExists:
                await client.patch("Secret", KQ_NAMESPACE, name, {"data": data}, patch_type="merge")

