"""A small valid scenario document to mutate in tests, and where the shared examples live."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
# CI clones the repository with shared/ beside it.
SHARED_SCENARIOS = REPO.parent / "shared" / "scenarios"
EXAMPLES = SHARED_SCENARIOS / "examples"
OWN_SCENARIOS = REPO / "scenarios"


def workload(name: str, cpu: str = "1", queue: str = "main", ns: str = "demo") -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
                        }
                    },
                }
            ],
        },
    }


BASE: dict[str, Any] = {
    "name": "t",
    "description": "a valid scenario to mutate",
    "objects": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "main", "namespace": "demo"},
            "spec": {"clusterQueue": "cq"},
        },
    ],
    "steps": [{"at": "0s", "apply": workload("w1")}, {"at": "1s", "finish": "demo/w1"}],
    "checks": [{"at": "settled", "workloads": {"demo/w1": {"state": "finished"}}}],
}


def base() -> dict[str, Any]:
    return copy.deepcopy(BASE)
