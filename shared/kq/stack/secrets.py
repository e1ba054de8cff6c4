"""The local stack's MultiKueue wiring: each worker's kubeconfig as a Secret on the manager.

`<worker>-kubeconfig` (key `kubeconfig`) in the manager's kq namespace, which is what Kueue's
MultiKueue setup YAML refers to (a MultiKueueCluster with clusterSource.kubeConfig
{locationType: Secret, location: <worker>-kubeconfig}). The same kubeconfig is also given under
the name Kueue's own MultiKueue setup YAML and docs use for that worker (`worker1-secret` for
`worker-1`), so that file applies unchanged on `kq up`.
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


def kueue_docs_secret_name(worker: str) -> str:
    """The Secret name of Kueue's multikueue-setup.yaml for this worker: worker-1 -> worker1-secret."""
    return f"{worker.replace('-', '')}-secret"


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
            data = {"kubeconfig": base64.b64encode(Path(workers[worker]).read_bytes()).decode()}
            for name in (secret_name(worker), kueue_docs_secret_name(worker)):
                body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                        "metadata": {"name": name, "namespace": namespace}, "data": data}
                try:
                    await client.create("Secret", namespace, body)
                except AlreadyExists:
                    await client.patch("Secret", namespace, name, {"data": data}, patch_type="merge")
            names.append(secret_name(worker))
        return names
    finally:
        await client.close()
