"""The kinds MultiKueue runs on a worker, as one table (pure): Kueue's MultiKueue adapters
(pkg/controller/jobs/*/..._multikueue_adapter.go) differ only in where a kind keeps managedBy and
suspend, what its status looks like and what its copy must leave out.

Every adapter copies the manager's object to the winner with the prebuilt-workload and origin
labels (core/copies.py), without managedBy (so the worker's own controller runs it) and suspended
(the worker's Kueue starts it once it adopted the prebuilt Workload); copies the worker's status
back onto the manager's object while the copy exists; and deletes the copy on finish, eviction or
deletion. `stopped_status` is the manager object's status with nothing running, for when its copy
went away while it ran (the manager's integration finishes the eviction on it: no controller runs
the manager's object to say so).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from msgspec.structs import replace

from kq.api.appwrapper import AppWrapper
from kq.api.constants import FINISHED_FAILED, FINISHED_SUCCEEDED, MULTIKUEUE_JOB_KINDS
from kq.api.core import Job, JobSet, JobSetStatus, JobStatus, ReplicatedJobStatus
from kq.api.meta import Condition, finished_condition
from kq.api.registry import KINDS as API_KINDS
from kq.api.training import KubeflowJob, RayCluster, RayJob, RunPolicy, TrainJob

# Kueue's TrainJob runtime patch (the watcher's trainjob integration writes it on admission):
# the copy goes without it, so the worker's Kueue writes its own.
TRAINJOB_KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"
KUBEFLOW_KINDS = ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob")

RemoteJob = Job | JobSet | KubeflowJob | RayJob | RayCluster | TrainJob | AppWrapper


class KindAdapter(msgspec.Struct, frozen=True, kw_only=True):
    token: str  # the kind in lower case: the mirror's and the API client's name for it
    api_version: str
    kind: str
    managed_by: Callable[[Any], str | None]
    edit_spec: Callable[[dict[str, Any]], None]  # the copy's spec, in place: no managedBy, suspended, ...
    stopped_status: Callable[[Any], Any | None]  # None when nothing runs already
    # Kueue's Job adapter copies the status only once the manager's Job runs (its status rules)...
    sync_while_suspended: bool = True
    suspended: Callable[[Any], bool] = lambda _obj: False
    # ... or once the worker's has finished: (reason, message) of the Workload's Finished condition, as
    # the worker's and the manager's integrations give it; None while it runs (kinds without it: None).
    finish: Callable[[Any], tuple[str, str] | None] = lambda _obj: None


def _top_level(spec: dict[str, Any]) -> None:
    spec.pop("managedBy", None)
    spec["suspend"] = True


def _run_policy(spec: dict[str, Any]) -> None:
    rp = spec.get("runPolicy")
    rp = dict(rp) if isinstance(rp, dict) else {}
    rp.pop("managedBy", None)
    rp["suspend"] = True
    spec["runPolicy"] = rp


def _trainjob(spec: dict[str, Any]) -> None:
    _top_level(spec)
    patches = spec.get("runtimePatches")
    if isinstance(patches, list):
        kept = [p for p in patches if not (isinstance(p, dict) and p.get("manager") == TRAINJOB_KUEUE_PATCH_MANAGER)]
        if kept:
            spec["runtimePatches"] = kept
        else:
            spec.pop("runtimePatches")


def _job_stopped(job: Job) -> JobStatus | None:
    st = job.status
    if not st.active and not st.ready and not st.terminating:
        return None
    return JobStatus(active=0, ready=0, succeeded=st.succeeded, failed=st.failed, terminating=0,
                     conditions=st.conditions, start_time=st.start_time, completion_time=st.completion_time)


def _jobset_stopped(js: JobSet) -> JobSetStatus | None:
    rjs = js.status.replicated_jobs_status
    if not any(r.active or r.ready for r in rjs):
        return None
    return replace(js.status, replicated_jobs_status=tuple(
        ReplicatedJobStatus(name=r.name, succeeded=r.succeeded, failed=r.failed, suspended=r.suspended) for r in rjs))


def _kubeflow_stopped(job: KubeflowJob) -> Any | None:
    rs = job.status.replica_statuses
    if not any(s.active for s in rs.values()):
        return None
    return replace(job.status, replica_statuses={name: replace(s, active=0) for name, s in rs.items()})


def _rayjob_stopped(job: RayJob) -> Any | None:
    if job.status.job_deployment_status in ("", "Suspended", "Complete", "Failed"):
        return None
    return replace(job.status, job_deployment_status="Suspended")


def _raycluster_stopped(rc: RayCluster) -> Any | None:
    if rc.status.state != "ready":
        return None
    return replace(rc.status, state="suspended", ready_worker_replicas=0)


def _trainjob_stopped(job: TrainJob) -> Any | None:
    if not any(s.active for s in job.status.jobs_status):
        return None
    return replace(job.status, jobs_status=tuple(replace(s, active=0) for s in job.status.jobs_status))


def _appwrapper_stopped(aw: AppWrapper) -> Any | None:
    conds = aw.status.conditions
    if not any(c.type == "QuotaReserved" and c.status == "True" for c in conds):
        return None
    return replace(aw.status, conditions=tuple(
        Condition(type=c.type, status="False", reason="Suspended", message="Its MultiKueue copy was removed",
                  last_transition_time=c.last_transition_time) if c.type == "QuotaReserved" else c for c in conds))


def _finish_from(conditions: Any, succeeded: str) -> tuple[str, str] | None:
    done, ok, message = finished_condition(conditions, succeeded)
    return ((FINISHED_SUCCEEDED if ok else FINISHED_FAILED), message) if done else None


def _api_version(kind: str) -> str:
    return next(i.api_version for i in API_KINDS if i.kind == kind)


def _kubeflow(kind: str) -> KindAdapter:
    return KindAdapter(token=kind.lower(), api_version=_api_version(kind), kind=kind,
                       managed_by=lambda j: (j.spec.run_policy or RunPolicy()).managed_by,
                       edit_spec=_run_policy, stopped_status=_kubeflow_stopped)


def _spec_managed_by(obj: Any) -> str | None:
    managed_by: str | None = obj.spec.managed_by
    return managed_by


ADAPTERS_BY_TOKEN: dict[str, KindAdapter] = {a.token: a for a in (
    KindAdapter(token="job", api_version="batch/v1", kind="Job", managed_by=_spec_managed_by,
                edit_spec=_top_level, stopped_status=_job_stopped, sync_while_suspended=False,
                suspended=lambda j: j.spec.suspend is True,
                finish=lambda j: _finish_from(j.status.conditions, "Complete")),
    KindAdapter(token="jobset", api_version=_api_version("JobSet"), kind="JobSet", managed_by=_spec_managed_by,
                edit_spec=_top_level, stopped_status=_jobset_stopped, sync_while_suspended=False,
                suspended=lambda j: j.spec.suspend is True,
                finish=lambda j: _finish_from(j.status.conditions, "Completed")),
    *(_kubeflow(kind) for kind in KUBEFLOW_KINDS),
    KindAdapter(token="rayjob", api_version=_api_version("RayJob"), kind="RayJob", managed_by=_spec_managed_by,
                edit_spec=_top_level, stopped_status=_rayjob_stopped),
    KindAdapter(token="raycluster", api_version=_api_version("RayCluster"), kind="RayCluster",
                managed_by=_spec_managed_by, edit_spec=_top_level, stopped_status=_raycluster_stopped),
    KindAdapter(token="trainjob", api_version=_api_version("TrainJob"), kind="TrainJob", managed_by=_spec_managed_by,
                edit_spec=_trainjob, stopped_status=_trainjob_stopped),
    KindAdapter(token="appwrapper", api_version=_api_version("AppWrapper"), kind="AppWrapper",
                managed_by=_spec_managed_by, edit_spec=_top_level, stopped_status=_appwrapper_stopped),
)}
# (apiVersion, kind) of a Workload's owner -> the kind's token.
ADAPTERS: dict[tuple[str, str], str] = {(a.api_version, a.kind): t for t, a in ADAPTERS_BY_TOKEN.items()}
JOB_TOKENS: tuple[str, ...] = MULTIKUEUE_JOB_KINDS
assert set(JOB_TOKENS) == set(ADAPTERS_BY_TOKEN), "kq.api.constants.MULTIKUEUE_JOB_KINDS names the table's kinds"
_TOKEN_BY_TYPE: dict[type, str] = {i.type: i.token for i in API_KINDS if i.token in ADAPTERS_BY_TOKEN}


def token_of(obj: RemoteJob) -> str:
    """The kind token of a typed object MultiKueue runs ("pytorchjob" for a PyTorchJob)."""
    return _TOKEN_BY_TYPE[type(obj)]
