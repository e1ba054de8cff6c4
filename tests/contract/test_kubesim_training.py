"""kubesim's Kubeflow and KubeRay operators and Kueue's webhooks for them, through kubernetes-asyncio."""

from __future__ import annotations

from typing import Any

from contract.sim_objects import KUEUE, MERGE
from kubernetes_asyncio.client import BatchV1Api, CoreV1Api, CustomObjectsApi
from support.wait import eventually

QUEUE = "kueue.x-k8s.io/queue-name"
KUBEFLOW = ("kubeflow.org", "v1")
RAY = ("ray.io", "v1")


def _template(runtime: str | None) -> dict[str, Any]:
    meta = {"annotations": {"kq.dev/runtime": runtime}} if runtime else {}
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "busybox",
                                                      "resources": {"requests": {"cpu": "100m"}}}]}}


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


async def test_a_queued_pytorchjob_waits_suspended_then_runs_its_replicas_to_success(
        custom: CustomObjectsApi, core: CoreV1Api) -> None:
    body = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "pt", "labels": {QUEUE: "lq"}},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": _template("300ms")},
                                             "Worker": {"replicas": 2, "template": _template(None)}}}}
    created = await custom.create_namespaced_custom_object(*KUBEFLOW, "default", "pytorchjobs", body)
    assert created["spec"]["runPolicy"]["suspend"] is True  # Kueue's webhook
    assert (await core.list_namespaced_pod("default")).items == []
    await custom.patch_namespaced_custom_object(*KUBEFLOW, "default", "pytorchjobs", "pt",
                                                {"spec": {"runPolicy": {"suspend": False}}}, _content_type=MERGE)

    async def succeeded() -> dict[str, Any]:
        got = await custom.get_namespaced_custom_object(*KUBEFLOW, "default", "pytorchjobs", "pt")
        assert _conditions(got).get("Succeeded") == "True", got.get("status")
        return got

    got = await eventually(succeeded, timeout=15, what="PyTorchJob Succeeded")
    assert got["status"]["replicaStatuses"]["Master"]["succeeded"] == 1
    # The master ended the job; the workers that were still running are removed (cleanPodPolicy Running).

    async def workers_gone() -> bool:
        left = [p.metadata.name for p in (await core.list_namespaced_pod("default")).items
                if p.status.phase not in ("Succeeded", "Failed")]
        assert left == [], left
        return True

    await eventually(workers_gone, timeout=15, what="running workers deleted")


async def test_a_rayjob_runs_its_cluster_then_its_submitter_and_shuts_down(
        custom: CustomObjectsApi, batch: BatchV1Api, core: CoreV1Api) -> None:
    body = {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "rj", "labels": {QUEUE: "lq"}},
            "spec": {"entrypoint": "python x.py", "shutdownAfterJobFinishes": True,
                     "submitterPodTemplate": _template("300ms"),
                     "rayClusterSpec": {"headGroupSpec": {"template": _template(None)},
                                        "workerGroupSpecs": [{"groupName": "small", "replicas": 2,
                                                              "template": _template(None)}]}}}
    created = await custom.create_namespaced_custom_object(*RAY, "default", "rayjobs", body)
    assert created["spec"]["suspend"] is True and created["spec"]["submissionMode"] == "K8sJobMode"
    await custom.patch_namespaced_custom_object(*RAY, "default", "rayjobs", "rj", {"spec": {"suspend": False}},
                                                _content_type=MERGE)

    async def complete() -> dict[str, Any]:
        got = await custom.get_namespaced_custom_object(*RAY, "default", "rayjobs", "rj")
        assert got.get("status", {}).get("jobDeploymentStatus") == "Complete", got.get("status")
        return got

    got = await eventually(complete, timeout=20, what="RayJob Complete")
    assert got["status"]["jobStatus"] == "SUCCEEDED" and got["status"]["rayClusterName"] == "rj-raycluster"
    assert [j.metadata.name for j in (await batch.list_namespaced_job("default")).items] == ["rj"]

    async def cluster_gone() -> bool:
        left = (await custom.list_namespaced_custom_object(*RAY, "default", "rayclusters"))["items"]
        assert left == [], left
        return True

    await eventually(cluster_gone, timeout=15, what="the RayCluster deleted (shutdownAfterJobFinishes)")


async def test_the_default_local_queue_labels_unlabelled_jobs_where_it_exists(
        custom: CustomObjectsApi, batch: BatchV1Api) -> None:
    job: dict[str, Any] = {"metadata": {"name": "plain"}, "spec": {"template": {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    plain = await batch.create_namespaced_job("default", job)
    assert plain.spec.suspend is False and QUEUE not in (plain.metadata.labels or {})
    await custom.create_namespaced_custom_object(*KUEUE, "default", "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "default"},
        "spec": {"clusterQueue": "cq"}})
    job["metadata"]["name"] = "defaulted"
    defaulted = await batch.create_namespaced_job("default", job)
    assert defaulted.metadata.labels[QUEUE] == "default" and defaulted.spec.suspend is True


async def test_a_trainjob_runs_the_jobset_of_its_runtime_with_its_trainer_settings(
        custom: CustomObjectsApi, batch: BatchV1Api) -> None:
    trainer = ("trainer.kubeflow.org", "v1alpha1")
    await custom.create_cluster_custom_object(*trainer, "clustertrainingruntimes", {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch"},
        "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": [{
            "name": "node", "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {"template": {"metadata": {"annotations": {"kq.dev/runtime": "300ms"}},
                                      "spec": {"restartPolicy": "Never",
                                               "containers": [{"name": "node", "image": "torch"}]}}}}}]}}}})
    created = await custom.create_namespaced_custom_object(*trainer, "default", "trainjobs", {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "tj", "labels": {QUEUE: "lq"}},
        "spec": {"runtimeRef": {"name": "torch"},
                 "trainer": {"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "200m"}}}}})
    assert created["spec"]["suspend"] is True  # Kueue's webhook, which also adds its runtime patch
    assert [p["manager"] for p in created["spec"]["runtimePatches"]] == ["kueue.x-k8s.io/manager"]
    patch = {"spec": {"suspend": False, "runtimePatches": [{"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {
        "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
            "spec": {"nodeSelector": {"pool": "a"}}}}}}]}}}}]}}
    await custom.patch_namespaced_custom_object(*trainer, "default", "trainjobs", "tj", patch, _content_type=MERGE)

    async def complete() -> dict[str, Any]:
        got = await custom.get_namespaced_custom_object(*trainer, "default", "trainjobs", "tj")
        assert _conditions(got).get("Complete") == "True", got.get("status")
        return got

    await eventually(complete, timeout=20, what="TrainJob Complete")
    job = await batch.read_namespaced_job("tj-node-0", "default")
    assert job.spec.parallelism == 2 and job.spec.template.spec.node_selector == {"pool": "a"}
    assert job.spec.template.spec.containers[0].resources.requests == {"cpu": "200m"}


async def test_an_appwrapper_creates_its_components_with_their_podset_infos(
        custom: CustomObjectsApi, batch: BatchV1Api) -> None:
    aw = ("workload.codeflare.dev", "v1beta2")
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "wrapped"},
           "spec": {"parallelism": 2, "completions": 2,
                    "template": _template("300ms") | {"spec": {"restartPolicy": "Never", "containers": [
                        {"name": "c", "image": "busybox"}]}}}}
    created = await custom.create_namespaced_custom_object(*aw, "default", "appwrappers", {
        "apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
        "metadata": {"name": "aw", "labels": {QUEUE: "lq"}}, "spec": {"components": [{"template": job}]}})
    assert created["spec"]["suspend"] is True  # Kueue's webhook
    assert (await batch.list_namespaced_job("default")).items == []
    patch = {"spec": {"suspend": False, "components": [{"template": job, "podSetInfos": [
        {"nodeSelector": {"pool": "a"}, "labels": {"team": "x"}}]}]}}
    await custom.patch_namespaced_custom_object(*aw, "default", "appwrappers", "aw", patch, _content_type=MERGE)

    async def succeeded() -> dict[str, Any]:
        got = await custom.get_namespaced_custom_object(*aw, "default", "appwrappers", "aw")
        assert got.get("status", {}).get("phase") == "Succeeded", got.get("status")
        return got

    got = await eventually(succeeded, timeout=20, what="AppWrapper Succeeded")
    assert _conditions(got)["QuotaReserved"] == "True"
    wrapped = await batch.read_namespaced_job("wrapped", "default")
    assert wrapped.spec.template.spec.node_selector == {"pool": "a"}
    assert wrapped.spec.template.metadata.labels["team"] == "x"
    assert wrapped.metadata.owner_references[0].kind == "AppWrapper"


async def test_jobs_sent_to_a_multikueue_queue_are_managed_by_multikueue(
        custom: CustomObjectsApi, batch: BatchV1Api) -> None:
    # Kueue's ApplyDefaultForManagedBy: the LocalQueue's ClusterQueue has a check of MultiKueue's
    # controller, so a queued Job (and the other kinds MultiKueue runs) gets spec.managedBy unless it
    # names another controller than its own; a queue without such a check leaves it alone.
    async def make(plural: str, name: str, spec: dict[str, Any]) -> None:
        await custom.create_cluster_custom_object(*KUEUE, plural, {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "metadata": {"name": name}, "spec": spec})

    await make("admissionchecks", "mk", {"controllerName": "kueue.x-k8s.io/multikueue"})
    await make("admissionchecks", "gate", {"controllerName": "example.com/gate"})
    for cq, check in (("cq-mk", "mk"), ("cq-gate", "gate")):
        await make("clusterqueues", cq, {"admissionChecksStrategy": {"admissionChecks": [{"name": check}]}})
        await custom.create_namespaced_custom_object(*KUEUE, "default", "localqueues", {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": cq},
            "spec": {"clusterQueue": cq}})

    def job(name: str, queue: str, managed_by: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"template": {"spec": {"restartPolicy": "Never",
                                                      "containers": [{"name": "c", "image": "busybox"}]}}}
        if managed_by:
            spec["managedBy"] = managed_by
        return {"metadata": {"name": name, "labels": {QUEUE: queue}}, "spec": spec}

    sent = await batch.create_namespaced_job("default", job("sent", "cq-mk"))
    own = await batch.create_namespaced_job("default", job("own", "cq-mk", "kubernetes.io/job-controller"))
    other = await batch.create_namespaced_job("default", job("other", "cq-mk", "example.com/mine"))
    gated = await batch.create_namespaced_job("default", job("gated", "cq-gate"))
    assert (sent.spec.managed_by, own.spec.managed_by) == ("kueue.x-k8s.io/multikueue",) * 2
    assert (other.spec.managed_by, gated.spec.managed_by) == ("example.com/mine", None)
    body = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt", "labels": {QUEUE: "cq-mk"}},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": _template(None)}}}}
    pt = await custom.create_namespaced_custom_object(*KUBEFLOW, "default", "pytorchjobs", body)
    assert pt["spec"]["runPolicy"]["managedBy"] == "kueue.x-k8s.io/multikueue"
