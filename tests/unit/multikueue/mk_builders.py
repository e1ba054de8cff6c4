"""Builders for the MultiKueue cores' unit tests: manager and worker Workloads, Jobs, clusters."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from kq.api import constants as k
from kq.api.core import Job, JobSet, JobSetSpec, JobSetStatus, JobSpec, JobStatus
from kq.api.kueue import Admission, AdmissionCheckState, PodSetAssignment, Workload, WorkloadStatus
from kq.api.meta import Condition, ObjectMeta, OwnerReference
from services.dispatcher.core.kinds import RemoteJob
from services.dispatcher.core.model import ClusterView, Inputs, Settings

T0 = "2026-01-01T00:00:00Z"
SETTINGS = Settings(origin="mk", worker_lost_timeout_s=10.0)


def cond(type_: str, status: str = "True", reason: str = "", message: str = "", at: str = T0) -> Condition:
    return Condition(type=type_, status=status, reason=reason, message=message, last_transition_time=at)  # type: ignore[arg-type]


def local(*, state: str = "Pending", cluster: str | None = None, nominated: tuple[str, ...] = (),
          conds: tuple[Condition, ...] = (), reserved: bool = True, uid: str = "wl-uid") -> Workload:
    cs = list(conds)
    if reserved:
        cs.append(cond(k.WORKLOAD_QUOTA_RESERVED))
    owner = OwnerReference(api_version="batch/v1", kind="Job", name="j1", uid="job-uid", controller=True)
    return Workload(
        metadata=ObjectMeta(name="job-j1-abc", namespace="ns", uid=uid, resource_version="7", owner_references=(owner,)),
        status=WorkloadStatus(
            conditions=tuple(cs),
            admission=Admission(cluster_queue="cq", pod_set_assignments=(PodSetAssignment(name="main"),)) if reserved else None,
            admission_checks=(AdmissionCheckState(name="mk", state=state),),  # type: ignore[arg-type]
            cluster_name=cluster, nominated_cluster_names=nominated,
        ),
    )


def copy(*, admitted_at: str | None = None, finished: Condition | None = None, evicted: bool = False,
         pending: str = "", origin_uid: str = "wl-uid") -> Workload:
    cs = []
    if admitted_at:
        cs += [cond(k.WORKLOAD_QUOTA_RESERVED, at=admitted_at), cond(k.WORKLOAD_ADMITTED, at=admitted_at)]
    elif pending:
        cs.append(cond(k.WORKLOAD_QUOTA_RESERVED, "False", "Pending", pending))
    if finished is not None:
        cs.append(finished)
    if evicted:
        cs.append(cond(k.WORKLOAD_EVICTED, reason="Preempted"))
    return Workload(metadata=ObjectMeta(name="job-j1-abc", namespace="ns", uid="remote-uid",
                                        labels={k.MULTIKUEUE_ORIGIN_LABEL: "mk"},
                                        annotations={k.MULTIKUEUE_ORIGIN_UID_ANNOTATION: origin_uid}),
                    status=WorkloadStatus(conditions=tuple(cs)))


def job(*, suspend: bool = True, status: JobStatus | None = None, managed: bool = True) -> Job:
    return Job(metadata=ObjectMeta(name="j1", namespace="ns", uid="job-uid"),
               spec=JobSpec(suspend=suspend, managed_by=k.MULTIKUEUE_MANAGED_BY if managed else None),
               status=status if status is not None else JobStatus())


def jobset(*, suspend: bool = True, status: JobSetStatus | None = None, managed: bool = True) -> JobSet:
    return JobSet(metadata=ObjectMeta(name="j1", namespace="ns", uid="job-uid"),
                  spec=JobSetSpec(suspend=suspend, managed_by=k.MULTIKUEUE_MANAGED_BY if managed else None),
                  status=status if status is not None else JobSetStatus())


def inputs(wl: Workload, *, remotes: dict[str, Workload] | None = None, jobs: dict[str, RemoteJob] | None = None,
           clusters: tuple[ClusterView, ...] | None = None, local_job: RemoteJob | None = None, now: float = 100.0,
           **kw: Any) -> Inputs:
    views = clusters or (ClusterView(name="w1", available=True), ClusterView(name="w2", available=True))
    return Inputs(local=wl, check="mk", clusters=views, remotes=remotes or {}, remote_jobs=jobs or {},
                  local_job=local_job if local_job is not None else job(), owner=("batch/v1", "Job"), now=now, **kw)


def with_owner(inp: Inputs, owner: tuple[str, str] | None) -> Inputs:
    return replace(inp, owner=owner)
