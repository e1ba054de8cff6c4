"""The merge-patch difference and conditional writes the watcher's cores produce."""

from __future__ import annotations

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
