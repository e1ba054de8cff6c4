"""Parse and validate a scenario file into a resolved `Scenario`.

Every problem is reported with the path of the field (`steps[3].pods.ready`),
all problems at once; nothing runs until the whole file is valid. Objects are
validated through kq.api, so a Kueue field kq does not support is an error
here, before any process starts. SUPPORTED is the one table of optional
features the services can do; a scenario using another fails with exit 2.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import yaml
from msgspec import UNSET, UnsetType

from kq.api import InputError, LoadedObject, load_object
from kq.config import KueueConfig
from kq.quantity import parse_quantity
from kq.scenario import features
from kq.scenario.model import (
    TOP_LEVEL_KEYS,
    Action,
    ApplyAction,
    Check,
    CheckFile,
    Cluster,
    ClusterFile,
    ClusterQueueExpect,
    ClusterQueueExpectFile,
    ConnectionAction,
    DeleteAction,
    FinishAction,
    ObjectRef,
    PatchStatusAction,
    PodsAction,
    RemoteExpect,
    RemoteExpectFile,
    RemoteObject,
    Scenario,
    Step,
    StepFile,
    TopologyDomain,
    WorkloadExpect,
    WorkloadExpectFile,
    format_ms,
)
from kq.scenario.refs import is_namespaced, known_kind

# The optional features kq's services implement. Extend as services land.
SUPPORTED: dict[str, bool] = {
    "fairSharing": True,
    "waitForPodsReady": True,
    "multiKueue": True,
    "admissionFairSharing": False,
    "topologyAwareScheduling": True,
    "admissionChecks": False,
}
assert set(SUPPORTED) == set(features.FEATURES)

STEP_ACTIONS = ("apply", "delete", "finish", "fail", "pods", "disconnect", "reconnect", "patchStatus")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)$")
_NAME = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"
_KEY = re.compile(rf"^{_NAME}/{_NAME}$")
_SCENARIO_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_UNIT_MS = {"ms": 1.0, "s": 1000.0, "m": 60000.0}

T = TypeVar("T")


class ScenarioError(Exception):
    """The file is invalid or needs something kq does not support yet (exit 2)."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(f"{source}: {p}" for p in problems))


def duration_ms(text: Any) -> int | None:
    """FORMAT.md durations: "500ms", "2s", "1.5s", "1m"; None when malformed."""
    if not isinstance(text, str):
        return None
    m = _DURATION.match(text)
    if not m:
        return None
    return round(float(m.group(1)) * _UNIT_MS[m.group(2)])


def load_file(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ScenarioError(str(p), [f"cannot read: {e.strerror}"]) from None
    return load_text(text, str(p), stem=p.stem)


def load_text(text: str, source: str = "<scenario>", stem: str | None = None) -> Scenario:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ScenarioError(source, [f"invalid YAML: {e}"]) from None
    loader = _Loader()
    scenario = loader.scenario(raw, stem)
    if loader.problems or scenario is None:
        raise ScenarioError(source, loader.problems or ["invalid"])
    return scenario


def _convert_message(err: msgspec.ValidationError, path: str) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.pods.ready`" -> "steps[3].pods.ready: expected int, got str"."""
    text = str(err)
    where = ""
    if " - at `$" in text:
        text, _, loc = text.partition(" - at `$")
        where = loc.rstrip("`")
    m = re.match(r"Object contains unknown field `(.+)`$", text)
    if m:
        return f"{_join(path + where, m.group(1))}: unknown field"
    m = re.match(r"Object missing required field `(.+)`$", text)
    if m:
        return f"{_join(path + where, m.group(1))}: required field missing"
    text = text.replace("`", "")
    return f"{path + where or '(top level)'}: {text[:1].lower()}{text[1:]}"


def _join(base: str, name: str) -> str:
    return f"{base}.{name}" if base else name


class _Loader:
    """Collects every problem instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.clusters: dict[str, str] = {}
        self.manager = "manager"

    def bad(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def convert(self, raw: Any, typ: type[T], path: str) -> T | None:
        try:
            return msgspec.convert(raw, typ)
        except msgspec.ValidationError as e:
            self.problems.append(_convert_message(e, path))
            return None

    def unsupported(self, uses: Iterator[features.FeatureUse]) -> None:
        for use in uses:
            if not SUPPORTED[use.feature]:
                self.problems.append(features.unsupported_message(use))

    # --- top level ---------------------------------------------------------------------

    def scenario(self, raw: Any, stem: str | None) -> Scenario | None:
        if not isinstance(raw, dict):
            self.bad("(top level)", "must be a mapping")
            return None
        for key in raw:
            if key not in TOP_LEVEL_KEYS:
                self.bad(str(key), "unknown field")
        name = self.text(raw, "name", required=True)
        description = self.text(raw, "description", required=True)
        source = self.text(raw, "source", required=False)
        if name is not None:
            if not _SCENARIO_NAME.match(name):
                self.bad("name", f"{name!r} is not kebab-case")
            elif stem is not None and stem != name:
                self.bad("name", f"{name!r} differs from the file name {stem!r}")
        clusters = self.cluster_list(raw.get("clusters"))
        config = self.config(raw.get("config") or {})
        objects = self.objects(raw.get("objects"))
        lists: dict[str, list[Any] | None] = {}
        for key in ("steps", "checks"):
            value = raw.get(key)
            if key not in raw:
                self.bad(key, "required field missing")
            elif not isinstance(value, list):
                self.bad(key, "must be a list")
            lists[key] = value if isinstance(value, list) else None
        steps = self.steps(lists["steps"] or [])
        checks = self.checks(lists["checks"]) if lists["checks"] is not None else []
        if name is None or description is None:
            return None
        return Scenario(
            name=name,
            description=description,
            source=source,
            kueue_config=config,
            clusters=clusters,
            objects=objects,
            steps=tuple(steps),
            checks=tuple(checks),
        )

    def text(self, raw: dict[str, Any], key: str, required: bool) -> str | None:
        value = raw.get(key)
        if value is None:
            if required:
                self.bad(key, "required field missing")
            return None
        if not isinstance(value, str):
            self.bad(key, f"expected a string, got {type(value).__name__}")
            return None
        return value

    def cluster_list(self, raw: Any) -> tuple[Cluster, ...]:
        declared: list[Cluster] = []
        if raw is None:
            declared = [Cluster(name="manager", role="manager")]
        elif not isinstance(raw, dict):
            self.bad("clusters", "must be a mapping from cluster name to {role: manager|worker}")
        else:
            for name, spec in raw.items():
                path = f"clusters.{name}"
                if not isinstance(name, str) or not _SCENARIO_NAME.match(name):
                    self.bad(path, "cluster names must be DNS labels")
                    continue
                doc = self.convert(spec, ClusterFile, path)
                if doc is not None:
                    declared.append(Cluster(name=name, role=doc.role))
        managers = [c.name for c in declared if c.role == "manager"]
        if len(managers) != 1 and (raw is None or isinstance(raw, dict)):
            self.bad("clusters", f"exactly one cluster must have role manager, got {len(managers)}")
        self.manager = managers[0] if managers else "manager"
        self.clusters = {c.name: c.role for c in declared}
        return tuple(sorted(declared, key=lambda c: (c.role != "manager", c.name)))

    def config(self, raw: Any) -> dict[str, Any]:
        if not isinstance(raw, dict):
            self.bad("config", "must be a mapping (Kueue Configuration fields)")
            return {}
        self.unsupported(features.config_uses(raw))
        self.convert(raw, KueueConfig, "config")
        return raw

    def objects(self, raw: Any) -> dict[str, tuple[LoadedObject, ...]]:
        if raw is None:
            raw = {}
        if isinstance(raw, list):
            raw = {self.manager: raw}
        if not isinstance(raw, dict):
            self.bad("objects", "must be a list of objects or a mapping from cluster to a list")
            return {}
        out: dict[str, tuple[LoadedObject, ...]] = {}
        for cluster, docs in raw.items():
            if cluster not in self.clusters:
                self.bad(f"objects.{cluster}", "unknown cluster (not in clusters)")
                continue
            if not isinstance(docs, list):
                self.bad(f"objects.{cluster}", "must be a list of objects")
                continue
            loaded = [self.object(d, f"objects.{cluster}[{i}]") for i, d in enumerate(docs)]
            out[cluster] = tuple(o for o in loaded if o is not None)
        return out

    def object(self, body: Any, path: str) -> LoadedObject | None:
        if not isinstance(body, dict):
            self.bad(path, "an object must be a mapping")
            return None
        self.unsupported(features.object_uses(body, path))
        try:
            return load_object(body, path)
        except InputError as e:
            msg = str(e)
            self.problems.append(msg if msg.startswith(path) else f"{path}: {msg}")
            return None

    # --- steps -------------------------------------------------------------------------

    def steps(self, raw: list[Any]) -> list[Step]:
        out: list[Step] = []
        last = 0
        for i, item in enumerate(raw):
            path = f"steps[{i}]"
            if not isinstance(item, dict):
                self.bad(path, "a step must be a mapping")
                continue
            self.unsupported(features.step_uses(item, path))
            doc = self.convert(item, StepFile, path)
            if doc is None:
                continue
            at = duration_ms(doc.at)
            if at is None:
                self.bad(f"{path}.at", f"bad duration {doc.at!r} (use e.g. 500ms, 2s, 1m)")
            elif at < last:
                self.bad(f"{path}.at", f"steps must be in order of at ({doc.at} comes after {format_ms(last)})")
            last = max(last, at or 0)
            acts = [a for a in STEP_ACTIONS if a in item]
            if len(acts) != 1:
                self.bad(path, f"exactly one action of {', '.join(STEP_ACTIONS)} required, got {acts or 'none'}")
                continue
            cluster = self.manager
            if doc.cluster is not UNSET:
                if acts[0] in ("disconnect", "reconnect"):
                    self.bad(f"{path}.cluster", f"not used by {acts[0]} (it names its cluster)")
                elif doc.cluster not in self.clusters:
                    self.bad(f"{path}.cluster", f"unknown cluster {doc.cluster!r}")
                cluster = doc.cluster
            action = self.action(acts[0], doc, f"{path}.{acts[0]}")
            if action is not None and at is not None:
                out.append(Step(index=i, at_ms=at, cluster=cluster, action=action))
        return out

    def action(self, act: str, doc: StepFile, path: str) -> Action | None:
        if act == "apply":
            obj = self.object(doc.apply, path)
            return ApplyAction(obj=obj) if obj is not None else None
        if act == "delete":
            d = doc.delete
            assert d is not UNSET
            ref = self.kind_ref(d.kind, d.namespace, d.name, path)
            return DeleteAction(kind=d.kind, ref=ref) if ref is not None else None
        if act in ("finish", "fail"):
            ref = self.key(getattr(doc, act), path)
            return FinishAction(ref=ref, succeeded=act == "finish") if ref is not None else None
        if act == "pods":
            p = doc.pods
            assert p is not UNSET
            ref = self.key(p.workload, f"{path}.workload")
            given = [f for f, v in (("ready", p.ready), ("neverReady", p.never_ready)) if v is not UNSET]
            if len(given) != 1:
                self.bad(path, f"exactly one of ready, neverReady required, got {given or 'none'}")
                return None
            if p.never_ready is False:
                self.bad(f"{path}.neverReady", "must be true (use ready: true to make pods ready)")
                return None
            if ref is None:
                return None
            if p.never_ready is True:
                return PodsAction(ref=ref, ready=None, never_ready=True)
            assert isinstance(p.ready, bool)
            return PodsAction(ref=ref, ready=p.ready)
        if act in ("disconnect", "reconnect"):
            target = getattr(doc, act)
            if target not in self.clusters:
                self.bad(path, f"unknown cluster {target!r}")
                return None
            if target == self.manager:
                self.bad(path, "the manager cannot lose its connection to itself; name a worker")
                return None
            return ConnectionAction(target=target, connected=act == "reconnect")
        assert act == "patchStatus"
        ps = doc.patch_status
        assert ps is not UNSET
        ref = self.kind_ref(ps.kind, ps.namespace, ps.name, path)
        return PatchStatusAction(kind=ps.kind, ref=ref, status=ps.status) if ref is not None else None

    def key(self, value: Any, path: str) -> ObjectRef | None:
        if not isinstance(value, str) or not _KEY.match(value):
            self.bad(path, f"expected ns/name, got {value!r}")
            return None
        ns, name = value.split("/")
        return ObjectRef(namespace=ns, name=name)

    def kind_ref(self, kind: str, namespace: str | None, name: str, path: str) -> ObjectRef | None:
        if not known_kind(kind):
            self.bad(f"{path}.kind", f"unknown kind {kind!r}")
            return None
        if is_namespaced(kind) and not namespace:
            self.bad(f"{path}.namespace", f"{kind} is namespaced: namespace required")
            return None
        if not is_namespaced(kind) and namespace:
            self.bad(f"{path}.namespace", f"{kind} is cluster-scoped: no namespace")
            return None
        return ObjectRef(namespace=namespace, name=name)

    # --- checks ------------------------------------------------------------------------

    def checks(self, raw: list[Any]) -> list[Check]:
        if not raw:
            self.bad("checks", "must be a non-empty list")
        out: list[Check] = []
        for i, item in enumerate(raw):
            path = f"checks[{i}]"
            if not isinstance(item, dict):
                self.bad(path, "a check must be a mapping")
                continue
            parts = {k: item[k] for k in ("workloads", "clusterQueues", "remote") if k in item}
            shell = {k: v for k, v in item.items() if k not in parts}
            doc = self.convert(shell, CheckFile, path)
            if doc is None:
                continue
            at = None if doc.at == "settled" else duration_ms(doc.at)
            if doc.at != "settled" and at is None:
                self.bad(f"{path}.at", f"bad at {doc.at!r} (settled or a duration such as 3s)")
            if not any(parts.values()):
                self.bad(path, "checks nothing (give workloads, clusterQueues or remote)")
            workloads = self.mapping_of(parts.get("workloads"), f"{path}.workloads", self.workload_expect)
            cqs = self.mapping_of(parts.get("clusterQueues"), f"{path}.clusterQueues", self.cq_expect)
            remote = self.mapping_of(parts.get("remote"), f"{path}.remote", self.remote_expect)
            if doc.at == "settled" or at is not None:
                out.append(Check(index=i, at_ms=at, workloads=workloads, cluster_queues=cqs, remote=remote))
        return out

    def mapping_of(self, raw: Any, path: str, one: Callable[[str, Any, str], T | None]) -> dict[str, T]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            self.bad(path, "must be a mapping")
            return {}
        out: dict[str, T] = {}
        for key, value in raw.items():
            item = one(str(key), value, f"{path}.{key}")
            if item is not None:
                out[str(key)] = item
        return out

    def workload_expect(self, key: str, raw: Any, path: str) -> WorkloadExpect | None:
        self.key(key, path)
        if isinstance(raw, Mapping):
            self.unsupported(features.check_uses(raw, path))
        doc = self.convert(raw, WorkloadExpectFile, path)
        if doc is None:
            return None
        topology: dict[str, tuple[TopologyDomain, ...]] | UnsetType = UNSET
        if doc.topology is not UNSET:
            topology = {
                ps: tuple(sorted(TopologyDomain(values=tuple(d.values), count=d.count) for d in doms))
                for ps, doms in doc.topology.items()
            }
        fields = {f: getattr(doc, f) for f in doc.__struct_fields__ if f != "topology"}
        if doc.nominated_clusters is not UNSET:
            fields["nominated_clusters"] = tuple(doc.nominated_clusters)
        return WorkloadExpect(**fields, topology=topology)

    def cq_expect(self, name: str, raw: Any, path: str) -> ClusterQueueExpect | None:
        doc = self.convert(raw, ClusterQueueExpectFile, path)
        if doc is None:
            return None
        usage = self.quantities(doc.usage, f"{path}.usage")
        borrowed = self.quantities(doc.borrowed, f"{path}.borrowed")
        return ClusterQueueExpect(
            admitted_workloads=doc.admitted_workloads,
            pending_workloads=doc.pending_workloads,
            reserving_workloads=doc.reserving_workloads,
            usage=usage,
            borrowed=borrowed,
            active=doc.active,
        )

    def quantities(self, raw: Any, path: str) -> Any:
        if raw is UNSET:
            return UNSET
        out: dict[str, dict[str, str]] = {}
        for flavor, resources in raw.items():
            out[flavor] = {}
            for res, value in resources.items():
                text = str(value)
                try:
                    parse_quantity(text)
                except ValueError as e:
                    self.bad(f"{path}.{flavor}.{res}", f"bad quantity {text!r}: {e}")
                    continue
                out[flavor][res] = text
        return out

    def remote_expect(self, cluster: str, raw: Any, path: str) -> RemoteExpect | None:
        if cluster not in self.clusters:
            self.bad(path, f"unknown cluster {cluster!r}")
        doc = self.convert(raw, RemoteExpectFile, path)
        if doc is None:
            return None
        absent = [self.remote_object(v, f"{path}.absent[{i}]") for i, v in enumerate(doc.absent)]
        present = [self.remote_object(v, f"{path}.present[{i}]") for i, v in enumerate(doc.present)]
        return RemoteExpect(
            absent=tuple(o for o in absent if o is not None), present=tuple(o for o in present if o is not None)
        )

    def remote_object(self, text: str, path: str) -> RemoteObject | None:
        """"Workload ns/name", "Job ns/name", or "Kind name" for a cluster-scoped kind."""
        kind, _, rest = text.partition(" ")
        if not rest:
            self.bad(path, f"expected 'Kind ns/name', got {text!r}")
            return None
        if not known_kind(kind):
            self.bad(path, f"unknown kind {kind!r}")
            return None
        if is_namespaced(kind):
            ref = self.key(rest, path)
        elif "/" in rest:
            self.bad(path, f"{kind} is cluster-scoped: give 'Kind name'")
            return None
        else:
            ref = ObjectRef(namespace=None, name=rest)
        return RemoteObject(kind=kind, ref=ref) if ref is not None else None
