"""Loading scenario files: every example loads, every rejection names the field, unsupported features exit 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from scenario_docs import EXAMPLES, base, workload

from kq.scenario import load
from kq.scenario.load import ScenarioError, duration_ms, load_file, load_text
from kq.scenario.model import (
    ApplyAction,
    ConnectionAction,
    DeleteAction,
    FinishAction,
    ObjectRef,
    PatchStatusAction,
    PodsAction,
    TopologyDomain,
)

EXAMPLE_FILES = sorted(EXAMPLES.glob("*/*.yaml"))


@pytest.fixture
def all_supported(monkeypatch: pytest.MonkeyPatch) -> None:
    for feature in load.SUPPORTED:
        monkeypatch.setitem(load.SUPPORTED, feature, True)


def problems(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_text(yaml.safe_dump(doc), "t.yaml", stem=doc.get("name"))
    return info.value.problems


def test_examples_are_there() -> None:
    assert len(EXAMPLE_FILES) >= 8, f"no shared examples under {EXAMPLES}"


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_example_loads_when_every_feature_is_supported(path, all_supported) -> None:
    scenario = load_file(path)
    assert scenario.name == path.stem
    assert scenario.checks


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("core/*.yaml")), ids=lambda p: p.stem)
def test_core_examples_load_with_the_current_table(path) -> None:
    assert load_file(path).name == path.stem


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("tas/*.yaml")) + sorted(
    (Path(__file__).resolve().parents[3] / "scenarios" / "tas").glob("*.yaml")), ids=lambda p: p.stem)
def test_tas_scenarios_load_now_that_tas_is_supported(path) -> None:
    assert load_file(path).name == path.stem


@pytest.mark.parametrize(
    "directory,feature,first_path",
    [
        ("podsready", "waitForPodsReady", "config.waitForPodsReady"),
        ("multikueue", "multiKueue", "config.multiKueue"),
        ("tas", "topologyAwareScheduling", "objects.manager[1]"),
    ],
)
def test_examples_of_unsupported_features_are_rejected_naming_the_field(
    directory: str, feature: str, first_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(load.SUPPORTED, feature, False)
    for path in sorted(EXAMPLES.glob(f"{directory}/*.yaml")):
        with pytest.raises(ScenarioError) as info:
            load_file(path)
        assert any(p.startswith(f"{first_path}: not supported by kq yet") and feature in p for p in info.value.problems), (
            path.name,
            info.value.problems,
        )


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation setting doc[path] (dotted, with [i] list indexes) to value."""

    def mutate(doc: dict[str, Any]) -> None:
        keys: list[Any] = []
        for part in path.split("."):
            if "[" in part:
                name, idx = part[:-1].split("[")
                keys += [name, int(idx)]
            else:
                keys.append(part)
        node: Any = doc
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value

    return mutate


def _del(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc.pop(key)


def _step(step: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc["steps"].append(step)


def _check(check: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc.__setitem__("checks", [check])


def _wl_check(fields: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return _check({"at": "settled", "workloads": {"demo/w1": fields}})


def _cq_check(fields: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return _check({"at": "settled", "clusterQueues": {"cq": fields}})


REJECTIONS = [
    ("unknown-top-level-key", _set("extra", 1), "extra: unknown field"),
    ("missing-checks", _del("checks"), "checks: required field missing"),
    ("missing-description", _del("description"), "description: required field missing"),
    ("empty-checks", _set("checks", []), "checks: must be a non-empty list"),
    ("name-not-kebab", _set("name", "Bad_Name"), "name: 'Bad_Name' is not kebab-case"),
    ("config-unknown-key", _set("config", {"bogus": {}}), "config.bogus: unknown field"),
    ("config-nested-unknown", _set("config", {"fairSharing": {"bogus": 1}}), "config.fairSharing.bogus: unknown field"),
    ("two-managers", _set("clusters", {"a": {"role": "manager"}, "b": {"role": "manager"}}), "clusters: exactly one"),
    ("bad-role", _set("clusters", {"manager": {"role": "boss"}}), "clusters.manager.role: invalid enum value"),
    ("objects-unknown-cluster", _set("objects", {"worker-9": []}), "objects.worker-9: unknown cluster"),
    ("object-unknown-field", _set("objects[2].spec.cohort", "x"), "objects.manager[2] (ClusterQueue cq): spec.cohort: unknown field"),
    ("object-unknown-kind", _set("objects[0].kind", "Gadget"), "objects.manager[0]"),
    ("object-bad-quantity", _set("objects[2].spec.resourceGroups[0].flavors[0].resources[0].nominalQuota", "4x"),
     "objects.manager[2] (ClusterQueue cq): spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"),
    ("step-bad-at", _set("steps[0].at", "3x"), "steps[0].at: bad duration '3x'"),
    ("step-at-missing", _set("steps[1]", {"finish": "demo/w1"}), "steps[1].at: required field missing"),
    ("steps-out-of-order", _step({"at": "500ms", "finish": "demo/w1"}),
     "steps[2].at: steps must be in order of at"),
    ("step-two-actions", _set("steps[1].fail", "demo/w1"), "steps[1]: exactly one action"),
    ("step-no-action", _step({"at": "2s"}), "steps[2]: exactly one action"),
    ("step-unknown-key", _set("steps[1].bogus", 1), "steps[1].bogus: unknown field"),
    ("step-unknown-cluster", _set("steps[1].cluster", "worker-9"), "steps[1].cluster: unknown cluster 'worker-9'"),
    ("finish-not-a-key", _set("steps[1].finish", "w1"), "steps[1].finish: expected ns/name, got 'w1'"),
    ("pods-without-ready", _step({"at": "2s", "pods": {"workload": "demo/w1"}}),
     "steps[2].pods: exactly one of ready, neverReady required"),
    ("pods-both", _step({"at": "2s", "pods": {"workload": "demo/w1", "ready": True, "neverReady": True}}),
     "steps[2].pods: exactly one of ready, neverReady required"),
    ("pods-never-ready-false", _step({"at": "2s", "pods": {"workload": "demo/w1", "neverReady": False}}),
     "steps[2].pods.neverReady: must be true"),
    ("pods-ready-not-bool", _step({"at": "2s", "pods": {"workload": "demo/w1", "ready": "no"}}),
     "steps[2].pods.ready: expected bool, got str"),
    ("pods-unknown-key", _step({"at": "2s", "pods": {"workload": "demo/w1", "ready": True, "x": 1}}),
     "steps[2].pods.x: unknown field"),
    ("delete-unknown-kind", _step({"at": "2s", "delete": {"kind": "Gadget", "name": "a"}}),
     "steps[2].delete.kind: unknown kind 'Gadget'"),
    ("delete-needs-namespace", _step({"at": "2s", "delete": {"kind": "Workload", "name": "w1"}}),
     "steps[2].delete.namespace: Workload is namespaced"),
    ("delete-cluster-scoped-with-namespace",
     _step({"at": "2s", "delete": {"kind": "ClusterQueue", "name": "cq", "namespace": "demo"}}),
     "steps[2].delete.namespace: ClusterQueue is cluster-scoped"),
    ("apply-invalid-object", _set("steps[0].apply.spec.podSets[0].count", -1),
     "steps[0].apply (Workload demo/w1): spec.podSets[0].count"),
    ("patch-status-without-status", _step({"at": "2s", "patchStatus": {"kind": "Workload", "namespace": "demo", "name": "w1"}}),
     "steps[2].patchStatus.status: required field missing"),
    ("disconnect-unknown-cluster", _step({"at": "2s", "disconnect": "worker-9"}), "steps[2].disconnect: unknown cluster"),
    ("check-bad-at", _set("checks[0].at", "soon"), "checks[0].at: bad at 'soon'"),
    ("check-checks-nothing", _check({"at": "1s"}), "checks[0]: checks nothing"),
    ("check-unknown-key", _set("checks[0].bogus", 1), "checks[0].bogus: unknown field"),
    ("workload-key-not-ns-name", _check({"at": "1s", "workloads": {"w1": {"state": "admitted"}}}),
     "checks[0].workloads.w1: expected ns/name, got 'w1'"),
    ("workload-bad-state", _wl_check({"state": "running"}), "checks[0].workloads.demo/w1.state: invalid enum value 'running'"),
    ("workload-unknown-field", _wl_check({"colour": "red"}), "checks[0].workloads.demo/w1.colour: unknown field"),
    ("workload-negative-evictions", _wl_check({"evictions": -1}), "checks[0].workloads.demo/w1.evictions: expected int >= 0"),
    ("workload-bad-preemption-reason", _wl_check({"preemptionReason": "Because"}),
     "checks[0].workloads.demo/w1.preemptionReason: invalid enum value 'Because'"),
    ("workload-succeeded-not-bool", _wl_check({"succeeded": "yes"}), "checks[0].workloads.demo/w1.succeeded: expected bool"),
    ("workload-flavors-shape", _wl_check({"flavors": {"main": "default"}}), "checks[0].workloads.demo/w1.flavors"),
    ("cq-unknown-field", _cq_check({"running": 1}), "checks[0].clusterQueues.cq.running: unknown field"),
    ("cq-count-not-int", _cq_check({"pendingWorkloads": "1"}), "checks[0].clusterQueues.cq.pendingWorkloads: expected int"),
    ("cq-bad-quantity", _cq_check({"usage": {"default": {"cpu": "3x"}}}),
     "checks[0].clusterQueues.cq.usage.default.cpu: bad quantity '3x'"),
    ("cq-active-not-bool", _cq_check({"active": 1}), "checks[0].clusterQueues.cq.active: expected bool"),
    ("remote-unknown-cluster", _check({"at": "1s", "remote": {"worker-9": {"absent": ["Workload demo/w1"]}}}),
     "checks[0].remote.worker-9: unknown cluster"),
    ("remote-bad-entry", _check({"at": "1s", "remote": {"manager": {"absent": ["demo/w1"]}}}),
     "checks[0].remote.manager.absent[0]: expected 'Kind ns/name'"),
    ("remote-unknown-kind", _check({"at": "1s", "remote": {"manager": {"present": ["Gadget demo/w1"]}}}),
     "checks[0].remote.manager.present[0]: unknown kind 'Gadget'"),
    ("remote-unknown-key", _check({"at": "1s", "remote": {"manager": {"gone": []}}}), "checks[0].remote.manager.gone: unknown field"),
]


@pytest.mark.parametrize("mutate,expected", [(m, e) for _, m, e in REJECTIONS], ids=[i for i, _, _ in REJECTIONS])
def test_rejection_names_the_field(mutate, expected: str) -> None:
    doc = base()
    mutate(doc)
    found = problems(doc)
    assert any(expected in p for p in found), found


def test_every_problem_is_reported_not_only_the_first() -> None:
    doc = base()
    doc["extra"] = 1
    doc["steps"][1]["finish"] = "w1"
    doc["checks"][0]["workloads"]["demo/w1"]["state"] = "running"
    found = problems(doc)
    assert len(found) == 3, found


def test_name_must_match_the_file_name(tmp_path) -> None:
    doc = base()
    path = tmp_path / "other-name.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ScenarioError) as info:
        load_file(path)
    assert info.value.problems == ["name: 't' differs from the file name 'other-name'"]


def test_unreadable_yaml_is_an_error() -> None:
    with pytest.raises(ScenarioError) as info:
        load_text("name: [unclosed", "t.yaml")
    assert info.value.problems[0].startswith("invalid YAML")


UNSUPPORTED = [
    ("wait-for-pods-ready", _set("config", {"waitForPodsReady": {"timeout": "2s"}}), "config.waitForPodsReady", "waitForPodsReady"),
    ("multikueue-config", _set("config", {"multiKueue": {"origin": "mk"}}), "config.multiKueue", "multiKueue"),
    ("admission-fair-sharing", _set("config", {"admissionFairSharing": {}}), "config.admissionFairSharing", "admissionFairSharing"),
    ("topology-object",
     lambda d: d["objects"].append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "dc"},
                                    "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}),
     "objects.manager[4]", "topologyAwareScheduling"),
    ("flavor-topology-name", _set("objects[1].spec", {"topologyName": "dc"}), "objects.manager[1].spec.topologyName",
     "topologyAwareScheduling"),
    ("podset-topology-request", _set("steps[0].apply.spec.podSets[0].topologyRequest", {"required": "rack"}),
     "steps[0].apply.spec.podSets[0].topologyRequest", "topologyAwareScheduling"),
    ("podset-topology-annotation",
     _set("steps[0].apply.spec.podSets[0].template.metadata", {"annotations": {"kueue.x-k8s.io/podset-required-topology": "rack"}}),
     "steps[0].apply.spec.podSets[0].template.metadata.annotations.kueue.x-k8s.io/podset-required-topology",
     "topologyAwareScheduling"),
    ("topology-check", _wl_check({"topology": {"main": [{"values": ["r1"], "count": 1}]}}),
     "checks[0].workloads.demo/w1.topology", "topologyAwareScheduling"),
    ("cluster-check", _wl_check({"cluster": "worker-1"}), "checks[0].workloads.demo/w1.cluster", "multiKueue"),
    ("disconnect-step", lambda d: (d.__setitem__("clusters", {"manager": {"role": "manager"}, "worker-1": {"role": "worker"}}),
                                   d["steps"].append({"at": "2s", "disconnect": "worker-1"})),
     "steps[2].disconnect", "multiKueue"),
    ("admission-check",
     lambda d: d["objects"].append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "ac"},
                                    "spec": {"controllerName": "example.com/check"}}),
     "objects.manager[4]", "admissionChecks"),
]


@pytest.mark.parametrize("mutate,path,feature", [(m, p, f) for _, m, p, f in UNSUPPORTED], ids=[i for i, *_ in UNSUPPORTED])
def test_unsupported_feature_is_rejected_naming_the_field(mutate, path: str, feature: str, monkeypatch) -> None:
    monkeypatch.setitem(load.SUPPORTED, feature, False)
    doc = base()
    mutate(doc)
    found = problems(doc)
    assert any(p.startswith(f"{path}: not supported by kq yet") and f"feature {feature}" in p for p in found), found


@pytest.mark.parametrize("mutate,path,feature", [(m, p, f) for _, m, p, f in UNSUPPORTED], ids=[i for i, *_ in UNSUPPORTED])
def test_the_same_files_load_once_the_feature_is_supported(mutate, path: str, feature: str, all_supported) -> None:
    doc = base()
    mutate(doc)
    load_text(yaml.safe_dump(doc), "t.yaml", stem="t")


def test_wait_for_pods_ready_switched_off_is_not_a_use(monkeypatch) -> None:
    monkeypatch.setitem(load.SUPPORTED, "waitForPodsReady", False)
    doc = base()
    doc["config"] = {"waitForPodsReady": {"enable": False}}
    assert load_text(yaml.safe_dump(doc), "t.yaml", stem="t").kueue_config == doc["config"]


@pytest.mark.parametrize(
    "text,ms",
    [("0s", 0), ("500ms", 500), ("2s", 2000), ("1.5s", 1500), ("1m", 60000), ("3500ms", 3500),
     ("2", None), ("1h", None), ("-1s", None), ("", None), (3, None)],
)
def test_duration_ms(text, ms) -> None:
    assert duration_ms(text) == ms


def test_resolved_scenario(all_supported) -> None:
    doc = base()
    doc["clusters"] = {"worker-1": {"role": "worker"}, "manager": {"role": "manager"}}
    doc["objects"] = {"manager": doc["objects"], "worker-1": [doc["objects"][0]]}
    doc["steps"] = [
        {"at": "0s", "apply": workload("w1")},
        {"at": "500ms", "cluster": "worker-1", "delete": {"kind": "Namespace", "name": "demo"}},
        {"at": "1s", "fail": "demo/w1"},
        {"at": "1s", "pods": {"workload": "demo/w1", "neverReady": True}},
        {"at": "2s", "pods": {"workload": "demo/w1", "ready": False}},
        {"at": "2s", "disconnect": "worker-1"},
        {"at": "3s", "reconnect": "worker-1"},
        {"at": "4s", "patchStatus": {"kind": "Workload", "namespace": "demo", "name": "w1",
                                     "status": {"nominatedClusterNames": ["worker-1"]}}},
    ]
    doc["checks"] = [
        {"at": "1.5s", "workloads": {"demo/w1": {"state": "admitted", "nominatedClusters": ["b", "a"],
                                                  "topology": {"main": [{"values": ["r2"], "count": 1},
                                                                        {"values": ["r1"], "count": 3}]}}},
         "clusterQueues": {"cq": {"usage": {"default": {"cpu": 6}}, "active": True}},
         "remote": {"worker-1": {"absent": ["Workload demo/w1", "Namespace demo"]}}},
        {"at": "settled", "workloads": {"demo/w1": {"state": "finished", "succeeded": False}}},
    ]
    sc = load_text(yaml.safe_dump(doc), "t.yaml", stem="t")
    assert [(c.name, c.role) for c in sc.clusters] == [("manager", "manager"), ("worker-1", "worker")]
    assert sc.manager == "manager"
    assert [o.kind_info.kind for o in sc.objects["manager"]] == ["Namespace", "ResourceFlavor", "ClusterQueue", "LocalQueue"]
    assert [(s.at_ms, s.cluster) for s in sc.steps] == [
        (0, "manager"), (500, "worker-1"), (1000, "manager"), (1000, "manager"), (2000, "manager"),
        (2000, "manager"), (3000, "manager"), (4000, "manager")]
    acts = [s.action for s in sc.steps]
    assert isinstance(acts[0], ApplyAction) and acts[0].obj.obj.metadata.name == "w1"
    assert acts[1] == DeleteAction(kind="Namespace", ref=ObjectRef(namespace=None, name="demo"))
    assert acts[2] == FinishAction(ref=ObjectRef(namespace="demo", name="w1"), succeeded=False)
    assert acts[3] == PodsAction(ref=ObjectRef(namespace="demo", name="w1"), ready=None, never_ready=True)
    assert acts[4] == PodsAction(ref=ObjectRef(namespace="demo", name="w1"), ready=False)
    assert acts[5:7] == [ConnectionAction(target="worker-1", connected=False), ConnectionAction(target="worker-1", connected=True)]
    assert acts[7] == PatchStatusAction(kind="Workload", ref=ObjectRef(namespace="demo", name="w1"),
                                        status={"nominatedClusterNames": ["worker-1"]})
    first, settled = sc.checks
    assert (first.at_ms, first.at_label, settled.at_ms, settled.at_label) == (1500, "1500ms", None, "settled")
    w = first.workloads["demo/w1"]
    assert w.nominated_clusters == ("b", "a")
    assert w.topology == {"main": (TopologyDomain(values=("r1",), count=3), TopologyDomain(values=("r2",), count=1))}
    assert first.cluster_queues["cq"].usage == {"default": {"cpu": "6"}}
    assert [o.label() for o in first.remote["worker-1"].absent] == ["Workload demo/w1", "Namespace demo"]
    assert settled.workloads["demo/w1"].succeeded is False
