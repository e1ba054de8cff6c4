"""The merge-patch difference and conditional writes the watcher's cores produce."""

from __future__ import annotations

import contextlib

import msgspec
import pytest
from msgspec.structs import replace

from kq.api.kueue import Workload
from kq.api.meta import ObjectMeta
from services.watcher.core.writes import merge_diff, patch_write


@pytest.mark.parametrize(
    "old,new,want",
    [
        pytest.param({"a": 1}, {"a": 1}, {}, id="equal"),
        pytest.param({"a": 1}, {"a": 2}, {"a": 2}, id="changed-scalar"),
        pytest.param({"a": 1, "b": 2}, {"a": 1}, {"b": None}, id="removed-key-is-null"),
        pytest.param({}, {"a": {"b": 1}}, {"a": {"b": 1}}, id="added-subtree"),
        pytest.param({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}, {"a": {"c": 3}}, id="nested-only-changed"),
        pytest.param({"a": [1, 2]}, {"a": [1]}, {"a": [1]}, id="list-replaced-whole"),
        pytest.param({"a": {"b": 1}}, {"a": 5}, {"a": 5}, id="map-to-scalar"),
        pytest.param({"a": None}, {"a": None}, {}, id="null-equal"),
    ],
)
def test_merge_diff(old: dict, new: dict, want: dict) -> None:
    assert merge_diff(old, new) == want


def _wl(**meta) -> Workload:
    return Workload(metadata=ObjectMeta(name="w", namespace="ns", uid="u", resource_version="7", **meta))


def test_patch_write_carries_the_resource_version_as_precondition() -> None:
    old = _wl()
    new = replace(old, spec=replace(old.spec, active=False))
    w = patch_write("workload", old, new, status=False, why="t")
    assert w is not None
    assert msgspec.json.decode(w.patch) == {"metadata": {"resourceVersion": "7"}, "spec": {"active": False}}
    assert (w.kind, w.namespace, w.name, w.subresource, w.resource_version) == ("workload", "ns", "w", None, "7")


def test_patch_write_status_ignores_spec_and_main_ignores_status() -> None:
    old = _wl()
    new = replace(old, spec=replace(old.spec, active=False),
                  status=replace(old.status, cluster_name="worker-1"))
    status = patch_write("workload", old, new, status=True, why="t")
    main = patch_write("workload", old, new, status=False, why="t")
    assert status is not None and main is not None
    assert msgspec.json.decode(status.patch) == {"metadata": {"resourceVersion": "7"}, "status": {"clusterName": "worker-1"}}
    assert msgspec.json.decode(main.patch) == {"metadata": {"resourceVersion": "7"}, "spec": {"active": False}}


def test_patch_write_none_when_nothing_changes() -> None:
    assert patch_write("workload", _wl(), _wl(), status=True, why="t") is None
    assert patch_write("workload", _wl(), _wl(), status=False, why="t") is None


def test_patch_bytes_are_deterministic() -> None:
    old = _wl(labels={"b": "1", "a": "2"})
    new = replace(old, metadata=replace(old.metadata, labels={"a": "3", "b": "4"}))
    w1 = patch_write("workload", old, new, status=False, why="t")
    w2 = patch_write("workload", old, new, status=False, why="t")
    assert w1 is not None and w2 is not None and w1.patch == w2.patch
    assert w1.patch.index(b'"a"') < w1.patch.index(b'"b"')


def _whole_status(obj: msgspec.Struct) -> object:
    """The status a status write compares: the whole object's builtins' "status" (as it was computed)."""
    out = msgspec.to_builtins(obj)
    return out.get("status", {})


def _status_samples() -> list[msgspec.Struct]:
    from unit.watcher.watcher_builders import admitted, evicted, finished, job, reserved, workload_for

    from kq.api.kueue import ClusterQueue, ClusterQueueStatus, LocalQueue, LocalQueueStatus
    from kq.api.registry import KINDS

    meta = ObjectMeta(name="o", namespace="ns", uid="u", resource_version="3")
    samples: list[msgspec.Struct] = []
    for info in KINDS:  # every kind as decoded from a bare object: statuses left at their defaults
        for raw in (b'{"metadata": {"name": "o"}}', b'{"metadata": {"name": "o"}, "status": {}}'):
            with contextlib.suppress(msgspec.ValidationError):  # a kind that needs a spec, or has no status
                samples.append(msgspec.json.decode(raw, type=info.type))
    wl = workload_for(job())
    samples += [wl, reserved(wl), admitted(wl), evicted(admitted(wl)), finished(admitted(wl)),
                job(), replace(job(), status=replace(job().status, active=2))]
    samples += [ClusterQueue(metadata=meta), ClusterQueue(metadata=meta, status=ClusterQueueStatus(pending_workloads=3)),
                LocalQueue(metadata=meta), LocalQueue(metadata=meta, status=LocalQueueStatus(admitted_workloads=1))]
    return samples


def test_a_status_write_converts_the_status_as_the_whole_object_would() -> None:
    from services.watcher.core.writes import _status_builtins

    samples = _status_samples()
    for obj in samples:
        assert _status_builtins(obj) == _whole_status(obj), type(obj).__name__
    # and so the patches between any two states of one kind are the ones the whole objects gave
    for old in samples:
        for new in samples:
            if type(old) is not type(new) or old is new:
                continue
            want = merge_diff({"status": _whole_status(old)}, {"status": _whole_status(new)})
            got = patch_write("x", old, new, status=True, why="t")
            if not want:
                assert got is None
            else:
                assert got is not None
                body = msgspec.json.decode(got.patch)
                body["metadata"].pop("resourceVersion")
                assert {k: v for k, v in body.items() if v} == msgspec.json.decode(msgspec.json.encode(want))
