"""One typed configuration tree for every service and the CLI.

The only module that reads the environment: KQ_CONFIG names a YAML file;
a few KQ_* variables override single fields for the local stack.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import yaml


class _Cfg(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    pass


class NatsConfig(_Cfg, frozen=True, kw_only=True):
    url: str = "nats://127.0.0.1:4222"
    stream_replicas: int = 1
    duplicate_window_s: float = 120.0


class ClusterConfig(_Cfg, frozen=True, kw_only=True):
    name: str
    kubeconfig: str  # path to a kubeconfig file
    role: str = "manager"  # manager | worker


class RequeuingStrategy(_Cfg, frozen=True, kw_only=True):
    timestamp: str = "Eviction"  # Eviction | Creation
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600
    backoff_limit_count: int | None = None


class WaitForPodsReady(_Cfg, frozen=True, kw_only=True):
    enable: bool = False
    timeout: str = "5m"
    block_admission: bool = False
    recovery_timeout: str | None = None
    requeuing_strategy: RequeuingStrategy = RequeuingStrategy()


class FairSharing(_Cfg, frozen=True, kw_only=True):
    enable: bool = True  # present in the configuration means on
    preemption_strategies: tuple[str, ...] = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


class IncrementalDispatcherConfig(_Cfg, frozen=True, kw_only=True):
    """kq's knobs for Kueue's Incremental dispatcher (Kueue hard-codes 5m and 3)."""

    round_timeout: str = "5m"
    step_size: int = 3


class MultiKueue(_Cfg, frozen=True, kw_only=True):
    gc_interval: str = "1m"
    origin: str = "multikueue"
    worker_lost_timeout: str = "15m"
    dispatcher_name: str = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
    incremental_dispatcher_config: IncrementalDispatcherConfig = IncrementalDispatcherConfig()


class WorkloadRetentionPolicy(_Cfg, frozen=True, kw_only=True):
    after_finished: str | None = None  # delete a finished Workload this long after it finished
    after_deactivated_by_kueue: str | None = None  # ... a Workload Kueue deactivated, this long after


class ObjectRetentionPolicies(_Cfg, frozen=True, kw_only=True):
    workloads: WorkloadRetentionPolicy | None = None


class KueueConfig(_Cfg, frozen=True, kw_only=True):
    """Kueue Configuration (v1beta2 field names) for the parts kq implements."""

    wait_for_pods_ready: WaitForPodsReady | None = None
    fair_sharing: FairSharing | None = None
    multi_kueue: MultiKueue | None = None
    object_retention_policies: ObjectRetentionPolicies | None = None  # carried out by services/gc
    admission_fair_sharing: dict[str, object] | None = None


class Config(_Cfg, frozen=True, kw_only=True):
    nats: NatsConfig = NatsConfig()
    clusters: tuple[ClusterConfig, ...] = ()
    kueue: KueueConfig = KueueConfig()
    instance: str = "0"  # this replica's name within its service
    log_level: str = "info"
    log_dir: str | None = None
    otel_exporter: str = "none"  # none | console | otlp


class ConfigError(ValueError):
    pass


def _env_overrides(raw: dict) -> dict:
    if url := os.environ.get("KQ_NATS_URL"):
        raw.setdefault("nats", {})["url"] = url
    if inst := os.environ.get("KQ_INSTANCE"):
        raw["instance"] = inst
    if lvl := os.environ.get("KQ_LOG_LEVEL"):
        raw["logLevel"] = lvl
    return raw


def parse_config(text: str, source: str = "<config>") -> Config:
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: invalid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: top level must be a mapping")
    raw = _env_overrides(raw)
    try:
        return msgspec.convert(raw, Config)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{source}: {e}") from None


def load_config(path: str | None = None) -> Config:
    """Load from PATH, else $KQ_CONFIG, else defaults (with KQ_* overrides)."""
    path = path or os.environ.get("KQ_CONFIG")
    if not path:
        return parse_config("{}", "<defaults>")
    return parse_config(Path(path).read_text(), path)


def duration_seconds(text: str) -> float:
    """Kubernetes/Go-style duration: "500ms", "2s", "1m", "1h30m"."""
    import re

    if not isinstance(text, str) or not text:
        raise ConfigError(f"bad duration {text!r}")
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    total, pos = 0.0, 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text):
        if m.start() != pos:
            raise ConfigError(f"bad duration {text!r}")
        total += float(m.group(1)) * units[m.group(2)]
        pos = m.end()
    if pos != len(text):
        raise ConfigError(f"bad duration {text!r}")
    return total
