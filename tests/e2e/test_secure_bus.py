"""A closed bus (`kq up --secure`): TLS, one NATS user per service, least privilege.

One stack (watcher, admission, dispatcher, gc as processes): it admits and runs a Job end to end
over TLS with per-service users; a client without a user, or without TLS, is not let in; tas's
user may not publish an admission command (the server refuses the publish); podsready's user may
publish on its own command subject, but the watcher refuses an admission it may not send, and one
that claims to come from admission. The workload those commands aimed at stays unadmitted.

The stack first takes a flood of hostile objects of every kind written straight into kubesim
(support/hostile_cluster.py): no process dies or fails a loop, what a service cannot use is
dead-lettered naming the field, what kq cannot decode says so naming the field (a condition on
its status or a Warning Event), and the Job that follows still runs.

The same run is the RBAC check: kubesim logs who called what (kubesim/authn.py); each call must be
granted to that service's ServiceAccount in deploy/, and whatever deploy/ grants beyond what the
run called is listed in NOT_EXERCISED with the path that needs it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import msgspec
import nats
import nats.errors
import pytest
from support.deploy_rbac import grants, token_mounted
from support.hostile import CASES
from support.hostile_cluster import check_after_flood, flood, said_on_objects
from support.wait import eventually

from kq import subjects
from kq.api.workload import Admission, PodSetAssignment
from kq.config import NatsConfig
from kq.kube import KubeClient
from kq.messages import AdmitWorkload
from kq.runtime import connect_options
from kq.runtime.errors import dead_letter_decoder
from kq.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

START_TIMEOUT_S = 90.0
QUEUE = "kueue.x-k8s.io/queue-name"


def _setup() -> list[tuple[str, str | None, dict[str, Any]]]:
    def cq(name: str, cpu: str) -> dict[str, Any]:
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
                "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}}

    def lq(name: str, cq_name: str) -> dict[str, Any]:
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"namespace": "default", "name": name}, "spec": {"clusterQueue": cq_name}}

    return [
        ("ResourceFlavor", None, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                  "metadata": {"name": "default-flavor"}}),
        ("ClusterQueue", None, cq("open", "4")),
        ("ClusterQueue", None, cq("closed", "0")),
        ("LocalQueue", "default", lq("open", "open")),
        ("LocalQueue", "default", lq("closed", "closed")),
    ]


def _job(name: str, queue: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "labels": {QUEUE: queue}},
            "spec": {"parallelism": 1, "completions": 1, "template": {
                "metadata": {"annotations": {"kq.dev/runtime": "1s"}},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}


async def _workload_of(client: KubeClient, job: str) -> dict[str, Any] | None:
    items, _ = await client.list("Workload", "default")
    for raw in items:
        wl = msgspec.json.decode(raw)
        if any(o.get("name") == job for o in wl["metadata"].get("ownerReferences", ())):
            return wl
    return None


def _admit(wl: dict[str, Any], writer: str) -> AdmitWorkload:
    md = wl["metadata"]
    return AdmitWorkload(id=f"rogue:{writer}:{md['uid']}", cluster="manager", writer=writer, epoch=10**9,
                         namespace=md["namespace"], name=md["name"], uid=md["uid"],
                         admission=Admission(cluster_queue="closed", pod_set_assignments=(
                             PodSetAssignment(name="main", flavors={"cpu": "default-flavor"},
                                              resource_usage={"cpu": "1"}, count=1),)))


async def _connect_as(config: NatsConfig, user: str, errors: list[str]) -> nats.NATS:
    async def on_error(e: Exception) -> None:
        errors.append(str(e))

    return await nats.connect(config.url, allow_reconnect=False, connect_timeout=5, error_cb=on_error,
                              **connect_options(config, user))


SERVICES = ("watcher", "admission", "tas", "dispatcher", "gc")
_STATUS = ("workloads/status", "clusterqueues/status", "localqueues/status", "cohorts/status",
           "admissionchecks/status", "multikueueclusters/status")
# What deploy/ grants that this run does not call, and the path that does (one group a line).
NOT_EXERCISED: dict[str, set[tuple[str, str, str]]] = {
    "watcher": {
        # re-reads before a conditional write (after a 409, or a Skip/Refusal concluded on the server's word)
        *(("kueue.x-k8s.io", r, "get") for r in ("workloads", "resourceflavors", "clusterqueues", "localqueues",
                                                  "cohorts", "topologies", "admissionchecks", "multikueueconfigs",
                                                  "multikueueclusters", "workloadpriorityclasses", *_STATUS)),
        *(("", r, "get") for r in ("namespaces", "nodes", "pods")), ("scheduling.k8s.io", "priorityclasses", "get"),
        *(("apps", r, "get") for r in ("deployments", "replicasets", "statefulsets")),
        ("leaderworkerset.x-k8s.io", "leaderworkersets", "get"), ("batch", "jobs", "get"),
        # status writes: PUT when a merge patch cannot say it; cohorts and admission checks in other runs
        *(("kueue.x-k8s.io", r, "update") for r in _STATUS),
        ("kueue.x-k8s.io", "cohorts/status", "patch"), ("kueue.x-k8s.io", "admissionchecks/status", "patch"),
        ("kueue.x-k8s.io", "workloads", "update"), ("kueue.x-k8s.io", "workloads", "delete"),  # retention, orphans
        # the pod integration and the TAS ungater (gates), evictions of queued pods
        ("", "pods", "patch"), ("", "pods", "delete"), ("", "pods/finalizers", "update"),
        ("apps", "statefulsets/finalizers", "update"),  # serving workloads owned by a StatefulSet
        ("", "events", "patch"),  # a repeated event is counted on
        ("batch", "jobs", "update"), ("batch", "jobs/finalizers", "update"),  # owner references with blockOwnerDeletion
        *(("batch", "jobs/status", v) for v in ("get", "patch", "update")),  # MultiKueue: the manager Job's status
        *(("jobset.x-k8s.io", "jobsets", v) for v in ("get", "patch", "update")),
        ("jobset.x-k8s.io", "jobsets/finalizers", "update"),  # the JobSet integration
        *(("jobset.x-k8s.io", "jobsets/status", v) for v in ("get", "patch", "update")),  # MultiKueue JobSet status
        ("", "events", "get"),  # an Event is created first and read only after a conflict
        # the Kubeflow, MPI, Ray, Trainer and AppWrapper integrations (no such job in this run)
        *((g, r, v) for g, rs in (("kubeflow.org", ("pytorchjobs", "tfjobs", "xgboostjobs", "paddlejobs", "jaxjobs",
                                                   "mpijobs")),
                                  ("ray.io", ("rayjobs", "rayclusters")), ("trainer.kubeflow.org", ("trainjobs",)),
                                  ("workload.codeflare.dev", ("appwrappers",)))
          for r in rs for v in ("get", "patch", "update")),
        *((g, f"{r}/finalizers", "update") for g, rs in (
            ("kubeflow.org", ("pytorchjobs", "tfjobs", "xgboostjobs", "paddlejobs", "jaxjobs", "mpijobs")),
            ("ray.io", ("rayjobs", "rayclusters")), ("trainer.kubeflow.org", ("trainjobs",)),
            ("workload.codeflare.dev", ("appwrappers",))) for r in rs),
        *(("trainer.kubeflow.org", r, "get") for r in ("trainingruntimes", "clustertrainingruntimes")),
        # MultiKueue: a manager Kubeflow, Ray, Trainer or AppWrapper job's status synced from its worker
        *((g, f"{r}/status", v) for g, rs in (
            ("kubeflow.org", ("pytorchjobs", "tfjobs", "xgboostjobs", "paddlejobs", "jaxjobs", "mpijobs")),
            ("ray.io", ("rayjobs", "rayclusters")), ("trainer.kubeflow.org", ("trainjobs",)),
            ("workload.codeflare.dev", ("appwrappers",))) for r in rs for v in ("get", "patch", "update")),
    },
    "dispatcher": set(),
    "gc": set(),  # gc reads a MultiKueueCluster's kubeconfig on its first sweep
}


def _observed(kubesim: str) -> dict[str, set[tuple[str, str, str, str]]]:
    import urllib.request

    with urllib.request.urlopen(f"{kubesim}/kubesim/clusters/manager/requests", timeout=5) as r:
        calls = msgspec.json.decode(r.read())["requests"]
    out: dict[str, set[tuple[str, str, str, str]]] = {}
    for user, group, resource, verb, namespace in calls:
        if user.startswith("kq/"):  # the services name themselves in their User-Agent (kq.kube)
            out.setdefault(user.removeprefix("kq/"), set()).add((group, resource, verb, namespace))
    return out


def _granted(service: str, call: tuple[str, str, str, str]) -> bool:
    group, resource, verb, _namespace = call
    return any(g == (group, resource, verb, "*") or g == call for g in grants(f"kq-{service}"))


async def test_the_secure_stack_runs_a_job_and_refuses_what_a_service_does_not_own(tmp_path: Path) -> None:
    kueue = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
             "multiKueue": {"gcInterval": "2s"}}  # gc's first sweep after the MultiKueueCluster exists comes soon
    async with Stack(tmp_path / "s", secure=True, services=SERVICES, timeout_s=START_TIMEOUT_S,
                     kueue_config=kueue) as stack:
        secure = stack.nats_config()
        assert secure.tls is not None and secure.nkey_seed_file is not None
        client = await KubeClient.from_kubeconfig(stack.kubeconfig("manager"))
        try:
            assert await flood(client) > 11, "the flood must reach the watcher, not only the API server's checks"
            for kind, ns, body in _setup():
                await client.create(kind, ns, body)
            await client.create("MultiKueueCluster", None, {  # the dispatcher and gc read its kubeconfig Secret
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": "worker-1"},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "worker-1-kubeconfig"}}}})
            await client.create("Job", "default", _job("runs", "open"))
            await client.create("Job", "default", _job("waits", "closed"))

            async def finished() -> bool:
                raw = await client.get("Job", "default", "runs")
                return raw is not None and msgspec.json.decode(raw).get("status", {}).get("succeeded") == 1

            await eventually(finished, timeout=90, interval=0.2, what="the job admitted and run on the secure bus")
            pending = await eventually(lambda: _workload_of(client, "waits"), timeout=30, interval=0.1)
            await check_after_flood(stack, SERVICES)
            CASES["into kubesim: undecodable, said so on the object"] = await said_on_objects(client)

            # No user, or no TLS: not let in.
            with pytest.raises((nats.errors.Error, OSError, TimeoutError)):
                await nats.connect(secure.url, allow_reconnect=False, connect_timeout=3, max_reconnect_attempts=0,
                                   tls=connect_options(secure, "tas")["tls"])
            with pytest.raises((nats.errors.Error, OSError, TimeoutError)):
                await nats.connect(secure.url.replace("tls://", "nats://"), allow_reconnect=False,
                                   connect_timeout=3, max_reconnect_attempts=0)

            # tas may not send commands at all: the server refuses the publish.
            tas_errors: list[str] = []
            tas = await _connect_as(secure, "tas", tas_errors)
            subject = subjects.command_subject("manager", "workload", "admission")
            await tas.publish(subject, msgspec.json.encode(_admit(pending, "admission")))
            await tas.flush()
            await eventually(lambda: any("permissions violation" in e.lower() and subject in e for e in tas_errors),
                             timeout=10, what=f"the server refusing tas's publish (errors: {tas_errors})")
            await tas.close()

            # podsready may publish on its own subject, but the watcher refuses what it may not send.
            ready_errors: list[str] = []
            podsready = await _connect_as(secure, "podsready", ready_errors)
            js = podsready.jetstream()
            own = subjects.command_subject("manager", "workload", "podsready")
            for writer in ("podsready", "admission"):  # not podsready's to send / not podsready's name
                await js.publish(own, msgspec.json.encode(_admit(pending, writer)))
            await podsready.close()
            assert ready_errors == []

            letters: list[str] = []
            admin = stack.bus

            async def refused_both() -> bool:
                sub = await admin.js.subscribe(subjects.dead_letter_subject("watcher"), ordered_consumer=True)
                with contextlib.suppress(TimeoutError, nats.errors.TimeoutError):
                    while True:
                        msg = await sub.next_msg(timeout=0.5)
                        letters.append(dead_letter_decoder.decode(msg.data).error)
                await sub.unsubscribe()
                return (any("may not send AdmitWorkload" in e for e in letters)
                        and any("writer 'admission' on 'podsready'" in e for e in letters))

            await eventually(refused_both, timeout=30, interval=0.2, what=f"the watcher's refusals (saw {letters})")
            raw = await client.get("Workload", "default", pending["metadata"]["name"])
            assert raw is not None
            assert msgspec.json.decode(raw).get("status", {}).get("admission") is None
            # The services themselves never reached past their permissions: the only publish the
            # server refused is the one above.
            log = stack.log_path("nats-server").read_text()
            refused = [ln for ln in log.splitlines() if "Violation" in ln and "Authorization" not in ln]
            assert len(refused) == 1 and subject in refused[0], refused

            # Least privilege on Kubernetes: every call granted, nothing granted that nobody needs.
            def both_read() -> dict[str, set[tuple[str, str, str, str]]] | None:
                o = _observed(stack.kubesim_url)
                return o if o.get("dispatcher") and o.get("gc") else None

            observed = await eventually(both_read, timeout=30, what="the dispatcher and gc reading the kubeconfig Secret")
            assert set(observed) <= {"watcher", "dispatcher", "gc"}, observed  # admission and tas never call the API
            for service in SERVICES:
                account = f"kq-{service}"
                calls = observed.get(service, set())
                assert token_mounted(account) == bool(calls), (account, calls)
                missing = sorted(c for c in calls if not _granted(service, c))
                assert not missing, f"{account} called what deploy/ does not grant it: {missing}"
                unused = {(g, r, v) for g, r, v, _ in grants(account)} - {(g, r, v) for g, r, v, _ in calls}
                unexplained = sorted(unused - NOT_EXERCISED.get(service, set()))
                assert not unexplained, f"{account} is granted what no run calls: {unexplained}"
        finally:
            await client.close()
