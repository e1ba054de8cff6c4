"""One typed configuration tree for every service and the CLI.

The only module that reads the environment: KQ_CONFIG names a YAML file;
a few KQ_* variables override single fields for the local stack.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import yaml

from kq.kueue_config import (
    V1BETA1,
    AdmissionFairSharing,
    DurationError,
    FairSharing,
    KueueConfig,
    MultiKueue,
    RequeuingStrategy,
    WaitForPodsReady,
    convert_v1beta1,
    parse_duration,
    unused_fields,
)

__all__ = [
    "AdmissionConfig",
    "AdmissionFairSharing",
    "AdmissionTermConfig",
    "ClusterConfig",
    "Config",
    "ConfigError",
    "config_path_from_env",
    "FairSharing",
    "HttpConfig",
    "KueueConfig",
    "MultiKueue",
    "NatsConfig",
    "NatsTlsConfig",
    "RequeuingStrategy",
    "WaitForPodsReady",
    "WatcherConfig",
    "duration_seconds",
    "kubeconfig_from_env",
    "kueue_config_from",
    "load_config",
    "load_kueue_config",
    "parse_config",
    "parse_kueue_config",
    "unused_fields",
]


class _Cfg(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    pass


class NatsTlsConfig(_Cfg, frozen=True, kw_only=True):
    """`nats.tls:` verify the server against ca_file; cert_file + key_file: this client's own
    certificate, for a server that asks for one (mutual TLS)."""

    ca_file: str
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None  # the name the server's certificate carries, when not the URL's host

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("certFile: certFile and keyFile go together")


MAX_STREAM_REPLICAS = 5


class NatsConfig(_Cfg, frozen=True, kw_only=True):
    # One server's URL, or a JetStream cluster's, comma-separated: a client reconnects to a survivor.
    url: str = "nats://127.0.0.1:4222"
    stream_replicas: int = 1  # copies of each kq stream and KV bucket: 3 on a 3-node cluster (R3)
    duplicate_window_s: float = 120.0
    tls: NatsTlsConfig | None = None
    # Who this process is on the bus: an NKey seed file, or a JWT .creds file. "{service}" in the
    # path is replaced by the connecting service's name (one config file, a key per service).
    nkey_seed_file: str | None = None
    creds_file: str | None = None
    # Create or update kq's streams at start. False where a setup step owns them (least-privilege
    # users may not touch stream configurations).
    ensure_streams: bool = True

    def __post_init__(self) -> None:
        if self.nkey_seed_file is not None and self.creds_file is not None:
            raise ValueError("nkeySeedFile: give nkeySeedFile or credsFile, not both")
        if not self.servers():
            raise ValueError("url: no server URL")
        if not 1 <= self.stream_replicas <= MAX_STREAM_REPLICAS:
            raise ValueError(f"streamReplicas: must be within 1..{MAX_STREAM_REPLICAS} (JetStream's limit), "
                             f"got {self.stream_replicas}")

    def servers(self) -> list[str]:
        """The server URLs of `url` (a comma-separated list)."""
        return [u.strip() for u in self.url.split(",") if u.strip()]

    def credential_path(self, service: str) -> str | None:
        path = self.nkey_seed_file or self.creds_file
        return path.replace("{service}", service) if path else None


class ClusterConfig(_Cfg, frozen=True, kw_only=True):
    name: str
    kubeconfig: str  # path to a kubeconfig file
    role: str = "manager"  # manager | worker


def _fields(obj: msgspec.Struct, names: tuple[str, ...]) -> list[tuple[str, float]]:
    enc = dict(zip(obj.__struct_fields__, obj.__struct_encode_fields__, strict=True))
    return [(enc[n], getattr(obj, n)) for n in names]


def _positive(obj: msgspec.Struct, *names: str) -> None:
    for field, value in _fields(obj, names):
        if value <= 0:
            raise ValueError(f"{field}: must be greater than 0, got {value}")


def _not_negative(obj: msgspec.Struct, *names: str) -> None:
    for field, value in _fields(obj, names):
        if value < 0:
            raise ValueError(f"{field}: must not be negative, got {value}")


# Where kq keeps its own Secrets (MultiKueue kubeconfigs). Only the dispatcher and gc read them;
# the watcher never mirrors Secrets (they would be on the bus).
KQ_NAMESPACE = "kq-system"
NEVER_MIRRORED = ("secret",)


class WatcherConfig(_Cfg, frozen=True, kw_only=True):
    """`watcher:` the watcher's knobs (see docs/configuration.md)."""

    skip_kinds: tuple[str, ...] = ()  # lower-case kind tokens not to mirror, e.g. ("pod",)
    publish_batch: int = 512  # mirror records per publish round
    publish_queue: int = 20_000  # records waiting to be published before list/watch loops wait
    publish_rounds: int = 4  # publish rounds awaiting their acks at once (a record need not wait for the last)
    watch_timeout_s: float = 300.0  # the server ends each watch after this; we resume from the last rv
    retry_base_s: float = 0.2  # first backoff after an API error (doubles up to retry_max_s)
    retry_max_s: float = 5.0
    command_batch: int = 16  # small: a batch waiting for one background write holds little pipeline room
    command_concurrency: int = 64  # objects whose commands are applied at once
    command_pipeline: int = 256  # command batches handled at once (a slow object does not hold up the next)
    command_window: int = 256  # commands asked of the stream ahead (a window of one batch: a round trip per 8)
    max_replans: int = 10  # 409 -> re-read -> re-plan rounds for one command before naking it
    job_workers: int = 8  # Kueue: controller.groupKindConcurrency["Job.batch"]
    max_job_steps: int = 8  # writes in a row for one job before re-queueing it
    # API requests made in the same turn of the loop sent pipelined, up to this many on one
    # connection (kq.http1; 1: one request per connection at a time). Fewer system calls on
    # both sides, but a server answers one connection's requests one after another. At 8, 70 % of
    # the writes in a fifth of large-scale were full ones (session 11); 32: less CPU on both sides.
    api_pipeline: int = 32
    # Keep the Workloads' PodsReady condition (Kueue's waitForPodsReady). Unset: as the `kueue:`
    # section says (waitForPodsReady present and not `enable: false`).
    wait_for_pods_ready: bool | None = None

    def __post_init__(self) -> None:
        from kq.api.registry import KINDS  # the API types are not needed by every config reader

        known = {i.token for i in KINDS}
        unknown = sorted({s.lower() for s in self.skip_kinds} - known)
        if unknown:
            raise ValueError(f"skipKinds: unknown kind {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        _positive(self, "publish_batch", "publish_queue", "publish_rounds", "watch_timeout_s", "retry_base_s",
                  "retry_max_s", "command_batch", "command_concurrency", "command_pipeline", "command_window",
                  "max_replans", "job_workers", "max_job_steps", "api_pipeline")

    def mirrored_kinds(self) -> list[str]:
        from kq.api.registry import KINDS

        skip = {s.lower() for s in self.skip_kinds} | set(NEVER_MIRRORED)
        return [i.token for i in KINDS if i.mirrored and i.token not in skip]


class AdmissionTermConfig(_Cfg, frozen=True, kw_only=True):
    """`admission.term:` one leadership term of the scheduler (services/admission/leader.py)."""

    # Cycles in a row before publishing and letting inputs in. 0: one cycle per round, so its
    # decisions go out at once and the next cycle sees what came in meanwhile (fewer stale decisions).
    max_round_s: float = 0.0
    spin_guard_s: float = 0.05  # wait between cycles that decide nothing while the core says "work"
    fence_poll_s: float = 0.02  # how often to look whether the fence left KQ_CMD
    replay_batch: int = 1000
    # Mirror messages held beyond the one being applied while far behind, among which the records
    # of workloads holding quota (finished, evicted, admitted) are applied at once (kq.runtime.replay
    # look-ahead): quota freed behind a backlog of new workloads is used. 0: off.
    replay_ahead: int = 50_000
    progress_log_s: float = 10.0  # while waiting to start deciding, say what for this often
    status_interval_s: float = 0.5  # queue statuses at most this often while busy (see Partition)
    # ... and on MultiKueue worker clusters (role: worker). Only people read a worker's queue
    # statuses (the dispatcher reads copies); a kq serving 20 workers wrote 20 clusters' worth of them
    # every status_interval_s, more writes than the jobs themselves needed. At 5 s they were still
    # ~5 of the ~18 commands per job of a 1,500-job MultiKueue bench over 20 workers.
    worker_status_interval_s: float = 15.0
    pending_interval_s: float = 0.25  # a workload's pending condition at most this often (see PendingPacer)
    pending_in_flight: int = 128  # pending conditions awaiting their outcome at once (backpressure); 0: no bound
    status_in_flight: int = 64  # queue status writes awaiting their outcome at once, one per queue; 0: no bound
    status_hold_s: float = 0.5  # a queue's changed status is held this long before its write (see StatusPacer)
    solve_timeout_s: float = 5.0  # one kq.v1.tas.solve request (topology-aware placement)
    solve_retry_s: float = 0.2  # first wait before asking an unresponsive topology solver again
    slow_solve_s: float = 0.5  # a placement answer slower than this is logged
    record_events: bool = True  # Kubernetes Events for decisions, as Kueue records them (off: a write less each)

    def __post_init__(self) -> None:
        _not_negative(self, "max_round_s", "spin_guard_s", "status_interval_s", "worker_status_interval_s",
                      "pending_interval_s", "pending_in_flight", "status_in_flight", "status_hold_s", "replay_ahead")
        _positive(self, "solve_timeout_s", "solve_retry_s", "slow_solve_s")
        _positive(self, "fence_poll_s", "replay_batch", "progress_log_s")


class AdmissionConfig(_Cfg, frozen=True, kw_only=True):
    """`admission:` the admission service (services/admission/service.py)."""

    lease_partition: str = "default"
    lease_ttl_s: int = 5  # Kueue: leaderElection.leaseDuration. A killed leader is replaced within about this long
    restart_backoff_s: float = 0.5  # after a term failed, before standing for the lease again
    restart_backoff_max_s: float = 10.0
    term: AdmissionTermConfig = AdmissionTermConfig()
    # Sharded admission (services/admission/slots.py): cohort trees hashed to this many slots, each
    # with its own lease, epoch and writer; replicas share the slots. 1: one lease for everything.
    shards: int = 1  # at most MAX_ADMISSION_SHARDS (each slot is a bus user's command subject)
    replica_ttl_s: int = 5  # a replica's heartbeat lapses this long after it stopped
    balance_interval_s: float = 0.5  # how often a replica compares its slots with its fair share

    def __post_init__(self) -> None:
        _positive(self, "lease_ttl_s", "restart_backoff_s", "restart_backoff_max_s", "shards", "replica_ttl_s",
                  "balance_interval_s")
        if self.shards > MAX_ADMISSION_SHARDS:
            raise ConfigError(f"admission.shards: {self.shards} is more than {MAX_ADMISSION_SHARDS}")


MAX_ADMISSION_SHARDS = 64


class HttpConfig(_Cfg, frozen=True, kw_only=True):
    """`http:` each process's HTTP endpoint: /metrics (Prometheus), /livez and /readyz (probes)."""

    port: int | None = None  # None: no endpoint (a local stack runs many processes on one host); 0: any free port
    host: str = "0.0.0.0"

    def __post_init__(self) -> None:
        if self.port is not None and not 0 <= self.port <= 65535:
            raise ValueError(f"port: must be within 0..65535, got {self.port}")


class Config(_Cfg, frozen=True, kw_only=True):
    nats: NatsConfig = NatsConfig()
    http: HttpConfig = HttpConfig()
    clusters: tuple[ClusterConfig, ...] = ()
    kueue: KueueConfig = KueueConfig()
    watcher: WatcherConfig = WatcherConfig()
    admission: AdmissionConfig = AdmissionConfig()
    instance: str = "0"  # this replica's name within its service
    log_level: str = "info"
    log_dir: str | None = None
    otel_exporter: str = "none"  # none | console | otlp
    otel_endpoint: str | None = None  # otlp: the collector's base URL (else OTEL_EXPORTER_OTLP_* variables)


class ConfigError(ValueError):
    pass


def _env_overrides(raw: dict) -> dict:
    if url := os.environ.get("KQ_NATS_URL"):
        raw.setdefault("nats", {})["url"] = url
    if inst := os.environ.get("KQ_INSTANCE"):
        raw["instance"] = inst
    if lvl := os.environ.get("KQ_LOG_LEVEL"):
        raw["logLevel"] = lvl
    if exporter := os.environ.get("OTEL_TRACES_EXPORTER"):  # OpenTelemetry's own variable: none|console|otlp
        raw["otelExporter"] = exporter
    if port := os.environ.get("KQ_HTTP_PORT"):
        if not port.isdigit():
            raise ConfigError(f"KQ_HTTP_PORT: not a port number: {port!r}")
        raw.setdefault("http", {})["port"] = int(port)
    return raw


def kubeconfig_from_env() -> str | None:
    """KUBECONFIG, as kubectl reads it: the first file of the list (the CLI's clusters)."""
    value = os.environ.get("KUBECONFIG", "")
    first = next((p for p in value.split(os.pathsep) if p), None)
    return first


def parse_config(text: str, source: str = "<config>") -> Config:
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: invalid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: top level must be a mapping")
    raw = _env_overrides(raw)
    kueue = raw.get("kueue")
    if isinstance(kueue, dict) and kueue.get("apiVersion") == V1BETA1:
        raw["kueue"] = convert_v1beta1(kueue)
    try:
        return msgspec.convert(raw, Config)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{source}: {_field_first(str(e))}") from None


_CHECK_AT = re.compile(r"^(?P<field>[A-Za-z0-9_.]+): (?P<what>.*) - at `\$\.(?P<path>[^`]+)`$", re.S)


def _field_first(message: str) -> str:
    """A __post_init__ check says "timeout: negative ... - at `$.kueue.waitForPodsReady`": name the
    whole path first ("kueue.waitForPodsReady.timeout: negative ..."), as the user wrote it."""
    m = _CHECK_AT.match(message)
    return f"{m['path']}.{m['field']}: {m['what']}" if m else message


def config_path_from_env() -> str | None:
    """$KQ_CONFIG: the config file every service (and `kq dashboard` in deploy/) reads."""
    return os.environ.get("KQ_CONFIG") or None


def load_config(path: str | None = None) -> Config:
    """Load from PATH, else $KQ_CONFIG, else defaults (with KQ_* overrides)."""
    path = path or os.environ.get("KQ_CONFIG")
    if not path:
        return parse_config("{}", "<defaults>")
    return parse_config(Path(path).read_text(), path)


def parse_kueue_config(text: str, source: str = "<kueue config>") -> KueueConfig:
    """Kueue's Configuration file (`kq up --kueue-config`): v1beta2 or v1beta1, every documented
    field; ConfigError names an unknown field or a bad value."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: invalid YAML: {e}") from None
    if raw is None:
        return KueueConfig()
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: top level must be a mapping (a Kueue Configuration)")
    return kueue_config_from(raw, source)


def kueue_config_from(raw: Mapping[str, Any], source: str) -> KueueConfig:
    """A Kueue Configuration given as a mapping (v1beta1 converted)."""
    if raw.get("apiVersion") == V1BETA1:
        raw = convert_v1beta1(raw)
    try:
        return msgspec.convert(dict(raw), KueueConfig)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{source}: {_field_first(str(e))}") from None


def load_kueue_config(path: str | Path) -> KueueConfig:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    return parse_kueue_config(text, str(path))


def duration_seconds(text: str) -> float:
    """Kubernetes/Go-style duration: "500ms", "2s", "1m", "1h30m"; ConfigError when it is not one."""
    try:
        return parse_duration(text)
    except DurationError as e:
        raise ConfigError(str(e)) from None
