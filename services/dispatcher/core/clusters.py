"""MultiKueueCluster and AdmissionCheck conditions, and reading a kubeconfig (pure).

Reasons follow Kueue (multikueuecluster.go, admissioncheck.go): a cluster is Active/Connected,
or inactive with BadKubeConfig (missing or malformed) or ClientConnectionFailed (unreachable);
a MultiKueue AdmissionCheck is Active, Active/SomeActiveClusters, or inactive with BadConfig or
NoUsableClusters. Messages never carry the kubeconfig's content.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec
import yaml

from kq.api import constants as k
from kq.api.core import Secret
from kq.api.kueue import AdmissionCheck, MultiKueueCluster, MultiKueueConfig
from kq.api.meta import Condition, condition_is_true

BAD_KUBECONFIG = "BadKubeConfig"
CONNECTION_FAILED = "ClientConnectionFailed"


class KubeconfigError(ValueError):
    """Why a kubeconfig cannot be used (safe to show: no secret material)."""


class ClusterState(msgspec.Struct, frozen=True, kw_only=True):
    active: bool
    reason: str
    message: str


CONNECTING = ClusterState(active=False, reason=CONNECTION_FAILED, message="Connecting")
CONNECTED = ClusterState(active=True, reason="Active", message="Connected")


def kubeconfig_from_text(text: str, where: str) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        raise KubeconfigError(f"{where}: not valid YAML") from None
    if not isinstance(doc, dict) or not doc.get("clusters") or not doc.get("contexts"):
        raise KubeconfigError(f"{where}: not a kubeconfig (needs clusters and contexts)")
    for c in doc.get("users") or ():
        user = (c or {}).get("user") or {}
        if "exec" in user or "auth-provider" in user:
            raise KubeconfigError(f"{where}: exec and auth-provider users are not allowed")
    return doc


def kubeconfig_from_secret(secret: Secret | None, name: str, namespace: str) -> dict[str, Any]:
    """The kubeconfig under the `kubeconfig` key of a Secret (data base64, or stringData)."""
    where = f"Secret {namespace}/{name}"
    if secret is None:
        raise KubeconfigError(f"{where} not found")
    key = k.MULTIKUEUE_CONFIG_SECRET_KEY
    if key in secret.data:
        try:
            text = base64.b64decode(secret.data[key], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise KubeconfigError(f"{where}: key {key!r} is not base64 text") from None
    elif key in secret.string_data:
        text = secret.string_data[key]
    else:
        raise KubeconfigError(f"{where} has no key {key!r}")
    return kubeconfig_from_text(text, where)


def cluster_condition(mkc: MultiKueueCluster, state: ClusterState) -> Condition:
    return Condition(type=k.ACTIVE, status="True" if state.active else "False", reason=state.reason,
                     message=state.message, observed_generation=mkc.metadata.generation or None)


def admission_check_condition(ac: AdmissionCheck, configs: dict[str, MultiKueueConfig],
                              clusters: dict[str, MultiKueueCluster]) -> Condition:
    def cond(ok: bool, reason: str, message: str) -> Condition:
        return Condition(type=k.ACTIVE, status="True" if ok else "False", reason=reason, message=message,
                         observed_generation=ac.metadata.generation or None)

    p = ac.spec.parameters
    if p is None or p.api_group != k.KUEUE_GROUP or p.kind != "MultiKueueConfig":
        return cond(False, "BadConfig", "Cannot load the AdmissionChecks parameters: want a MultiKueueConfig")
    cfg = configs.get(p.name)
    if cfg is None:
        return cond(False, "BadConfig", f'Cannot load the AdmissionChecks parameters: MultiKueueConfig "{p.name}" not found')
    missing = [c for c in cfg.spec.clusters if c not in clusters]
    inactive = [c for c in cfg.spec.clusters if c in clusters and not condition_is_true(clusters[c].status.conditions, k.ACTIVE)]
    if not missing and not inactive:
        return cond(True, "Active", "The admission check is active")
    parts = []
    if missing:
        parts.append(f"Missing clusters: [{' '.join(missing)}]")
    if inactive:
        parts.append(f"Inactive clusters: [{' '.join(inactive)}]")
    usable = len(missing) + len(inactive) < len(cfg.spec.clusters)
    return cond(usable, "SomeActiveClusters" if usable else "NoUsableClusters", ", ".join(parts))


def condition_differs(current: tuple[Condition, ...], want: Condition) -> bool:
    for c in current:
        if c.type == want.type:
            return (c.status, c.reason, c.message) != (want.status, want.reason, want.message)
    return True
