"""Clients for MultiKueue worker clusters, from a MultiKueueCluster's kubeconfig source.

Used by the dispatcher and gc only (their ServiceAccounts alone may read the Secrets). The
kubeconfig is read from a Secret in kq's namespace through the manager's API server, or from a
file, every time a connection is made, so a fixed Secret takes effect on the next attempt.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec

from kq.api.core import Secret
from kq.api.kueue import KubeConfig
from kq.kube import REMOTE_USER_AGENT, KubeClient, KubeError
from kq.kubeconfigs import KubeconfigError, kubeconfig_from_secret, kubeconfig_from_text


class KubeconfigSource:
    def __init__(self, manager: KubeClient | None, namespace: str) -> None:
        self.manager = manager
        self.namespace = namespace

    async def load(self, src: KubeConfig | None) -> dict[str, Any]:
        if src is None:
            raise KubeconfigError("spec.clusterSource.kubeConfig is not set")
        if src.location_type == "Path":
            try:
                text = await asyncio.to_thread(Path(src.location).read_text)
            except OSError as e:
                raise KubeconfigError(f"file {src.location}: {e.strerror or type(e).__name__}") from None
            return kubeconfig_from_text(text, f"file {src.location}")
        if self.manager is None:
            raise KubeconfigError("no manager API client to read Secrets with")
        try:
            raw = await self.manager.get("Secret", self.namespace, src.location)
        except KubeError as e:
            raise KubeconfigError(f"reading Secret {self.namespace}/{src.location}: HTTP {e.status}") from None
        try:
            secret = None if raw is None else msgspec.json.decode(raw, type=Secret)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise KubeconfigError(f"Secret {self.namespace}/{src.location}: not a Secret") from None
        return kubeconfig_from_secret(secret, src.location, self.namespace)

    async def connect(self, src: KubeConfig | None, origin: str) -> KubeClient:
        """A client for the worker; KubeconfigError (or ValueError) when the kubeconfig is unusable."""
        cfg = await self.load(src)
        return await KubeClient.from_kubeconfig_dict(cfg, user_agent=f"{REMOTE_USER_AGENT}/{origin}")
