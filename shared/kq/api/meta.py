"""Kubernetes meta/v1 types shared by every kind: ObjectMeta, Condition, LabelSelector.

These are lenient (unknown fields ignored): real objects carry managedFields and
more that kq does not model. Times stay RFC 3339 strings as on the wire;
`parse_time` / `format_time` convert at the edges that need arithmetic.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal, Protocol, TypeVar

import msgspec

__all__ = [
    "K8sStruct",
    "QuantityValue",
    "Quantity",
    "ResourceList",
    "ObjectMeta",
    "OwnerReference",
    "Condition",
    "LabelSelector",
    "LabelSelectorRequirement",
    "selector_matches",
    "SelectorError",
    "find_condition",
    "condition_is_true",
    "parse_time",
    "format_time",
    "QUANTITY_MARK",
]

# Marks quantity-typed fields so the loader can validate them and the CRD
# generator can emit Kubernetes' int-or-string quantity schema.
QUANTITY_MARK = "x-kq-quantity"

# What users write for a quantity: "500m", 2, 1.5. Kubernetes itself always sends strings.
QuantityValue = str | int | float
Quantity = Annotated[QuantityValue, msgspec.Meta(extra_json_schema={QUANTITY_MARK: True})]
# corev1.ResourceList: resource name -> quantity.
ResourceList = dict[str, Quantity]


class K8sStruct(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True, gc=False):
    """Base of the lenient Kubernetes types: unknown fields are ignored.

    gc=False: decoded API objects are trees (JSON has no cycles, and frozen instances are never
    made to reference themselves), so the cyclic collector need not track them. Tracked, the
    watcher's cache of 15,000 Workloads was ~150,000 objects that every full collection walked: one
    such collection stopped the watcher for 2.9 s on the loaded machine (issue 12), with every
    finish and admission in flight waiting; decoding is ~2x faster too (no young collections)."""


class OwnerReference(K8sStruct, frozen=True, kw_only=True):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(K8sStruct, frozen=True, kw_only=True):
    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: tuple[OwnerReference, ...] = ()
    finalizers: tuple[str, ...] = ()

    def controller_ref(self) -> OwnerReference | None:
        for r in self.owner_references:  # (a plain loop: asked several times of every object seen)
            if r.controller:
                return r
        return None


# Field names ObjectMeta accepts in user input (the rest of metav1.ObjectMeta is server-owned).
OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
        "selfLink",
    }
)


class Condition(K8sStruct, frozen=True, kw_only=True):
    """metav1.Condition, as Kueue uses it on every status."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class _HasType(Protocol):
    @property
    def type(self) -> str: ...


_Cond = TypeVar("_Cond", bound=_HasType)


def find_condition(conditions: tuple[_Cond, ...], type_: str) -> _Cond | None:
    """The condition of `type_` (a Kueue Condition or a core kind's), None when absent."""
    for c in conditions:  # (a plain loop, not a generator: asked several times of every object planned)
        if c.type == type_:
            return c
    return None


class _HasOutcome(_HasType, Protocol):
    @property
    def status(self) -> str: ...
    @property
    def message(self) -> str: ...


def finished_condition(conditions: tuple[_HasOutcome, ...], succeeded: str) -> tuple[bool, bool, str]:
    """(finished, succeeded, message) of a job kind whose end is a True `succeeded` or `Failed`
    condition (batch/v1 Job: Complete, JobSet: Completed, ...); (False, True, "") while it runs."""
    for c in conditions:
        if c.type in (succeeded, "Failed") and c.status == "True":
            return True, c.type == succeeded, c.message
    return False, True, ""


def condition_is_true(conditions: tuple[Condition, ...], type_: str) -> bool:
    c = find_condition(conditions, type_)
    return c is not None and c.status == "True"


class LabelSelectorRequirement(K8sStruct, frozen=True, kw_only=True):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()


class LabelSelector(K8sStruct, frozen=True, kw_only=True):
    """metav1.LabelSelector. An empty selector matches everything; a nil one (None) matches nothing."""

    match_labels: dict[str, str] = {}
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


class SelectorError(ValueError):
    pass


def selector_matches(selector: LabelSelector | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector(...).Matches(labels).

    None matches nothing (Kueue's nil namespaceSelector); {} matches everything.
    In/NotIn need values and Exists/DoesNotExist must have none (SelectorError),
    as the Kubernetes conversion rejects them.
    """
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    for req in selector.match_expressions:
        if req.operator in ("In", "NotIn"):
            if not req.values:
                raise SelectorError(f"{req.key}: operator {req.operator} needs at least one value")
            present = req.key in labels and labels[req.key] in req.values
            if present != (req.operator == "In"):
                return False
        else:
            if req.values:
                raise SelectorError(f"{req.key}: operator {req.operator} takes no values")
            if (req.key in labels) != (req.operator == "Exists"):
                return False
    return True


def parse_time(text: str) -> datetime:
    """RFC 3339 (metav1.Time / MicroTime) to an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def format_time(when: datetime) -> str:
    """metav1.Time's wire form: UTC, whole seconds, "Z"."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
