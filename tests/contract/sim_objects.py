"""Bodies and clients the kubesim contract tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from kubesim.server import KubeSim

KUEUE = ("kueue.x-k8s.io", "v1beta2")
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


async def api_client(sim: KubeSim, cluster: str, tmp: Path) -> client.ApiClient:
    path = sim.kubeconfig(cluster, tmp / f"{cluster}.kubeconfig")
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(path), client_configuration=cfg, persist_config=False)
    return client.ApiClient(configuration=cfg)


async def make_namespace(core: client.CoreV1Api, name: str) -> None:
    await core.create_namespace({"metadata": {"name": name}})


def job_body(name: str, *, queue: str | None = None, parallelism: int = 1, completions: int | None = 1,
             cpu: str = "100m", runtime: str | None = None, **spec: Any) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    annotations = {"kq.dev/runtime": runtime} if runtime else {}
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "parallelism": parallelism,
            "template": {
                "metadata": {"annotations": annotations, "labels": {"app": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
                },
            },
            **spec,
        },
    }
    if completions is not None:
        body["spec"]["completions"] = completions
    return body


def pod_body(name: str, *, cpu: str = "100m", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}], **spec},
    }


def node_body(name: str, *, cpu: str = "1", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"},
                   "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "10"}},
    }


def workload_body(name: str, *, queue: str = "lq") -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "queueName": queue,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
            }}}],
        },
    }
