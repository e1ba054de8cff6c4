"""Types of a scenario file (FORMAT.md v1) and of the resolved scenario the driver runs.

Two layers: `*File` Structs mirror the YAML exactly and reject unknown fields
(msgspec names the path of anything wrong); `load.py` turns them into the
resolved types below (durations in ms, actions as a tagged union, objects
validated by kq.api), which are all the rest of the package sees.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from kq.api import LoadedObject

WorkloadState = Literal["pending", "quotaReserved", "admitted", "finished", "deactivated"]
PreemptionReason = Literal[
    "InClusterQueue", "InCohortReclamation", "InCohortFairSharing", "InCohortReclaimWhileBorrowing"
]
NonNegative = Annotated[int, Meta(ge=0)]
# A quantity as written in YAML: "6", 6, "500m", 1.5. Normalised to a string by load.py.
QuantityValue = str | int | float


class _File(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    pass


# --- the file as written -------------------------------------------------------------------


class ClusterFile(_File, frozen=True, kw_only=True):
    role: Literal["manager", "worker"]


class DeleteFile(_File, frozen=True, kw_only=True):
    kind: str
    name: str
    namespace: str | None = None


class PodsFile(_File, frozen=True, kw_only=True):
    workload: str
    ready: bool | UnsetType = UNSET
    never_ready: bool | UnsetType = UNSET


class PatchStatusFile(_File, frozen=True, kw_only=True):
    kind: str
    name: str
    namespace: str | None = None
    status: dict[str, Any]  # a merge patch body: untyped by nature


class StepFile(_File, frozen=True, kw_only=True):
    at: str
    cluster: str | UnsetType = UNSET
    apply: dict[str, Any] | UnsetType = UNSET  # validated through kq.api.load_object
    delete: DeleteFile | UnsetType = UNSET
    finish: str | UnsetType = UNSET
    fail: str | UnsetType = UNSET
    pods: PodsFile | UnsetType = UNSET
    disconnect: str | UnsetType = UNSET
    reconnect: str | UnsetType = UNSET
    patch_status: PatchStatusFile | UnsetType = UNSET


class TopologyDomainFile(_File, frozen=True, kw_only=True):
    values: list[str]
    count: NonNegative


class WorkloadExpectFile(_File, frozen=True, kw_only=True):
    state: WorkloadState | UnsetType = UNSET
    succeeded: bool | UnsetType = UNSET
    cluster_queue: str | UnsetType | None = UNSET
    flavors: dict[str, dict[str, str]] | UnsetType = UNSET
    topology: dict[str, list[TopologyDomainFile]] | UnsetType = UNSET
    cluster: str | UnsetType | None = UNSET
    nominated_clusters: list[str] | UnsetType = UNSET
    preempted: bool | UnsetType = UNSET
    preemption_reason: PreemptionReason | UnsetType = UNSET
    evictions: NonNegative | UnsetType = UNSET
    count: dict[str, NonNegative] | UnsetType = UNSET
    message: str | UnsetType = UNSET
    requeue_count: NonNegative | UnsetType = UNSET


class ClusterQueueExpectFile(_File, frozen=True, kw_only=True):
    admitted_workloads: NonNegative | UnsetType = UNSET
    pending_workloads: NonNegative | UnsetType = UNSET
    reserving_workloads: NonNegative | UnsetType = UNSET
    usage: dict[str, dict[str, QuantityValue]] | UnsetType = UNSET
    borrowed: dict[str, dict[str, QuantityValue]] | UnsetType = UNSET
    active: bool | UnsetType = UNSET


class RemoteExpectFile(_File, frozen=True, kw_only=True):
    absent: list[str] = []
    present: list[str] = []


class CheckFile(_File, frozen=True, kw_only=True):
    at: str
    workloads: dict[str, WorkloadExpectFile] | UnsetType = UNSET
    cluster_queues: dict[str, ClusterQueueExpectFile] | UnsetType = UNSET
    remote: dict[str, RemoteExpectFile] | UnsetType = UNSET


# The top level (name, description, source, config, clusters, objects, steps, checks) is
# checked key by key in load.py, so that one bad part does not hide problems in the others.
TOP_LEVEL_KEYS = ("name", "description", "source", "config", "clusters", "objects", "steps", "checks")


# --- the resolved scenario ---------------------------------------------------------------


class _Resolved(msgspec.Struct, frozen=True, kw_only=True):
    pass


class ObjectRef(_Resolved, frozen=True, kw_only=True):
    """`ns/name` as written in steps and checks (namespace may be None for cluster scope)."""

    namespace: str | None
    name: str

    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class ApplyAction(_Resolved, frozen=True, kw_only=True, tag="apply"):
    obj: LoadedObject


class DeleteAction(_Resolved, frozen=True, kw_only=True, tag="delete"):
    kind: str
    ref: ObjectRef


class FinishAction(_Resolved, frozen=True, kw_only=True, tag="finish"):
    ref: ObjectRef
    succeeded: bool


class PodsAction(_Resolved, frozen=True, kw_only=True, tag="pods"):
    ref: ObjectRef
    ready: bool | None  # None with never_ready
    never_ready: bool = False


class ConnectionAction(_Resolved, frozen=True, kw_only=True, tag="connection"):
    target: str  # the cluster that is (dis)connected
    connected: bool


class PatchStatusAction(_Resolved, frozen=True, kw_only=True, tag="patchStatus"):
    kind: str
    ref: ObjectRef
    status: dict[str, Any]


Action = ApplyAction | DeleteAction | FinishAction | PodsAction | ConnectionAction | PatchStatusAction


class Step(_Resolved, frozen=True, kw_only=True):
    index: int
    at_ms: int
    cluster: str
    action: Action


class TopologyDomain(_Resolved, frozen=True, kw_only=True, order=True):
    values: tuple[str, ...]
    count: int


class WorkloadExpect(_Resolved, frozen=True, kw_only=True):
    """What a check asks of one workload: UNSET fields are not checked."""

    state: WorkloadState | UnsetType = UNSET
    succeeded: bool | UnsetType = UNSET
    cluster_queue: str | UnsetType | None = UNSET
    flavors: dict[str, dict[str, str]] | UnsetType = UNSET
    topology: dict[str, tuple[TopologyDomain, ...]] | UnsetType = UNSET
    cluster: str | UnsetType | None = UNSET
    nominated_clusters: tuple[str, ...] | UnsetType = UNSET
    preempted: bool | UnsetType = UNSET
    preemption_reason: str | UnsetType = UNSET
    evictions: int | UnsetType = UNSET
    count: dict[str, int] | UnsetType = UNSET
    message: str | UnsetType = UNSET
    requeue_count: int | UnsetType = UNSET


class ClusterQueueExpect(_Resolved, frozen=True, kw_only=True):
    admitted_workloads: int | UnsetType = UNSET
    pending_workloads: int | UnsetType = UNSET
    reserving_workloads: int | UnsetType = UNSET
    usage: dict[str, dict[str, str]] | UnsetType = UNSET  # flavor -> resource -> quantity
    borrowed: dict[str, dict[str, str]] | UnsetType = UNSET
    active: bool | UnsetType = UNSET


class RemoteObject(_Resolved, frozen=True, kw_only=True):
    kind: str  # Workload | Job | any kind kq.api knows
    ref: ObjectRef

    def label(self) -> str:
        return f"{self.kind} {self.ref.key()}"


class RemoteExpect(_Resolved, frozen=True, kw_only=True):
    absent: tuple[RemoteObject, ...] = ()
    present: tuple[RemoteObject, ...] = ()


class Check(_Resolved, frozen=True, kw_only=True):
    index: int
    at_ms: int | None  # None: at settled
    workloads: dict[str, WorkloadExpect]  # key "ns/name" as written
    cluster_queues: dict[str, ClusterQueueExpect]
    remote: dict[str, RemoteExpect]

    @property
    def at_label(self) -> str:
        return "settled" if self.at_ms is None else format_ms(self.at_ms)


class Cluster(_Resolved, frozen=True, kw_only=True):
    name: str
    role: Literal["manager", "worker"]


class Scenario(_Resolved, frozen=True, kw_only=True):
    name: str
    description: str
    source: str | None
    kueue_config: dict[str, Any]  # Kueue Configuration subset, validated against kq.config.KueueConfig
    clusters: tuple[Cluster, ...]  # manager first
    objects: dict[str, tuple[LoadedObject, ...]]  # cluster -> objects in apply order
    steps: tuple[Step, ...]
    checks: tuple[Check, ...]

    @property
    def manager(self) -> str:
        return next(c.name for c in self.clusters if c.role == "manager")


def format_ms(ms: int) -> str:
    """The shortest FORMAT.md duration naming `ms`: 3000 -> "3s", 1500 -> "1500ms", 60000 -> "1m"."""
    if ms % 60000 == 0 and ms:
        return f"{ms // 60000}m"
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    return f"{ms}ms"
