"""The generator schema of Kueue's scheduler performance test (test/performance/scheduler/configs).

Strict: an unknown field is an error that names it and where it is, so a typo in a benchmark
configuration is never silently ignored. Decoding is msgspec (shapes, types, enums); the checks
msgspec cannot express (quantities, names that become Kubernetes names, unique class names)
follow in `_check`, which reports every problem it finds at once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import msgspec.inspect
import yaml

from kq.quantity import to_milli

Positive = Annotated[int, msgspec.Meta(ge=1)]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
QuantityValue = str | int | float
TASConstraint = Literal["required", "preferred", "balanced"]

# Names built from class names must stay valid Kubernetes names (namespaces are DNS labels).
_CLASS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_MAX_NAMESPACE = 63


class _Strict(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    pass


class WorkloadTemplate(_Strict, frozen=True, kw_only=True):
    class_name: str
    runtime_ms: NonNegative
    priority: int = 0
    request: QuantityValue  # cpu per pod
    pod_count: Positive | None = None  # TAS: pods in the pod set (default 1)
    tas_constraint: TASConstraint | None = None
    tas_level: str | None = None
    slice_size: Positive | None = None


class WorkloadsSet(_Strict, frozen=True, kw_only=True):
    count: Positive  # rounds; each round creates one workload per template
    creation_interval_ms: NonNegative
    workloads: Annotated[tuple[WorkloadTemplate, ...], msgspec.Meta(min_length=1)]


class QueuesSet(_Strict, frozen=True, kw_only=True):
    class_name: str
    count: Positive  # ClusterQueues per cohort
    nominal_quota: QuantityValue
    borrowing_limit: QuantityValue | None = None
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Never"
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "Never"
    workloads_sets: Annotated[tuple[WorkloadsSet, ...], msgspec.Meta(min_length=1)]


class CohortSet(_Strict, frozen=True, kw_only=True):
    class_name: str
    count: Positive
    queues_sets: Annotated[tuple[QueuesSet, ...], msgspec.Meta(min_length=1)]


class TopologyLevel(_Strict, frozen=True, kw_only=True):
    name: str
    count: Positive
    node_label: str
    capacity: dict[str, QuantityValue] | None = None


class TopologyConfig(_Strict, frozen=True, kw_only=True):
    name: str
    levels: Annotated[tuple[TopologyLevel, ...], msgspec.Meta(min_length=1)]


class ResourceFlavorConfig(_Strict, frozen=True, kw_only=True):
    name: str
    node_label: str | None = None
    topology_name: str | None = None


class BenchConfig(_Strict, frozen=True, kw_only=True):
    cohorts: Annotated[tuple[CohortSet, ...], msgspec.Meta(min_length=1)]
    topology: TopologyConfig | None = None
    resource_flavor: ResourceFlavorConfig | None = None

    @property
    def flavor_name(self) -> str:
        return self.resource_flavor.name if self.resource_flavor is not None else DEFAULT_FLAVOR


DEFAULT_FLAVOR = "rf"  # Kueue's generator default


class BenchConfigError(ValueError):
    """The configuration is invalid; `problems` lists each one with where it is."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        text = problems[0] if len(problems) == 1 else "\n  " + "\n  ".join(problems)
        super().__init__(f"{source}: {text}")


_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>[^`]*)`(?: - at `\$(?P<at>[^`]*)`)?$")
_AT = re.compile(r"^(?P<msg>.*?) - at `\$(?P<at>[^`]*)`$")


def _friendly(message: str) -> str:
    """msgspec's "... - at `$.a[0].b`" as "a[0].b: ..."; unknown fields named as such."""
    m = _UNKNOWN.match(message)
    if m:
        at = (m.group("at") or "").lstrip(".")
        field = m.group("field")
        where = f"{at}.{field}" if at else field
        return f"{where}: unknown field {field!r}"
    m = _AT.match(message)
    if m:
        return f"{m.group('at').lstrip('.') or '(top level)'}: {m.group('msg')}"
    return message


def parse_config(text: str, source: str = "<config>") -> BenchConfig:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise BenchConfigError(source, [f"invalid YAML: {e}"]) from None
    if not isinstance(raw, dict):
        raise BenchConfigError(source, ["the top level must be a mapping with `cohorts`"])
    unknown = _unknown_fields(raw, msgspec.inspect.type_info(BenchConfig), "")
    if unknown:
        raise BenchConfigError(source, unknown)
    try:
        cfg = msgspec.convert(raw, BenchConfig)
    except msgspec.ValidationError as e:
        raise BenchConfigError(source, [_friendly(str(e))]) from None
    problems = _check(cfg)
    if problems:
        raise BenchConfigError(source, problems)
    return cfg


def _unknown_fields(value: object, t: msgspec.inspect.Type, at: str) -> list[str]:
    """Every unknown field anywhere (msgspec stops at the first error of any kind)."""
    match t:
        case msgspec.inspect.Metadata():
            return _unknown_fields(value, t.type, at)
        case msgspec.inspect.UnionType():
            structs = [u for u in t.types if isinstance(u, msgspec.inspect.StructType)]
            return _unknown_fields(value, structs[0], at) if structs else []
        case msgspec.inspect.VarTupleType() | msgspec.inspect.ListType():
            if not isinstance(value, list):
                return []
            out: list[str] = []
            for i, item in enumerate(value):
                out += _unknown_fields(item, t.item_type, f"{at}[{i}]")
            return out
        case msgspec.inspect.StructType():
            if not isinstance(value, dict):
                return []
            fields = {f.encode_name: f for f in t.fields}
            out = []
            for k in value:
                where = f"{at}.{k}" if at else str(k)
                f = fields.get(k)
                if f is None:
                    out.append(f"{where}: unknown field {k!r} (known: {', '.join(sorted(fields))})")
                else:
                    out += _unknown_fields(value[k], f.type, where)
            return out
    return []


def load_config(path: str | Path) -> BenchConfig:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise BenchConfigError(str(path), [f"cannot read: {e.strerror}"]) from None
    return parse_config(text, str(path))


def _quantity(value: QuantityValue, where: str, problems: list[str], *, positive: bool) -> None:
    try:
        milli = to_milli(value)
    except ValueError as e:
        problems.append(f"{where}: {e}")
        return
    if milli < 0 or (positive and milli == 0):
        problems.append(f"{where}: must be {'greater than 0' if positive else 'at least 0'}, got {value!r}")


def _class(name: str, where: str, problems: list[str]) -> None:
    if not _CLASS_NAME.match(name):
        problems.append(f"{where}: {name!r} must be lower-case letters, digits and '-' (it becomes part of "
                        "Kubernetes names), starting and ending with a letter or digit")


def _check(cfg: BenchConfig) -> list[str]:
    problems: list[str] = []
    seen_cohort_classes: dict[str, int] = {}
    for ci, cs in enumerate(cfg.cohorts):
        at_c = f"cohorts[{ci}]"
        _class(cs.class_name, f"{at_c}.className", problems)
        if cs.class_name in seen_cohort_classes:
            problems.append(f"{at_c}.className: {cs.class_name!r} is already used by "
                            f"cohorts[{seen_cohort_classes[cs.class_name]}] (the generated names would collide)")
        seen_cohort_classes.setdefault(cs.class_name, ci)
        for qi, qs in enumerate(cs.queues_sets):
            at_q = f"{at_c}.queuesSets[{qi}]"
            _class(qs.class_name, f"{at_q}.className", problems)
            longest = f"{qs.class_name}-{qi}-{qs.count - 1}-{cs.class_name}-{cs.count - 1}"
            if len(longest) > _MAX_NAMESPACE:
                problems.append(f"{at_q}: the ClusterQueue/namespace name {longest!r} would be longer than "
                                f"{_MAX_NAMESPACE} characters; use shorter class names")
            _quantity(qs.nominal_quota, f"{at_q}.nominalQuota", problems, positive=False)
            if qs.borrowing_limit is not None:
                _quantity(qs.borrowing_limit, f"{at_q}.borrowingLimit", problems, positive=False)
            for wi, ws in enumerate(qs.workloads_sets):
                for ti, t in enumerate(ws.workloads):
                    at_t = f"{at_q}.workloadsSets[{wi}].workloads[{ti}]"
                    _class(t.class_name, f"{at_t}.className", problems)
                    _quantity(t.request, f"{at_t}.request", problems, positive=True)
                    if t.tas_constraint is not None and not t.tas_level:
                        problems.append(f"{at_t}.tasLevel: required with tasConstraint")
    if cfg.topology is not None:
        for li, lvl in enumerate(cfg.topology.levels):
            for r, q in (lvl.capacity or {}).items():
                _quantity(q, f"topology.levels[{li}].capacity.{r}", problems, positive=False)
    return problems


def tas_features(cfg: BenchConfig) -> list[str]:
    """What in the configuration needs topology-aware scheduling (empty: none)."""
    found: list[str] = []
    if cfg.topology is not None:
        found.append("topology")
    if cfg.resource_flavor is not None and cfg.resource_flavor.topology_name:
        found.append("resourceFlavor.topologyName")
    for ci, cs in enumerate(cfg.cohorts):
        for qi, qs in enumerate(cs.queues_sets):
            for wi, ws in enumerate(qs.workloads_sets):
                for ti, t in enumerate(ws.workloads):
                    if t.tas_constraint is not None or t.tas_level or t.slice_size is not None:
                        found.append(f"cohorts[{ci}].queuesSets[{qi}].workloadsSets[{wi}].workloads[{ti}] "
                                     "(tasConstraint/tasLevel/sliceSize)")
    return found
