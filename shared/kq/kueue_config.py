"""Kueue's own Configuration (config.kueue.x-k8s.io v1beta2 and v1beta1, kind Configuration).

Every field Kueue documents is accepted and typed; an unknown field, a wrong type or a bad
duration is refused at load, naming the field. kq acts on the fields listed in
`FIELD_USERS` (each with the service that reads it); `unused_fields` says which of the
fields a file sets kq does not act on, so `kq up` and each service can say so at start-up.

Durations are Go/metav1 durations ("5m", "1h30m", "300ms"); a negative or unparsable one is
refused. v1beta1's `enable` switches (waitForPodsReady, fairSharing) default to off there, as
in Kueue v1beta1; in v1beta2 a section being present means on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import msgspec

from kq.api.meta import LabelSelector

V1BETA2 = "config.kueue.x-k8s.io/v1beta2"
V1BETA1 = "config.kueue.x-k8s.io/v1beta1"
KIND = "Configuration"
JOB_FRAMEWORK = "batch/job"
# The job integrations kq has (Kueue's framework names); the others are refused by name.
KQ_FRAMEWORKS = frozenset((JOB_FRAMEWORK, "jobset.x-k8s.io/jobset", "pod", "deployment", "statefulset",
                           "leaderworkerset.x-k8s.io/leaderworkerset", "kubeflow.org/pytorchjob",
                           "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/paddlejob",
                           "kubeflow.org/jaxjob", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/raycluster",
                           "trainer.kubeflow.org/trainjob", "workload.codeflare.dev/appwrapper"))
# What Kueue's release manifest (config/components/manager/controller_manager_config.yaml) enables:
# kq's default when `integrations.frameworks` is not given, so that a fresh `kq up` behaves as an
# installed Kueue does.
INSTALLED_FRAMEWORKS = (
    JOB_FRAMEWORK, "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice",
    "jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper", "trainer.kubeflow.org/trainjob", "pod",
    "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset",
)

# Kueue field (camelCase path) -> the kq service that acts on it. A set field none of whose
# users is in the build is reported as unused.
FIELD_USERS: dict[str, str] = {
    "fairSharing": "admission",
    "waitForPodsReady.requeuingStrategy.timestamp": "admission",
    "waitForPodsReady": "podsready",
    "multiKueue": "dispatcher",
    "multiKueue.gcInterval": "gc",
    "multiKueue.externalFrameworks": "-",  # no service: kq has no adapters for custom jobs
    "multiKueue.clusterProfile": "-",  # no service: kubeconfigs only (Secret or Path)
    "objectRetentionPolicies.workloads": "gc",
    "integrations.frameworks": "watcher",
    "manageJobsWithoutQueueName": "watcher",  # and kubesim's stand-in for Kueue's webhooks
    "managedJobsNamespaceSelector": "watcher",
    "clientConnection": "watcher",  # and the dispatcher's and gc's clients of the manager
}

# Kueue's feature gates (pkg/features); kq acts on none of them, and refuses a name Kueue does not know.
KUEUE_FEATURE_GATES = frozenset((
    "AdmissionFairSharing", "AdmissionGatedBy", "AssignQueueLabelsForPods",
    "CleanupProvisioningRequestsOnEviction", "ConcurrentAdmission", "CustomMetricLabels",
    "DeferRayServiceFinalizationForRedisCleanup", "DisableWaitForPodsReady", "ElasticJobsViaWorkloadSlices",
    "ElasticJobsViaWorkloadSlicesWithTAS", "FailureRecoveryPolicy", "FairSharingPreemptWithinNominal",
    "FairSharingPrioritizeNonBorrowing", "FastQuotaReleaseInPodIntegration", "FinishOrphanedWorkloads",
    "FlavorFungibility", "FlavorFungibilityPreserveScanProgress", "KueueDRAIntegration",
    "KueueDRAIntegrationConsumableCapacity", "KueueDRAIntegrationExtendedResource",
    "KueueDRAIntegrationPartitionableDevices", "KueueDRARejectWorkloadsWhenDRADisabled",
    "LWSImmutableGroupSize", "LocalQueueMetrics", "ManagedJobsNamespaceSelectorAlwaysRespected",
    "MetricForWorkloadCreationLatency", "MetricsForCohorts", "MultiKueue", "MultiKueueAdaptersForCustomJobs",
    "MultiKueueClusterProfile", "MultiKueueIncrementalDispatcherConfig",
    "MultiKueueIncrementalDispatcherRespectConfigOrder", "MultiKueueKubeConfigPathValidation",
    "MultiKueueManagerQuotaAutomation", "MultiKueueOrchestratedPreemption", "MultiKueueRemoteSpecSync",
    "PartialAdmission", "PodIntegrationValidateGroupOwner", "PrioritizePreemptorWorkloads", "PriorityBoost",
    "PrioritySortingWithinCohort", "QuotaCheckStrategy", "ReclaimablePods",
    "RecomputeAssignmentUponPreemptionTargetsOverlap", "RejectUpdatesToCQWithInvalidOnFlavors",
    "RemoveFinalizersWithStrictPatch", "SchedulerLibraryIntegration", "SchedulingEquivalenceHashing",
    "ShortWorkloadNames", "SkipAncestorCheckForDeletedWorkloads", "SkipReassignmentForPodOwnedWorkloads",
    "SparkApplicationIntegration", "TASAssignmentsEncodingByHostnamePrefix", "TASBalancedPlacement",
    "TASCacheNodeMatchResults", "TASCacheTopologyTree", "TASCachingRemainingResources",
    "TASFailedNodeReplacement", "TASFailedNodeReplacementFailFast", "TASHandleOverlappingFlavors",
    "TASMultiLayerTopology", "TASProfileMixed", "TASRecomputeAssignmentWithinSchedulingCycle",
    "TASReplaceNodeDueToNotReadyOverFixedTime", "TASReplaceNodeOnNodeTaints",
    "TASReplaceNodeOnPodTermination", "TASRespectNodeAffinityPreferred", "TASValidateWorkloadSliceSize",
    "TLSOptions", "TopologyAwareScheduling", "UnadmittedWorkloadsExplicitStatus",
    "UnadmittedWorkloadsObservability", "ValidateRayAndSparkJobUpdates", "VectorizedResourceRequests",
    "VisibilityOnDemand", "WorkloadIdentifierAnnotations", "WorkloadPriorityClassDefaulting",
    "WorkloadRequestUseMergePatch", "WorkloadValidateResourcesAreNonNegative",
    "WorkloadValidationForPodSetMetadata",
))

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class DurationError(ValueError):
    pass


def parse_duration(text: object) -> float:
    """Seconds in a Go duration string ("0", "500ms", "2s", "1h30m"); DurationError when it is
    negative or not a duration."""
    if not isinstance(text, str) or not text:
        raise DurationError(f"not a duration: {text!r}")
    if text.startswith("-"):
        raise DurationError(f"negative duration {text!r}")
    body = text[1:] if text.startswith("+") else text
    if body == "0":
        return 0.0
    total, pos = 0.0, 0
    for m in _DURATION.finditer(body):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(body) or pos == 0:
        raise DurationError(f"not a duration: {text!r} (want e.g. 300ms, 30s, 5m, 1h30m)")
    return total


def _check_durations(obj: msgspec.Struct, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if value is None:
            continue
        try:
            parse_duration(value)
        except DurationError as e:
            field = obj.__struct_encode_fields__[obj.__struct_fields__.index(name)]
            raise ValueError(f"{field}: {e}") from None


class _K(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    pass


# --- the controller manager (inlined into Configuration) ------------------------------------------


class ControllerWebhook(_K, frozen=True, kw_only=True):
    port: int | None = None
    host: str = ""
    cert_dir: str = ""


class ControllerMetricsCustomLabel(_K, frozen=True, kw_only=True):
    name: str
    source_label_key: str = ""
    source_annotation_key: str = ""
    source_kind: str | None = None
    tracked_values: tuple[str, ...] = ()


class LocalQueueMetrics(_K, frozen=True, kw_only=True):
    enable: bool = False
    local_queue_selector: LabelSelector | None = None


class ControllerMetrics(_K, frozen=True, kw_only=True):
    bind_address: str = ""
    enable_cluster_queue_resources: bool = False
    custom_labels: tuple[ControllerMetricsCustomLabel, ...] = ()
    local_queue_metrics: LocalQueueMetrics | None = None


class ControllerHealth(_K, frozen=True, kw_only=True):
    health_probe_bind_address: str = ""
    readiness_endpoint_name: str = ""
    liveness_endpoint_name: str = ""


class LeaderElection(_K, frozen=True, kw_only=True):
    """component-base LeaderElectionConfiguration."""

    leader_elect: bool | None = None
    lease_duration: str | None = None
    renew_deadline: str | None = None
    retry_period: str | None = None
    resource_lock: str = ""
    resource_name: str = ""
    resource_namespace: str = ""

    def __post_init__(self) -> None:
        _check_durations(self, "lease_duration", "renew_deadline", "retry_period")


class ControllerConfigurationSpec(_K, frozen=True, kw_only=True):
    group_kind_concurrency: dict[str, int] = {}
    cache_sync_timeout: str | None = None

    def __post_init__(self) -> None:
        _check_durations(self, "cache_sync_timeout")


class TLSOptions(_K, frozen=True, kw_only=True):
    min_version: str = ""
    cipher_suites: tuple[str, ...] = ()
    curve_preferences: tuple[int, ...] = ()


# --- Kueue's own sections -------------------------------------------------------------------------


class InternalCertManagement(_K, frozen=True, kw_only=True):
    enable: bool | None = None
    webhook_service_name: str | None = None
    webhook_secret_name: str | None = None


class RequeuingStrategy(_K, frozen=True, kw_only=True):
    timestamp: Literal["Eviction", "Creation"] = "Eviction"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600

    def __post_init__(self) -> None:
        for name in ("backoff_limit_count", "backoff_base_seconds", "backoff_max_seconds"):
            value = getattr(self, name)
            if value is not None and value < 0:
                field = self.__struct_encode_fields__[self.__struct_fields__.index(name)]
                raise ValueError(f"{field}: must not be negative, got {value}")


class WaitForPodsReady(_K, frozen=True, kw_only=True):
    enable: bool = True  # v1beta1 only (there it defaults to false); v1beta2: present means on
    timeout: str = "30m"  # v1beta2's default
    block_admission: bool = False
    recovery_timeout: str | None = None  # None: the timeout; "0s": no recovery timeout
    requeuing_strategy: RequeuingStrategy = RequeuingStrategy()

    def __post_init__(self) -> None:
        _check_durations(self, "timeout", "recovery_timeout")
        if parse_duration(self.timeout) == 0:
            raise ValueError("timeout: must be more than 0s")


# Kueue's defaults when `clientConnection` leaves qps or burst out (or 0): apis/config/*/defaults.go.
DEFAULT_QPS = 300.0
DEFAULT_BURST = 500


class ClientConnection(_K, frozen=True, kw_only=True):
    qps: float | None = None  # negative: no client-side limit, as in Kueue
    burst: int | None = None

    def __post_init__(self) -> None:
        if self.burst is not None and self.burst < 0:
            raise ValueError(f"burst: must not be negative, got {self.burst}")

    def rate(self) -> tuple[float, int] | None:
        """(requests a second, burst) for a token bucket, Kueue's defaults filled in; None: unlimited."""
        qps = self.qps or DEFAULT_QPS
        return None if qps < 0 else (qps, self.burst or DEFAULT_BURST)


class PodIntegrationOptions(_K, frozen=True, kw_only=True):  # v1beta1
    namespace_selector: LabelSelector | None = None
    pod_selector: LabelSelector | None = None


class Integrations(_K, frozen=True, kw_only=True):
    frameworks: tuple[str, ...] = ()
    external_frameworks: tuple[str, ...] = ()
    label_keys_to_copy: tuple[str, ...] = ()
    pod_options: PodIntegrationOptions | None = None  # v1beta1


class MultiKueueExternalFramework(_K, frozen=True, kw_only=True):
    name: str


class ExecConfig(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """clientcmd ExecConfig: kept as given (a kubeconfig's exec plugin)."""

    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[dict[str, str], ...] = ()
    api_version: str = ""
    install_hint: str = ""
    provide_cluster_info: bool = False
    interactive_mode: str = ""


class ClusterProfileAccessProvider(_K, frozen=True, kw_only=True):
    name: str
    exec_config: ExecConfig


class ClusterProfile(_K, frozen=True, kw_only=True):
    access_providers: tuple[ClusterProfileAccessProvider, ...] = ()
    credentials_providers: tuple[ClusterProfileAccessProvider, ...] = ()


class IncrementalDispatcherConfig(_K, frozen=True, kw_only=True):
    step_size: int | None = None  # Kueue's default: 3
    round_timeout: str | None = None  # kq's knob (Kueue hard-codes 5m)

    def __post_init__(self) -> None:
        _check_durations(self, "round_timeout")
        if self.step_size is not None and self.step_size < 1:
            raise ValueError(f"stepSize: want >= 1, got {self.step_size}")


class MultiKueue(_K, frozen=True, kw_only=True):
    gc_interval: str = "1m"
    origin: str = "multikueue"
    worker_lost_timeout: str = "15m"
    dispatcher_name: str = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
    external_frameworks: tuple[MultiKueueExternalFramework, ...] = ()
    cluster_profile: ClusterProfile | None = None
    incremental_dispatcher_config: IncrementalDispatcherConfig | None = None

    def __post_init__(self) -> None:
        _check_durations(self, "gc_interval", "worker_lost_timeout")


class FairSharing(_K, frozen=True, kw_only=True):
    enable: bool = True  # v1beta1 only (required there); v1beta2: present means on
    preemption_strategies: tuple[Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"], ...] = (
        "LessThanOrEqualToFinalShare", "LessThanInitialShare")


class AdmissionFairSharing(_K, frozen=True, kw_only=True):
    usage_half_life_time: str = "168h"
    usage_sampling_interval: str = "5m"
    resource_weights: dict[str, float] = {}

    def __post_init__(self) -> None:
        _check_durations(self, "usage_half_life_time", "usage_sampling_interval")


class ResourceTransformation(_K, frozen=True, kw_only=True):
    input: str
    strategy: Literal["Retain", "Replace"] | None = None
    multiply_by: str = ""
    outputs: dict[str, str | int] = {}


class DeviceClassMapping(_K, frozen=True, kw_only=True):
    name: str
    device_class_names: tuple[str, ...]
    sources: tuple[dict[str, Any], ...] = ()  # counter/capacity sources with CEL device selectors


class Resources(_K, frozen=True, kw_only=True):
    quota_check_strategy: Literal["BlockUndeclared", "IgnoreUndeclared"] | None = None
    exclude_resource_prefixes: tuple[str, ...] = ()
    transformations: tuple[ResourceTransformation, ...] = ()
    device_class_mappings: tuple[DeviceClassMapping, ...] = ()


class WorkloadRetentionPolicy(_K, frozen=True, kw_only=True):
    after_finished: str | None = None
    after_deactivated_by_kueue: str | None = None

    def __post_init__(self) -> None:
        _check_durations(self, "after_finished", "after_deactivated_by_kueue")


class ObjectRetentionPolicies(_K, frozen=True, kw_only=True):
    workloads: WorkloadRetentionPolicy | None = None


class VisibilityServer(_K, frozen=True, kw_only=True):
    bind_address: str | None = None
    bind_port: int | None = None


class ClusterQueueVisibility(_K, frozen=True, kw_only=True):  # v1beta1
    max_count: int = 10


class QueueVisibility(_K, frozen=True, kw_only=True):  # v1beta1
    cluster_queues: ClusterQueueVisibility | None = None
    update_interval_seconds: int = 5


_V1BETA1_ONLY = ("queue_visibility",)
_V1BETA2_ONLY = ("visibility_server",)


class KueueConfig(_K, frozen=True, kw_only=True):
    """Kueue's Configuration, every documented field (v1beta2 names; v1beta1's extras too)."""

    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: LabelSelector | None = None
    internal_cert_management: InternalCertManagement | None = None
    wait_for_pods_ready: WaitForPodsReady | None = None
    client_connection: ClientConnection | None = None
    integrations: Integrations | None = None
    multi_kueue: MultiKueue | None = None
    fair_sharing: FairSharing | None = None
    admission_fair_sharing: AdmissionFairSharing | None = None
    resources: Resources | None = None
    feature_gates: dict[str, bool] = {}
    object_retention_policies: ObjectRetentionPolicies | None = None
    visibility_server: VisibilityServer | None = None
    queue_visibility: QueueVisibility | None = None
    # ControllerManager, inlined
    webhook: ControllerWebhook | None = None
    leader_election: LeaderElection | None = None
    metrics: ControllerMetrics | None = None
    health: ControllerHealth | None = None
    pprof_bind_address: str = ""
    controller: ControllerConfigurationSpec | None = None
    tls: TLSOptions | None = None

    def __post_init__(self) -> None:
        if self.api_version is not None and self.api_version not in (V1BETA2, V1BETA1):
            raise ValueError(f"apiVersion: {self.api_version!r} is not {V1BETA2} or {V1BETA1}")
        if self.kind is not None and self.kind != KIND:
            raise ValueError(f"kind: {self.kind!r} is not {KIND}")
        unknown = sorted(set(self.feature_gates) - KUEUE_FEATURE_GATES)
        if unknown:
            raise ValueError(f"featureGates: unknown feature gate {', '.join(unknown)}")
        foreign = _V1BETA1_ONLY if self.api_version == V1BETA2 else _V1BETA2_ONLY if self.api_version == V1BETA1 else ()
        for name in foreign:
            if getattr(self, name) is not None:
                field = self.__struct_encode_fields__[self.__struct_fields__.index(name)]
                raise ValueError(f"{field}: not a field of {self.api_version}")

    def client_rate(self) -> tuple[float, int] | None:
        """The client-side limit each of kq's API clients keeps (`clientConnection`). Without that
        section none, unlike Kueue (300/s): kubesim needs none, and deploy/ sets Kueue's defaults
        for a real API server."""
        return self.client_connection.rate() if self.client_connection is not None else None

    def frameworks(self) -> frozenset[str]:
        """The enabled integrations: `integrations.frameworks`, else Kueue's installed defaults."""
        if self.integrations is None or not self.integrations.frameworks:
            return frozenset(INSTALLED_FRAMEWORKS)
        return frozenset(self.integrations.frameworks)

    def job_integration(self) -> bool:
        """Kueue's Job integration is on unless `integrations.frameworks` leaves batch/job out."""
        return (
            self.integrations is None or not self.integrations.frameworks
            or JOB_FRAMEWORK in self.integrations.frameworks
        )


def convert_v1beta1(raw: Mapping[str, Any]) -> dict[str, Any]:
    """v1beta1's defaults in v1beta2 terms: an `enable` left out means off there."""
    out = dict(raw)
    for section in ("waitForPodsReady", "fairSharing"):
        value = out.get(section)
        if isinstance(value, Mapping) and "enable" not in value:
            out[section] = {**value, "enable": False}
    return out


def _set_paths(value: msgspec.Struct, prefix: str) -> list[str]:
    """Dotted camelCase paths of what a Struct sets (fields that differ from their defaults):
    the leaves, or a section itself when it is present with nothing set inside."""
    paths: list[str] = []
    for f in msgspec.structs.fields(value):
        v = getattr(value, f.name)
        if f.default is not msgspec.NODEFAULT and v == f.default:
            continue
        if f.default_factory is not msgspec.NODEFAULT and v == f.default_factory():
            continue
        path = f"{prefix}.{f.encode_name}" if prefix else f.encode_name
        inner = _set_paths(v, path) if isinstance(v, msgspec.Struct) else []
        paths += inner or [path]
    return paths


def unused_fields(cfg: KueueConfig, services: Iterable[str]) -> list[str]:
    """The fields `cfg` sets that no service of this build acts on (`services`: the service
    names present), as dotted camelCase paths; frameworks and feature gates one by one."""
    present = set(services)
    out: list[str] = []
    for path in _set_paths(cfg, ""):
        if path in ("apiVersion", "kind"):
            continue
        if path == "integrations.frameworks" and cfg.integrations is not None:
            out += [f"integrations.frameworks[{f}]" for f in cfg.integrations.frameworks if f not in KQ_FRAMEWORKS]
            if JOB_FRAMEWORK in cfg.integrations.frameworks and "watcher" in present:
                continue
            if "watcher" not in present and JOB_FRAMEWORK in cfg.integrations.frameworks:
                out.append(f"integrations.frameworks[{JOB_FRAMEWORK}]")
            continue
        if path == "featureGates":
            out += [f"featureGates.{g}" for g in sorted(cfg.feature_gates)]
            continue
        if not _used(path, present):
            out.append(path)
    return out


def _used(path: str, present: set[str]) -> bool:
    """The most specific FIELD_USERS entry at or above `path` decides."""
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        user = FIELD_USERS.get(".".join(parts[:n]))
        if user is not None:
            return user in present
    return False
