"""MultiKueueCluster and AdmissionCheck conditions, and reading a kubeconfig (pure).

Reasons follow Kueue (multikueuecluster.go, admissioncheck.go): a cluster is Active/Connected,
or inactive with BadKubeConfig (missing or malformed) or ClientConnectionFailed (unreachable);
a MultiKueue AdmissionCheck is Active, Active/SomeActiveClusters, or inactive with BadConfig or
NoUsableClusters. Messages never carry the kubeconfig's content.
"""

from __future__ import annotations

import msgspec

from kq.api import constants as k
from kq.api.kueue import AdmissionCheck, MultiKueueCluster, MultiKueueConfig
from kq.api.meta import Condition, condition_is_true

BAD_KUBECONFIG = "BadKubeConfig"
CONNECTION_FAILED = "ClientConnectionFailed"


class ClusterState(msgspec.Struct, frozen=True, kw_only=True):
    active: bool
    reason: str
    message: str


CONNECTING = ClusterState(active=False, reason=CONNECTION_FAILED, message="Connecting")
CONNECTED = ClusterState(active=True, reason="Active", message="Connected")


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
        return cond(False, "BadConfig",
                    f'Cannot load the AdmissionChecks parameters: MultiKueueConfig "{p.name}" not found')
    missing = [c for c in cfg.spec.clusters if c not in clusters]
    inactive = [c for c in cfg.spec.clusters
                if c in clusters and not condition_is_true(clusters[c].status.conditions, k.ACTIVE)]
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
