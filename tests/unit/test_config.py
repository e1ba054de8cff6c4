"""kq's one settings tree (kq.config) and Kueue's own Configuration file (kq.kueue_config):
every section parses, an unknown field or a bad value is refused naming it, and the fields kq
does not act on are listed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kq.config import (
    AdmissionConfig,
    AdmissionTermConfig,
    Config,
    ConfigError,
    WatcherConfig,
    load_kueue_config,
    parse_config,
    parse_kueue_config,
    unused_fields,
)
from kq.kueue_config import V1BETA1, parse_duration

FIXTURE = Path(__file__).parent / "fixtures" / "kueue-manager-config.yaml"
ALL_SERVICES = ["admission", "dispatcher", "gc", "podsready", "tas", "watcher"]

SECTIONS = """
watcher:
  skipKinds: [pod, node]
  publishBatch: 128
  watchTimeoutS: 60
  jobWorkers: 2
admission:
  leaseTtlS: 3
  restartBackoffS: 1
  term:
    maxRoundS: 0.1
    pendingIntervalS: 1
"""


def test_watcher_and_admission_sections_parse_into_the_tree() -> None:
    cfg = parse_config(SECTIONS)
    assert cfg.watcher == WatcherConfig(skip_kinds=("pod", "node"), publish_batch=128, watch_timeout_s=60, job_workers=2)
    assert cfg.admission == AdmissionConfig(lease_ttl_s=3, restart_backoff_s=1,
                                            term=AdmissionTermConfig(max_round_s=0.1, pending_interval_s=1))
    assert "pod" not in cfg.watcher.mirrored_kinds() and "job" in cfg.watcher.mirrored_kinds()


def test_defaults_when_the_sections_are_left_out() -> None:
    assert parse_config("{}") == Config()
    assert Config().admission.term.pending_interval_s == 0.25
    # 32 requests made at once go out in one write (at 8, most writes were full ones in large-scale)
    assert Config().watcher.api_pipeline == 32


@pytest.mark.parametrize("text, named", [
    pytest.param("watcher: {publishBatchSize: 1}", "`publishBatchSize` - at `$.watcher`", id="unknown-watcher-field"),
    pytest.param("admission: {term: {spinGuard: 1}}", "`spinGuard` - at `$.admission.term`", id="unknown-term-field"),
    pytest.param("admissions: {}", "`admissions`", id="unknown-section"),
    pytest.param("watcher: {skipKinds: [pods]}", "skipKinds: unknown kind pods", id="unknown-kind"),
    pytest.param("watcher: {jobWorkers: 0}", "jobWorkers: must be greater than 0", id="zero-workers"),
    pytest.param("watcher: {publishRounds: 0}", "publishRounds: must be greater than 0", id="zero-rounds"),
    pytest.param("admission: {leaseTtlS: 1.5}", "Expected `int`, got `float` - at `$.admission.leaseTtlS`", id="ttl-type"),
    pytest.param("admission: {term: {maxRoundS: -1}}", "maxRoundS: must not be negative", id="negative"),
])
def test_bad_settings_are_refused_naming_the_field(text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=None) as e:
        parse_config(text, "kq.yaml")
    assert named in str(e.value) and str(e.value).startswith("kq.yaml: ")


def test_kueue_default_config_map_is_accepted_and_unused_fields_are_listed() -> None:
    cfg = load_kueue_config(FIXTURE)
    assert cfg.wait_for_pods_ready is not None and cfg.wait_for_pods_ready.timeout == "4m"
    assert cfg.wait_for_pods_ready.requeuing_strategy.timestamp == "Creation"
    assert cfg.fair_sharing is not None and cfg.fair_sharing.enable
    assert cfg.multi_kueue is not None and cfg.multi_kueue.worker_lost_timeout == "10m"
    assert cfg.integrations is not None and "ray.io/rayjob" in cfg.integrations.frameworks
    assert cfg.feature_gates == {"TopologyAwareScheduling": True, "PartialAdmission": False}
    assert cfg.controller is not None and cfg.controller.group_kind_concurrency["Job.batch"] == 4
    assert cfg.job_integration()

    unused = unused_fields(cfg, ["admission", "watcher"])
    for field in ("namespace", "health.healthProbeBindAddress", "metrics.bindAddress", "webhook.port",
                  "leaderElection.leaseDuration", "controller.groupKindConcurrency",
                  "internalCertManagement.enable",
                  "integrations.externalFrameworks", "admissionFairSharing.resourceWeights",
                  "resources.transformations", "objectRetentionPolicies.workloads.afterDeactivatedByKueue",
                  "featureGates.TopologyAwareScheduling", "featureGates.PartialAdmission", "visibilityServer.bindPort",
                  "waitForPodsReady.timeout", "multiKueue.gcInterval"):
        assert field in unused, field
    for field in ("fairSharing", "waitForPodsReady.requeuingStrategy.timestamp", "integrations.frameworks[batch/job]",
                  "integrations.frameworks[ray.io/rayjob]", "integrations.frameworks[kubeflow.org/mpijob]",
                  "manageJobsWithoutQueueName", "managedJobsNamespaceSelector", "clientConnection",
                  "apiVersion", "kind"):
        assert not any(u == field or u.startswith(field + ".") for u in unused), field

    # With the services that act on them in the build, waitForPodsReady and multiKueue count as used.
    unused_all = unused_fields(cfg, ALL_SERVICES)
    assert not any(u.startswith(("waitForPodsReady", "multiKueue")) for u in unused_all)


def test_the_config_files_kueue_section_takes_the_same_configuration() -> None:
    raw = yaml.safe_load(FIXTURE.read_text())
    cfg = parse_config(yaml.safe_dump({"kueue": raw}))
    assert cfg.kueue == load_kueue_config(FIXTURE)


def test_a_minimal_configuration_uses_everything_it_sets() -> None:
    cfg = parse_kueue_config("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing: {}\n")
    assert cfg.fair_sharing is not None and unused_fields(cfg, ["admission"]) == []


def test_integrations_without_batch_job_switch_the_job_integration_off() -> None:
    cfg = parse_kueue_config("integrations: {frameworks: [pod]}")
    assert not cfg.job_integration()
    assert parse_kueue_config("{}").job_integration()


def test_v1beta1_enable_switches_default_to_off() -> None:
    cfg = parse_kueue_config(f"apiVersion: {V1BETA1}\nkind: Configuration\nwaitForPodsReady: {{timeout: 3m}}\n"
                             "fairSharing: {preemptionStrategies: [LessThanInitialShare]}\n"
                             "queueVisibility: {clusterQueues: {maxCount: 10}, updateIntervalSeconds: 5}\n")
    assert cfg.wait_for_pods_ready is not None and not cfg.wait_for_pods_ready.enable
    assert cfg.fair_sharing is not None and not cfg.fair_sharing.enable
    assert "queueVisibility.clusterQueues" in unused_fields(cfg, ALL_SERVICES)


@pytest.mark.parametrize("text, named", [
    pytest.param("waitForPodsReady: {timeout: -5m}", "waitForPodsReady.timeout: negative duration '-5m'", id="negative"),
    pytest.param("waitForPodsReady: {timeout: 5 minutes}", "timeout: not a duration: '5 minutes'", id="unparsable"),
    pytest.param("multiKueue: {workerLostTimeout: 1d}", "workerLostTimeout: not a duration", id="days"),
    pytest.param("leaderElection: {leaseDuration: soon}", "leaseDuration: not a duration", id="leader"),
    pytest.param("objectRetentionPolicies: {workloads: {afterFinished: -1s}}", "afterFinished: negative", id="retention"),
    pytest.param("waitForPodsReady: {requeuingStrategy: {backoffBaseSeconds: -1}}", "backoffBaseSeconds: must not be negative", id="backoff"),
    pytest.param("health: {healthProbeBindAdress: ':8081'}", "unknown field `healthProbeBindAdress` - at `$.health`", id="typo"),
    pytest.param("queueVisibilty: {}", "unknown field `queueVisibilty`", id="unknown-top"),
    pytest.param("apiVersion: config.kueue.x-k8s.io/v1beta2\nqueueVisibility: {}", "queueVisibility: not a field of config.kueue.x-k8s.io/v1beta2", id="v1beta1-only"),
    pytest.param("apiVersion: config.kueue.x-k8s.io/v1\n", "apiVersion: 'config.kueue.x-k8s.io/v1'", id="api-version"),
    pytest.param("kind: KueueConfiguration\n", "kind: 'KueueConfiguration' is not Configuration", id="kind"),
    pytest.param("featureGates: {TopologyAwareScheduling: maybe}", "Expected `bool`, got `str` - at `$.featureGates", id="gate"),
    pytest.param("fairSharing: {preemptionStrategies: [Greedy]}", "at `$.fairSharing.preemptionStrategies[0]`", id="strategy"),
    pytest.param("clientConnection: {burst: -1}", "burst: must not be negative, got -1", id="burst"),
])
def test_bad_kueue_values_are_refused_at_load_naming_the_field(text: str, named: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_kueue_config(text, "kueue.yaml")
    assert named in str(e.value), str(e.value)
    with pytest.raises(ConfigError) as e:  # the same through the config file's kueue: section
        parse_config(yaml.safe_dump({"kueue": yaml.safe_load(text)}), "kq.yaml")


@pytest.mark.parametrize("text, rate", [
    pytest.param("namespace: kueue-system", None, id="left-out"),
    pytest.param("clientConnection: {}", (300.0, 500), id="kueue-defaults"),
    pytest.param("clientConnection: {qps: 0, burst: 0}", (300.0, 500), id="zero-is-default"),
    pytest.param("clientConnection: {qps: 100, burst: 200}", (100.0, 200), id="set"),
    pytest.param("clientConnection: {qps: 50}", (50.0, 500), id="qps-only"),
    pytest.param("clientConnection: {qps: -1, burst: 10}", None, id="negative-qps-unlimited"),
])
def test_client_connection_gives_the_api_clients_rate_as_kueue_defaults_it(
        text: str, rate: tuple[float, int] | None) -> None:
    assert parse_kueue_config(text, "kueue.yaml").client_rate() == rate


@pytest.mark.parametrize("text, seconds", [("0", 0), ("300ms", 0.3), ("2s", 2), ("1h30m", 5400), ("1.5h", 5400),
                                           ("10us", 1e-5), ("+5m", 300)])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_every_setting_is_documented_with_its_default() -> None:
    import msgspec

    from kq.config import HttpConfig, NatsConfig

    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    for cls in (Config, NatsConfig, HttpConfig, WatcherConfig, AdmissionConfig, AdmissionTermConfig):
        for f in msgspec.structs.fields(cls):
            row = next((line for line in doc.splitlines() if line.startswith(f"| `{f.encode_name}` |")), None)
            assert row is not None, f"{cls.__name__}.{f.encode_name} is not in docs/configuration.md"
            if isinstance(f.default, (int, float)) and not isinstance(f.default, bool):
                assert f"| `{f.default:g}` |" in row, (row, f.default)


def test_an_unknown_feature_gate_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match="featureGates: unknown feature gate TopologyAwareSchedulin"):
        parse_kueue_config("featureGates: {TopologyAwareSchedulin: true, PartialAdmission: true}")


def test_opentelemetrys_exporter_variable_overrides_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_config("otelExporter: none").otel_exporter == "none"
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    assert parse_config("otelExporter: none").otel_exporter == "otlp"
    assert parse_config("{}").otel_exporter == "otlp"
