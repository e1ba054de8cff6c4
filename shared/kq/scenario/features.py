"""Where a scenario uses each optional Kueue feature (the table of which are
supported is `kq.scenario.load.SUPPORTED`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

FEATURES = (
    "fairSharing",  # config.fairSharing
    "waitForPodsReady",  # config.waitForPodsReady
    "multiKueue",  # config.multiKueue, MultiKueue kinds, cluster/nominatedClusters checks, (dis)connect
    "admissionFairSharing",  # config.admissionFairSharing
    "topologyAwareScheduling",  # Topology, topologyName, topologyRequest, podset annotations, checks
    "admissionChecks",  # AdmissionCheck objects other than MultiKueue's
)

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
TAS_ANNOTATION_PREFIX = "kueue.x-k8s.io/podset-"


class FeatureUse(NamedTuple):
    feature: str
    path: str  # where in the file, e.g. "steps[2].apply.spec.podSets[0].topologyRequest"
    what: str  # what was found there


def unsupported_message(use: FeatureUse) -> str:
    what = f"{use.what}; " if use.what else ""
    return f"{use.path}: not supported by kq yet ({what}feature {use.feature})"


def config_uses(config: Mapping[str, Any]) -> Iterator[FeatureUse]:
    for key in sorted(config):
        if key == "waitForPodsReady":
            wfpr = config[key]
            # v1beta1's enable: false switches it off; in v1beta2 being present means on.
            if isinstance(wfpr, Mapping) and wfpr.get("enable") is False:
                continue
        if key in FEATURES:
            yield FeatureUse(key, f"config.{key}", "")


def object_uses(body: Mapping[str, Any], path: str) -> Iterator[FeatureUse]:
    """Feature uses inside one object document."""
    kind = body.get("kind")
    spec = body.get("spec")
    if not isinstance(spec, Mapping):
        spec = {}
    if kind == "Topology":
        yield FeatureUse("topologyAwareScheduling", path, "kind Topology")
    elif kind in ("MultiKueueConfig", "MultiKueueCluster"):
        yield FeatureUse("multiKueue", path, f"kind {kind}")
    elif kind == "AdmissionCheck":
        if spec.get("controllerName") == MULTIKUEUE_CONTROLLER:
            what = f"an AdmissionCheck for {MULTIKUEUE_CONTROLLER}"
            yield FeatureUse("multiKueue", f"{path}.spec.controllerName", what)
        else:
            yield FeatureUse("admissionChecks", path, "kind AdmissionCheck")
    elif kind == "ResourceFlavor" and "topologyName" in spec:
        yield FeatureUse("topologyAwareScheduling", f"{path}.spec.topologyName", "ResourceFlavor topologyName")
    elif kind == "Job" and spec.get("managedBy") == MULTIKUEUE_CONTROLLER:
        yield FeatureUse("multiKueue", f"{path}.spec.managedBy", f"a Job managed by {MULTIKUEUE_CONTROLLER}")
    elif kind == "Workload":
        for i, ps in enumerate(spec.get("podSets") or []):
            if isinstance(ps, Mapping) and "topologyRequest" in ps:
                yield FeatureUse(
                    "topologyAwareScheduling", f"{path}.spec.podSets[{i}].topologyRequest", "podSet topologyRequest"
                )
    yield from _tas_annotations(body, path)


def _tas_annotations(node: Any, path: str) -> Iterator[FeatureUse]:
    """TAS pod-set annotations anywhere (Job pod templates, Workload pod sets, Pods)."""
    if isinstance(node, Mapping):
        for key in node:
            sub = f"{path}.{key}"
            if key == "annotations" and isinstance(node[key], Mapping):
                for ann in sorted(node[key]):
                    if str(ann).startswith(TAS_ANNOTATION_PREFIX):
                        yield FeatureUse("topologyAwareScheduling", f"{sub}.{ann}", f"annotation {ann}")
            else:
                yield from _tas_annotations(node[key], sub)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _tas_annotations(item, f"{path}[{i}]")


def check_uses(workload_fields: Mapping[str, Any], path: str) -> Iterator[FeatureUse]:
    """Feature uses in one workload expectation (fields as written, camelCase)."""
    if "topology" in workload_fields:
        yield FeatureUse("topologyAwareScheduling", f"{path}.topology", "a topology check")
    for f in ("cluster", "nominatedClusters"):
        if f in workload_fields:
            yield FeatureUse("multiKueue", f"{path}.{f}", f"a {f} check")


def step_uses(step: Mapping[str, Any], path: str) -> Iterator[FeatureUse]:
    for act in ("disconnect", "reconnect"):
        if act in step:
            yield FeatureUse("multiKueue", f"{path}.{act}", f"a {act} step")
