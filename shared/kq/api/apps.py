"""The serving kinds kq's integrations read: apps/v1 Deployment, ReplicaSet, StatefulSet, and
leaderworkerset.x-k8s.io/v1 LeaderWorkerSet.

Lenient like kq.api.core: the fields kq reads, the rest ignored. Their pods are
queued by the pod integration (Kueue's Deployment and StatefulSet webhooks put the
queue name, and for a StatefulSet its pod group, on the pod template).
"""

from __future__ import annotations

from kq.api.core import PodTemplateSpec
from kq.api.meta import K8sStruct, LabelSelector, ObjectMeta

__all__ = ["DeploymentSpec", "ReplicaSetStatus", "Deployment", "ReplicaSet", "StatefulSetSpec", "StatefulSet",
           "LeaderWorkerTemplate", "LeaderWorkerSetSpec", "LeaderWorkerSetStatus", "LeaderWorkerSet"]


class DeploymentSpec(K8sStruct, frozen=True, kw_only=True):
    replicas: int | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec = PodTemplateSpec()


class ReplicaSetStatus(K8sStruct, frozen=True, kw_only=True):
    replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    observed_generation: int = 0


class Deployment(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: DeploymentSpec = DeploymentSpec()
    status: ReplicaSetStatus = ReplicaSetStatus()


class ReplicaSet(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: DeploymentSpec = DeploymentSpec()
    status: ReplicaSetStatus = ReplicaSetStatus()


class StatefulSetSpec(K8sStruct, frozen=True, kw_only=True):
    replicas: int | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec = PodTemplateSpec()
    service_name: str = ""
    pod_management_policy: str = ""


class StatefulSet(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: StatefulSetSpec = StatefulSetSpec()
    status: ReplicaSetStatus = ReplicaSetStatus()


class LeaderWorkerTemplate(K8sStruct, frozen=True, kw_only=True):
    leader_template: PodTemplateSpec | None = None
    worker_template: PodTemplateSpec = PodTemplateSpec()
    size: int | None = None


class LeaderWorkerSetSpec(K8sStruct, frozen=True, kw_only=True):
    replicas: int | None = None
    leader_worker_template: LeaderWorkerTemplate = LeaderWorkerTemplate()


class LeaderWorkerSetStatus(K8sStruct, frozen=True, kw_only=True):
    replicas: int = 0
    ready_replicas: int = 0


class LeaderWorkerSet(K8sStruct, frozen=True, kw_only=True):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = ObjectMeta()
    spec: LeaderWorkerSetSpec = LeaderWorkerSetSpec()
    status: LeaderWorkerSetStatus = LeaderWorkerSetStatus()
