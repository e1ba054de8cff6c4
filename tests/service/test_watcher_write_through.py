"""Regression (found by `kq chaos`): the Job integration decided on a Job older than its own last
write. It started a Job (unsuspended it); the Workload was evicted before the Job's watch echo
came back; the next reconcile read the cached, still-suspended Job, took it for stopped and
released the quota while its pods ran (the cohort ran 1 cpu over its quota). Writes now go
through to the cache, and the cache keeps the newer of two copies of one object."""

from __future__ import annotations

import msgspec
import pytest
from msgspec.structs import replace
from support.kubesim_fixtures import SimSpec
from unit.watcher.watcher_builders import admitted, flavor, job, workload_for

from kq.api.core import Job
from kq.api.registry import decode_object
from kq.kube import KubeClient
from services.watcher.integration import JobIntegration
from services.watcher.objects import ClusterObjects

pytestmark = pytest.mark.timeout(60)
KUBESIM = SimSpec(namespaces=("ns",))


def test_the_cache_keeps_the_newer_copy_of_an_object() -> None:
    objects = ClusterObjects("c1")
    objects.put("job", job(rv="12", suspend=False))
    objects.put("job", job(rv="11", suspend=True))  # a late echo of an older state
    got = objects.job("ns", "j1")
    assert got is not None and got.spec.suspend is False
    objects.put("job", job(rv="13", suspend=True))
    got = objects.job("ns", "j1")
    assert got is not None and got.spec.suspend is True
    objects.put("job", job(rv="5", uid="recreated", suspend=None))  # another incarnation: taken as it comes
    got = objects.job("ns", "j1")
    assert got is not None and got.metadata.uid == "recreated"


async def test_a_job_started_by_the_integration_is_cached_as_started(kube: KubeClient) -> None:
    objects = ClusterObjects("c1")
    objects.put("resourceflavor", flavor("f1"))
    spec = msgspec.to_builtins(job())
    spec["metadata"] = {"name": "j1", "namespace": "ns", "labels": spec["metadata"]["labels"]}
    spec.pop("status", None)
    created: Job = decode_object("job", await kube.create("job", "ns", spec))
    objects.put("job", created)
    wl = admitted(workload_for(created, rv="1"))
    wl = replace(wl, metadata=replace(wl.metadata, resource_version=""))
    # The Workload as the watch would deliver it: admitted; the Job still suspended in the cache.
    objects.put("workload", wl)
    integration = JobIntegration(kube, objects, workers=1, max_steps=4)
    again = await integration._steps("job", ("job", "ns", "j1"), created, wl)
    assert again is None or again > 0, again
    cached = objects.job("ns", "j1")
    assert cached is not None and cached.spec.suspend is False, "the cache still shows the Job suspended"
