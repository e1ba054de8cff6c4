"""The local stack's MultiKueue wiring: each worker's kubeconfig as a Secret on the manager.

`<worker>-kubeconfig` (key `kubeconfig`) in the manager's kq namespace, which is what Kueue's
MultiKueue setup YAML refers to (a MultiKueueCluster with clusterSource.kubeConfig
{locationType: Secret, location: <worker>-kubeconfig}).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Mapping
from pathlib import Path

from kq.kube import AlreadyExists, KubeClient

KQ_NAMESPACE = "kq-system"


def secret_name(worker: str) -> str:
    return f"{worker}-kubeconfig"


async def give_worker_kubeconfigs(manager_kubeconfig: str, workers: Mapping[str, str],
                                  namespace: str = KQ_NAMESPACE) -> list[str]:
    """workers: name -> kubeconfig path. Creates (or updates) one Secret per worker; returns their names."""
    client = await KubeClient.from_kubeconfig(manager_kubeconfig)
    try:
        with contextlib.suppress(AlreadyExists):
            await client.create("Namespace", None, {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": namespace}})
        names = []
        for worker in sorted(workers):
            name = secret_name(worker)
            data = {"kubeconfig": base64.b64encode(Path(workers[worker]).read_bytes()).decode()}
            body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": name, "namespace": namespace}, "data": data}
            try:
                await client.create("Secret", namespace, body)
            except AlreadyExists:
                await client.patch("Secret", namespace, name, {"data": data}, patch_type="merge")
            names.append(name)
        return names
    finally:
        await client.close()
