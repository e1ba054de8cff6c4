"""Kueue's visibility API (visibility.kueue.x-k8s.io v1beta2): pending workloads of a ClusterQueue or
a LocalQueue with their positions. The admission leader answers requests on
subjects.visibility_subject(cluster) from its queues (services/admission/plan/visibility.py);
`kq get pendingworkloads` asks it. Pure types: the JSON is Kueue's PendingWorkloadsSummary."""

from __future__ import annotations

import msgspec

from kq.api.meta import K8sStruct

GROUP_VERSION = "visibility.kueue.x-k8s.io/v1beta2"


class PendingWorkloadsRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Exactly one of cluster_queue or (namespace, local_queue)."""

    cluster_queue: str | None = None
    namespace: str | None = None
    local_queue: str | None = None
    offset: int = 0  # Kueue's query parameters
    limit: int = 1000


class PendingWorkloadMeta(K8sStruct, frozen=True, kw_only=True):
    name: str
    namespace: str
    creation_timestamp: str | None = None


class PendingWorkload(K8sStruct, frozen=True, kw_only=True):
    metadata: PendingWorkloadMeta
    priority: int
    local_queue_name: str
    position_in_cluster_queue: int
    position_in_local_queue: int


class PendingWorkloadsSummary(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str = GROUP_VERSION
    kind: str = "PendingWorkloadsSummary"
    items: tuple[PendingWorkload, ...] = ()


class VisibilityAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """The reply on the bus: the summary, or why there is none (an unknown queue, a bad request)."""

    summary: PendingWorkloadsSummary | None = None
    error: str = ""
    not_found: bool = False


request_decoder = msgspec.json.Decoder(PendingWorkloadsRequest)
answer_decoder = msgspec.json.Decoder(VisibilityAnswer)
