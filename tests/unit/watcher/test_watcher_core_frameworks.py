"""The framework adapters (JobSet, pods, pod groups) under the generic reconciler: the Workload each gets,
and the next write in each state, run step by step as the shell does (apply the write, ask again)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from msgspec.structs import replace
from unit.watcher.watcher_builders import NOW, admitted, evicted, flavor, merge_apply

from kq.api import constants as k
from kq.api.core import (
    Container,
    CoreCondition,
    JobSet,
    JobSetSpec,
    JobSetStatus,
    JobSpec,
    JobTemplateSpec,
    Pod,
    PodSchedulingGate,
    PodSpec,
    PodStatus,
    PodTemplateSpec,
    ReplicatedJob,
    ReplicatedJobStatus,
    ResourceRequirements,
)
from kq.api.kueue import Admission, PodSetAssignment, Workload
from kq.api.meta import Condition, ObjectMeta, OwnerReference
from services.watcher.core import generic
from services.watcher.core import workload_status as ws
from services.watcher.core.adapter import build_workload
from services.watcher.core.frameworks.jobset import JobSetAdapter
from services.watcher.core.frameworks.pods import (
    ADMISSION_GATE,
    GROUP_FAST_ADMISSION_ANNOTATION,
    GROUP_NAME_LABEL,
    GROUP_SERVING_ANNOTATION,
    GROUP_TOTAL_COUNT_ANNOTATION,
    PodAdapter,
    PodGroup,
)
from services.watcher.core.writes import Create, Delete, Skip, Write

FLAVORS = {"f1": flavor("f1", {"pool": "a"})}
JS_AD = JobSetAdapter()
POD_AD = PodAdapter()


def _template(cpu: str = "1") -> PodTemplateSpec:
    return PodTemplateSpec(spec=PodSpec(
        containers=(Container(name="c", resources=ResourceRequirements(requests={"cpu": cpu})),),
        restart_policy="OnFailure"))


NO_STATUS = JobSetStatus()


def jobset(*, suspend: bool = True, queue: str | None = "lq", status: JobSetStatus = NO_STATUS) -> JobSet:
    labels = {k.QUEUE_NAME_LABEL: queue} if queue else {}
    rjs = (
        ReplicatedJob(name="workers", replicas=2,
                      template=JobTemplateSpec(spec=JobSpec(parallelism=3, completions=3, template=_template("1")))),
        ReplicatedJob(name="driver", template=JobTemplateSpec(spec=JobSpec(template=_template("2")))),
    )
    return JobSet(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet",
                  metadata=ObjectMeta(name="js", namespace="ns", uid="js-uid", resource_version="5", labels=labels),
                  spec=JobSetSpec(replicated_jobs=rjs, suspend=suspend), status=status)


def with_meta(wl: Workload) -> Workload:
    return replace(wl, metadata=replace(wl.metadata, uid="wl-uid", resource_version="9", generation=1))


def admit(wl: Workload, *podsets: str) -> Workload:
    adm = Admission(cluster_queue="cq", pod_set_assignments=tuple(
        PodSetAssignment(name=p, flavors={"cpu": "f1"}) for p in podsets))
    return admitted(wl, adm)


def apply(obj: Any, write: Write) -> Any:
    """What the API server does with the write (merge patch or RFC 6902 add/replace ops), typed."""
    if write.patch_type == "merge":
        return merge_apply(obj, write.patch)
    doc = msgspec.json.decode(msgspec.json.encode(obj))
    for op in msgspec.json.decode(write.patch):
        assert op["op"] in ("add", "replace"), op
        *parents, last = op["path"].lstrip("/").split("/")
        node = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            if last == "-":
                node.append(op["value"])
            else:
                node[int(last)] = op["value"]
        else:
            node[last] = op["value"]
    return msgspec.convert(doc, type(obj))


def step(ad: Any, job: Any, wl: Workload | None) -> Any:
    return generic.reconcile(ad, job, wl, FLAVORS, {}, {}, NOW)


# --- JobSet ---------------------------------------------------------------------------------------


def test_a_queued_jobset_gets_one_podset_per_replicated_job() -> None:
    created = step(JS_AD, jobset(), None)
    assert isinstance(created, Create)
    wl = build_workload(JS_AD, jobset(), {}, {})
    assert created.name == wl.metadata.name and wl.metadata.name.startswith("jobset-js-")
    assert [(p.name, p.count) for p in wl.spec.pod_sets] == [("workers", 6), ("driver", 1)]
    assert wl.spec.queue_name == "lq"
    (owner,) = wl.metadata.owner_references
    assert (owner.kind, owner.uid, owner.controller) == ("JobSet", "js-uid", True)


def test_an_unqueued_jobset_is_left_alone() -> None:
    assert step(JS_AD, jobset(queue=None, suspend=False), None) == Skip(reason="NotQueued")


def test_a_running_jobset_without_workload_is_suspended_first() -> None:
    write = step(JS_AD, jobset(suspend=False), None)
    assert isinstance(write, Write) and apply(jobset(suspend=False), write).spec.suspend is True


def test_admission_unsuspends_with_each_podsets_node_selector_then_it_runs() -> None:
    wl = admit(with_meta(build_workload(JS_AD, jobset(), {}, {})), "workers", "driver")
    write = step(JS_AD, jobset(), wl)
    assert isinstance(write, Write) and write.kind == "jobset"
    started = apply(jobset(), write)
    assert started.spec.suspend is False
    for rj in started.spec.replicated_jobs:
        t = rj.template.spec.template
        assert t.spec.node_selector == {"pool": "a"} and t.metadata.labels["kueue.x-k8s.io/podset"] == rj.name
    assert step(JS_AD, started, wl) == Skip(reason="Running")


def test_waiting_for_admission_and_a_missing_assignment_fails_to_start() -> None:
    wl = with_meta(build_workload(JS_AD, jobset(), {}, {}))
    assert step(JS_AD, jobset(), wl) == Skip(reason="WaitingForAdmission")
    write = step(JS_AD, jobset(), admit(wl, "workers"))
    assert isinstance(write, Write) and write.kind == "workload"
    assert "expecting 2 podsets, got 1" in write.patch.decode() and generic.FAILED_TO_START in write.patch.decode()


def test_eviction_suspends_restores_then_releases_once_inactive() -> None:
    wl = admit(with_meta(build_workload(JS_AD, jobset(), {}, {})), "workers", "driver")
    running = apply(jobset(), step(JS_AD, jobset(), wl))
    active = replace(running, status=JobSetStatus(replicated_jobs_status=(ReplicatedJobStatus(name="workers", active=2),)))
    out = evicted(wl)
    write = step(JS_AD, active, out)
    assert isinstance(write, Write) and write.kind == "jobset"
    stopped = apply(active, write)
    assert stopped.spec.suspend is True
    assert all(rj.template.spec.template.spec.node_selector == {} for rj in stopped.spec.replicated_jobs)
    assert step(JS_AD, stopped, out) == Skip(reason="Evicted")  # still active: pods stopping
    quiet = replace(stopped, status=JobSetStatus())
    release = step(JS_AD, quiet, out)
    assert isinstance(release, Write) and release.kind == "workload" and release.subresource == "status"
    assert not ws.has_quota_reservation(merge_apply(out, release.patch))


@pytest.mark.parametrize(("cond", "succeeded"), [("Completed", True), ("Failed", False)])
def test_a_finished_jobset_finishes_its_workload(cond: str, succeeded: bool) -> None:
    wl = admit(with_meta(build_workload(JS_AD, jobset(), {}, {})), "workers", "driver")
    done = jobset(suspend=False, status=JobSetStatus(conditions=(Condition(type=cond, status="True", reason="x",
                                                                             message="m"),)))
    write = step(JS_AD, done, wl)
    assert isinstance(write, Write)
    fin = merge_apply(wl, write.patch)
    assert ws.is_finished(fin)
    reason = k.FINISHED_SUCCEEDED if succeeded else k.FINISHED_FAILED
    assert any(c.type == k.WORKLOAD_FINISHED and c.reason == reason for c in fin.status.conditions)


# --- pods and pod groups --------------------------------------------------------------------------


def pod(name: str, *, gated: bool = True, group: str | None = None, total: str | None = None, phase: str = "Pending",
        cpu: str = "1", serving: bool = False, owner: OwnerReference | None = None) -> Pod:
    labels = {k.QUEUE_NAME_LABEL: "lq"}
    annotations: dict[str, str] = {}
    if group:
        labels[GROUP_NAME_LABEL] = group
    if total is not None:
        annotations[GROUP_TOTAL_COUNT_ANNOTATION] = total
    if serving:
        annotations[GROUP_SERVING_ANNOTATION] = "true"
        annotations[GROUP_FAST_ADMISSION_ANNOTATION] = "true"
    return Pod(api_version="v1", kind="Pod",
               metadata=ObjectMeta(name=name, namespace="ns", uid=f"{name}-uid", resource_version="3", labels=labels,
                                   annotations=annotations, owner_references=(owner,) if owner else ()),
               spec=PodSpec(containers=(Container(name="c", resources=ResourceRequirements(requests={"cpu": cpu})),),
                            scheduling_gates=(PodSchedulingGate(name=ADMISSION_GATE),) if gated else ()),
               status=PodStatus(phase=phase))


def single(p: Pod) -> PodGroup:
    return PodGroup(namespace="ns", name=p.metadata.name, group=False, pods=(p,))


def group(*pods: Pod, name: str = "g") -> PodGroup:
    return PodGroup(namespace="ns", name=name, group=True, pods=tuple(sorted(pods, key=lambda p: p.metadata.name)))


def test_a_gated_pod_gets_a_workload_then_admission_ungates_it_with_the_flavor() -> None:
    view = single(pod("p"))
    created = step(POD_AD, view, None)
    assert isinstance(created, Create) and created.name.startswith("pod-p-")
    wl = admit(with_meta(build_workload(POD_AD, view, {}, {})), "main")
    write = step(POD_AD, view, wl)
    assert isinstance(write, Write) and write.kind == "pod"
    started = merge_apply(view.pods[0], write.patch)
    assert started.spec.scheduling_gates == () and started.spec.node_selector == {"pool": "a"}
    assert step(POD_AD, single(started), wl) == Skip(reason="Running")


@pytest.mark.parametrize(("phase", "reason"), [("Succeeded", k.FINISHED_SUCCEEDED), ("Failed", k.FINISHED_FAILED)])
def test_an_ended_pod_finishes_its_workload(phase: str, reason: str) -> None:
    view = single(pod("p"))
    wl = admit(with_meta(build_workload(POD_AD, view, {}, {})), "main")
    write = step(POD_AD, single(pod("p", gated=False, phase=phase)), wl)
    assert isinstance(write, Write)
    assert any(c.reason == reason for c in merge_apply(wl, write.patch).status.conditions)


def test_an_ungated_queued_pod_without_workload_is_deleted() -> None:
    write = step(POD_AD, single(pod("p", gated=False, phase="Running")), None)
    assert isinstance(write, Delete) and (write.kind, write.name, write.uid) == ("pod", "p", "p-uid")


def test_a_pod_group_waits_for_its_last_member() -> None:
    one = group(pod("a", group="g", total="2"))
    assert step(POD_AD, one, None).reason.startswith("WaitingForPodGroup: 1 of 2")
    both = group(pod("a", group="g", total="2"), pod("b", group="g", total="2", cpu="3"))
    created = step(POD_AD, both, None)
    assert isinstance(created, Create) and created.name == "g"
    wl = build_workload(POD_AD, both, {}, {})
    assert sorted(p.count for p in wl.spec.pod_sets) == [1, 1]  # two roles: different requests
    assert {r.kind for r in wl.metadata.owner_references} == {"Pod"}
    assert sum(1 for r in wl.metadata.owner_references if r.controller) == 1


def test_members_disagreeing_on_the_total_count_get_a_clear_reason() -> None:
    bad = group(pod("a", group="g", total="2"), pod("b", group="g", total="3"))
    reason = step(POD_AD, bad, None).reason
    assert reason.startswith("PodGroupTotalCountMismatch") and "'2'" in reason and "'3'" in reason


def test_an_admitted_group_ungates_each_member_and_finishes_when_all_end() -> None:
    members = (pod("a", group="g", total="2"), pod("b", group="g", total="2"))
    view = group(*members)
    wl = build_workload(POD_AD, view, {}, {})
    wl = admit(with_meta(wl), *(p.name for p in wl.spec.pod_sets))
    pods = list(members)
    for _ in range(2):
        write = step(POD_AD, group(*pods), wl)
        assert isinstance(write, Write) and write.kind == "pod"
        i = [p.metadata.name for p in pods].index(write.name)
        pods[i] = merge_apply(pods[i], write.patch)
    assert all(not p.spec.scheduling_gates for p in pods)
    assert step(POD_AD, group(*pods), wl) == Skip(reason="Running")
    half = [replace(pods[0], status=PodStatus(phase="Succeeded")), pods[1]]
    assert step(POD_AD, group(*half), wl) == Skip(reason="Running")
    done = [replace(p, status=PodStatus(phase="Succeeded")) for p in pods]
    write = step(POD_AD, group(*done), wl)
    assert isinstance(write, Write) and ws.is_finished(merge_apply(wl, write.patch))


def test_a_serving_group_is_admitted_whole_on_its_first_pod_and_never_finishes() -> None:
    sts = OwnerReference(api_version="apps/v1", kind="StatefulSet", name="web", uid="sts-uid", controller=True)
    first = pod("web-0", group="g", total="3", serving=True, owner=sts)
    created = step(POD_AD, group(first), None)
    assert isinstance(created, Create)
    wl = build_workload(POD_AD, group(first), {}, {})
    assert [p.count for p in wl.spec.pod_sets] == [3]
    (owner,) = wl.metadata.owner_references
    assert (owner.kind, owner.controller) == ("StatefulSet", True)
    ended = replace(first, spec=replace(first.spec, scheduling_gates=()), status=PodStatus(phase="Succeeded"))
    assert POD_AD.finished(group(ended)) == (False, True, "")


def test_eviction_deletes_running_pods_then_releases() -> None:
    members = (pod("a", group="g", total="2", gated=False, phase="Running"),
               pod("b", group="g", total="2", gated=False, phase="Running"))
    wl = evicted(admit(with_meta(build_workload(POD_AD, group(*members), {}, {})), "x"))
    write = step(POD_AD, group(*members), wl)
    assert isinstance(write, Delete) and write.name == "a"
    release = generic.reconcile_orphan(wl, NOW)  # the pods are gone
    assert isinstance(release, Write) and not ws.has_quota_reservation(merge_apply(wl, release.patch))


def test_pods_ready_counts_ready_or_succeeded_members() -> None:
    ready = replace(pod("a", gated=False), status=PodStatus(phase="Running", conditions=(
        CoreCondition(type="Ready", status="True"),)))
    done = replace(pod("b", gated=False), status=PodStatus(phase="Succeeded"))
    assert POD_AD.pods_ready(group(ready, done))
    assert not POD_AD.pods_ready(group(ready, pod("c", gated=False, phase="Running")))


def test_with_wait_for_pods_ready_the_jobsets_readiness_becomes_the_podsready_condition() -> None:
    wl = admit(with_meta(build_workload(JS_AD, jobset(), {}, {})), "workers", "driver")
    running = apply(jobset(), step(JS_AD, jobset(), wl))
    not_ready = generic.reconcile(JS_AD, running, wl, FLAVORS, {}, {}, NOW, wait_for_pods_ready=True)
    assert isinstance(not_ready, Write) and not_ready.subresource == "status"
    wl = merge_apply(wl, not_ready.patch)
    assert any(c.type == k.WORKLOAD_PODS_READY and c.status == "False" for c in wl.status.conditions)
    ready = replace(running, status=JobSetStatus(replicated_jobs_status=(
        ReplicatedJobStatus(name="workers", ready=2, active=2), ReplicatedJobStatus(name="driver", ready=1, active=1))))
    write = generic.reconcile(JS_AD, ready, wl, FLAVORS, {}, {}, NOW, wait_for_pods_ready=True)
    assert isinstance(write, Write)
    wl = merge_apply(wl, write.patch)
    assert any(c.type == k.WORKLOAD_PODS_READY and c.status == "True" for c in wl.status.conditions)
    assert generic.reconcile(JS_AD, ready, wl, FLAVORS, {}, {}, NOW, wait_for_pods_ready=True) == Skip(reason="Running")


def test_jobset_writes_touch_only_what_admission_changes() -> None:
    """A merge patch would replace replicatedJobs whole, dropping what kq does not model (volumes,
    probes): the writes are JSON patches by index, limited to the directives and suspend."""
    wl = admit(with_meta(build_workload(JS_AD, jobset(), {}, {})), "workers", "driver")
    write = step(JS_AD, jobset(), wl)
    assert isinstance(write, Write) and write.patch_type == "json"
    paths = [op["path"] for op in msgspec.json.decode(write.patch)]
    assert "/spec/suspend" in paths and "/metadata/resourceVersion" in paths
    assert all(p.startswith("/spec/replicatedJobs/") and p.split("/")[-1] in ("metadata", "nodeSelector")
               for p in paths if p not in ("/spec/suspend", "/metadata/resourceVersion")), paths


def test_a_multikueue_jobset_copy_waits_for_adopts_and_keeps_its_prebuilt_workload() -> None:
    """A worker's copy of a JobSet (prebuilt-workload label): stopped until the Workload copy is there,
    then it becomes that Workload's controller; a copy that does not describe it is finished OutOfSync."""
    copy = replace(jobset(), metadata=replace(jobset().metadata, labels={
        **jobset().metadata.labels, k.PREBUILT_WORKLOAD_LABEL: "jobset-js-abc"}))
    wl = with_meta(replace(build_workload(JS_AD, jobset(), {}, {}), metadata=ObjectMeta(
        name="jobset-js-abc", namespace="ns", labels={k.MULTIKUEUE_ORIGIN_LABEL: "mk"})))
    assert generic.prebuilt(JS_AD, copy, None, NOW) == Skip(reason="PrebuiltWorkloadNotFound")
    adopt = generic.prebuilt(JS_AD, copy, wl, NOW)
    assert isinstance(adopt, Write) and adopt.kind == "workload" and adopt.name == "jobset-js-abc"
    owned = apply(wl, adopt)
    assert JS_AD.owns(owned, copy) and owned.metadata.labels[k.JOB_UID_LABEL] == "js-uid"
    assert generic.prebuilt(JS_AD, copy, owned, NOW) is None  # carry on: the generic reconciler runs it
    other = replace(owned, spec=replace(owned.spec, pod_sets=owned.spec.pod_sets[:1]))
    out_of_sync = generic.prebuilt(JS_AD, copy, other, NOW)
    assert isinstance(out_of_sync, Write) and k.FINISHED_OUT_OF_SYNC in out_of_sync.patch.decode()
