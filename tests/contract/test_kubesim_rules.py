"""kubesim's pure rules, table-driven: patches, selectors, durations, requests, tolerations."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.controllers.scheduler import pod_requests, tolerates
from kubesim.durations import parse_duration
from kubesim.errors import ApiError
from kubesim.patches import PatchError, json_patch, merge_patch, strategic_merge
from kubesim.resources import PODS
from kubesim.selectors import labels_match, parse_field_selector, parse_label_selector


@pytest.mark.parametrize(
    "target, patch, want",
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
    ids=[f"rfc7386-{i}" for i in range(10)],
)
def test_merge_patch(target: dict, patch: dict, want: dict) -> None:
    assert merge_patch(target, patch) == want


@pytest.mark.parametrize(
    "ops, want",
    [
        ([{"op": "add", "path": "/a/1", "value": "x"}], {"a": [1, "x", 2], "b": {"c": 3}}),
        ([{"op": "remove", "path": "/b/c"}], {"a": [1, 2], "b": {}}),
        ([{"op": "replace", "path": "/a/0", "value": 9}], {"a": [9, 2], "b": {"c": 3}}),
        ([{"op": "move", "from": "/b/c", "path": "/d"}], {"a": [1, 2], "b": {}, "d": 3}),
        ([{"op": "copy", "from": "/a", "path": "/b/a"}], {"a": [1, 2], "b": {"c": 3, "a": [1, 2]}}),
        ([{"op": "test", "path": "/b/c", "value": 3}], {"a": [1, 2], "b": {"c": 3}}),
    ],
    ids=["add-in-list", "remove", "replace", "move", "copy", "test-ok"],
)
def test_json_patch(ops: list, want: dict) -> None:
    assert json_patch({"a": [1, 2], "b": {"c": 3}}, ops) == want


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/b/c", "value": 4}],
        [{"op": "remove", "path": "/nope"}],
        [{"op": "replace", "path": "/a/5", "value": 1}],
        [{"op": "add", "path": "/x/y", "value": 1}],
        [{"op": "frobnicate", "path": "/a"}],
        [{"op": "add", "path": "/a/-"}],
    ],
    ids=["test-fails", "remove-missing", "index-out-of-range", "missing-parent", "unknown-op", "missing-value"],
)
def test_json_patch_errors(ops: list) -> None:
    with pytest.raises(PatchError):
        json_patch({"a": [1, 2], "b": {"c": 3}}, ops)


@pytest.mark.parametrize(
    "patch, want",
    [
        ({"spec": {"containers": [{"name": "b", "image": "new"}]}},
         {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "new"}], "tolerations": [{"key": "t"}]}),
        ({"spec": {"containers": [{"name": "c", "image": "z"}]}},
         {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}, {"name": "c", "image": "z"}],
          "tolerations": [{"key": "t"}]}),
        ({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}},
         {"containers": [{"name": "b", "image": "y"}], "tolerations": [{"key": "t"}]}),
        ({"spec": {"containers": [{"$patch": "replace"}, {"name": "z", "image": "q"}]}},
         {"containers": [{"name": "z", "image": "q"}], "tolerations": [{"key": "t"}]}),
        ({"spec": {"tolerations": [{"key": "u"}]}},
         {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}], "tolerations": [{"key": "u"}]}),
        ({"spec": {"$patch": "replace", "tolerations": []}}, {"tolerations": []}),
    ],
    ids=["merge-by-name", "append-by-name", "delete-directive", "replace-list", "tolerations-replace", "replace-map"],
)
def test_strategic_merge(patch: dict, want: dict) -> None:
    pod = {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}],
                    "tolerations": [{"key": "t"}]}}
    assert strategic_merge(pod, patch)["spec"] == want


@pytest.mark.parametrize(
    "selector, labels, want",
    [
        ("a=b", {"a": "b"}, True),
        ("a=b", {}, False),
        ("a!=b", {}, True),
        ("a in (b, c)", {"a": "c"}, True),
        ("a notin (b,c)", {"a": "c"}, False),
        ("a notin (b,c)", {}, True),
        ("a,!b", {"a": "1"}, True),
        ("a,!b", {"a": "1", "b": "2"}, False),
        ("kueue.x-k8s.io/queue-name=lq", {"kueue.x-k8s.io/queue-name": "lq"}, True),
        ("", {"x": "y"}, True),
    ],
    ids=["eq", "eq-missing", "neq-missing", "in", "notin", "notin-missing", "exists-and-not", "not-exists-fails",
         "prefixed-key", "empty"],
)
def test_label_selector(selector: str, labels: dict, want: bool) -> None:
    assert labels_match(parse_label_selector(selector), {"metadata": {"labels": labels}}) is want


@pytest.mark.parametrize("bad", ["a in ()", "a in (b", "=b", "a b"], ids=["empty-set", "unclosed", "no-key", "space"])
def test_bad_label_selector_is_400(bad: str) -> None:
    with pytest.raises(ApiError) as e:
        parse_label_selector(bad)
    assert e.value.code == 400


def test_field_selector_rejects_unknown_fields() -> None:
    assert parse_field_selector("spec.nodeName=n1,status.phase!=Failed", PODS)
    with pytest.raises(ApiError) as e:
        parse_field_selector("spec.priority=1", PODS)
    assert e.value.code == 400


@pytest.mark.parametrize("text, want", [("500ms", 0.5), ("2s", 2.0), ("1m", 60.0), ("1m30s", 90.0), ("1.5h", 5400.0)])
def test_durations(text: str, want: float) -> None:
    assert parse_duration(text) == want


@pytest.mark.parametrize("bad", ["", "5", "2 s", "s", "1d"])
def test_bad_durations(bad: str) -> None:
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration(bad)


def test_pod_requests_follow_kubernetes_rules() -> None:
    pod: dict[str, Any] = {"spec": {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "1", "example.com/gpu": "2"}}},  # requests default to limits
        ],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
        "overhead": {"cpu": "100m"},
    }}
    assert pod_requests(pod) == {"cpu": 2100, "memory": 1024**3 * 1000, "example.com/gpu": 2000, "pods": 1000}


@pytest.mark.parametrize(
    "toleration, want",
    [
        ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, True),
        ({"key": "k", "value": "v"}, True),
        ({"key": "k", "value": "w"}, False),
        ({"key": "k", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, False),
    ],
    ids=["equal", "default-equal-any-effect", "wrong-value", "exists", "exists-everything", "other-effect"],
)
def test_tolerations(toleration: dict, want: bool) -> None:
    assert tolerates([toleration], {"key": "k", "value": "v", "effect": "NoSchedule"}) is want
