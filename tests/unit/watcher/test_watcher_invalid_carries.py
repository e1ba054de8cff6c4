"""An object kq marked invalid before a restart and fixed meanwhile is found by its condition (the
check every Workload seen passes through: the raw JSON is searched before the conditions are)."""

from __future__ import annotations

import msgspec

from kq.api.registry import decode_object
from services.watcher.invalid import InvalidObjects


def _cq(reason: str) -> bytes:
    return msgspec.json.encode({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "cq", "uid": "u", "resourceVersion": "3"},
        "spec": {},
        "status": {"conditions": [{"type": "Active", "status": "False", "reason": reason, "message": "m",
                                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
    })


def test_a_condition_of_ours_is_found_and_others_are_not() -> None:
    ours, other = _cq("InvalidSpec"), _cq("Ready")
    assert InvalidObjects._carries_ours(ours, decode_object("clusterqueue", ours))
    assert not InvalidObjects._carries_ours(other, decode_object("clusterqueue", other))
    # the name in a message alone (not a condition's reason) is not ours either
    mentioned = other.replace(b'"message":"m"', b'"message":"InvalidSpec"')
    assert not InvalidObjects._carries_ours(mentioned, decode_object("clusterqueue", mentioned))
