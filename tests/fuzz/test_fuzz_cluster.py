"""Hostile input written straight into the cluster, where the watcher meets it.

A stack (watcher, admission, tas, dispatcher as processes) takes a flood of hostile objects of
every kind written to kubesim with no `kq apply` in front (support/hostile.py, plus a cohort
cycle). kubesim refuses some (metadata rules, as an API server does); the rest reach the
watcher, the mirror and the services. Then: no service has died, what a service could not use
was dead-lettered with an error naming the field, and a valid Job created after the flood is
still admitted and run (nobody stopped processing other objects).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import msgspec
import nats.errors
import pytest
from hypothesis import HealthCheck, given, settings
from support.hostile import BASES, CASES, EXAMPLES, KINDS, cohort_cycle, hostile
from support.wait import eventually

from kq import subjects
from kq.api.registry import kind_for
from kq.kube import KubeClient, KubeError
from kq.runtime.errors import dead_letter_decoder
from kq.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SERVICES = ("watcher", "admission", "tas", "dispatcher")
PER_KIND = max(4, EXAMPLES // 6)  # each case is an API write and a mirror record: fewer than through apply
QUEUE = "kueue.x-k8s.io/queue-name"
# A dead letter names the field: a msgspec path ($.spec.x), a field path (spec.x, metadata.x) or a quoted field.
NAMES_A_FIELD = re.compile(r"\$\.|\b(spec|metadata|status|value|description)\b|`[^`]+`")


def _draw(kind: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    @settings(max_examples=PER_KIND, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(hostile(kind, body_only=True))
    def collect(doc: dict[str, Any]) -> None:
        out.append(doc)

    collect()
    return out


def _unique(doc: dict[str, Any], i: int) -> tuple[str | None, dict[str, Any]]:
    """Give an object that kept its base name a name of its own; its namespace (None: cluster-scoped)."""
    meta = doc.get("metadata")
    base_meta = BASES[doc.get("kind", "")]["metadata"] if doc.get("kind") in BASES else {}
    if isinstance(meta, dict) and meta.get("name") == base_meta.get("name"):
        meta["name"] = f"{meta['name']}-h{i}"
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    return ns if isinstance(ns, str) and ns else ("default" if "namespace" in base_meta else None), doc


def _valid() -> list[tuple[str, str | None, dict[str, Any]]]:
    v = "kueue.x-k8s.io/v1beta2"
    return [
        ("ResourceFlavor", None, {"apiVersion": v, "kind": "ResourceFlavor", "metadata": {"name": "good-rf"}}),
        ("ClusterQueue", None, {"apiVersion": v, "kind": "ClusterQueue", "metadata": {"name": "good-cq"}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "good-rf", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}}),
        ("LocalQueue", "default", {"apiVersion": v, "kind": "LocalQueue",
                                   "metadata": {"name": "good-lq", "namespace": "default"},
                                   "spec": {"clusterQueue": "good-cq"}}),
        ("Job", "default", {"apiVersion": "batch/v1", "kind": "Job",
                            "metadata": {"name": "good-job", "namespace": "default", "labels": {QUEUE: "good-lq"}},
                            "spec": {"template": {"metadata": {"annotations": {"kq.dev/runtime": "1s"}}, "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}),
    ]


async def _dead_letters(stack: Stack) -> list[Any]:
    letters = []
    sub = await stack.bus.js.subscribe(subjects.DEAD_LETTERS_ALL, ordered_consumer=True)
    try:
        with contextlib.suppress(TimeoutError, nats.errors.TimeoutError):
            while True:
                letters.append(dead_letter_decoder.decode((await sub.next_msg(timeout=1.0)).data))
    finally:
        await sub.unsubscribe()
    return letters


async def test_hostile_objects_in_the_cluster_crash_nothing_and_stop_nothing(tmp_path: Path) -> None:
    flood = [doc for kind in KINDS for doc in _draw(kind)] + cohort_cycle(("cyc-a", "cyc-b", "cyc-c"))
    async with Stack(tmp_path / "s", services=SERVICES, timeout_s=120) as stack:
        client = await KubeClient.from_kubeconfig(stack.kubeconfig("manager"))
        try:
            stored = refused = 0
            for i, doc in enumerate(flood):
                kind = doc.get("kind") if isinstance(doc.get("kind"), str) else "?"
                CASES[f"into kubesim {kind}"] += 1
                ns, body = _unique(doc, i)
                try:
                    info = kind_for(str(doc.get("apiVersion")), str(kind))
                except Exception:  # a mutated apiVersion/kind: the API server has no such resource
                    refused += 1
                    continue
                try:
                    await client.create(info.kind, ns if info.namespaced else None, msgspec.json.encode(body))
                    stored += 1
                except KubeError:
                    refused += 1
            CASES["into kubesim: stored by the API server"] = stored
            CASES["into kubesim: refused by the API server"] = refused
            assert stored > len(KINDS), "the flood must reach the watcher, not only the API server's checks"

            for kind, ns, body in _valid():
                await client.create(kind, ns, body)

            async def finished() -> bool:
                raw = await client.get("Job", "default", "good-job")
                return raw is not None and msgspec.json.decode(raw).get("status", {}).get("succeeded") == 1

            await eventually(finished, timeout=120, interval=0.25, what="a valid job admitted after the flood")
            for svc in SERVICES:
                child = stack.process(svc)
                assert child is not None and child.exit_code() is None, f"{svc} died: {stack.log_path(svc)}"
            letters = await _dead_letters(stack)
            CASES["into kubesim: dead-lettered by a service"] = len(letters)
            vague = [f"{d.service}: {d.error}" for d in letters if not NAMES_A_FIELD.search(d.error)]
            assert not vague, "dead letters that name no field:\n" + "\n".join(vague[:10])
            # No loop of any process (kubesim's controllers included) failed on what it met.
            for name in (*SERVICES, "kubesim"):
                text = stack.log_path(name).read_text(errors="replace")
                assert "Traceback" not in text, f"{name} failed on hostile input:\n{text[text.index('Traceback'):][:3000]}"
        finally:
            await client.close()
