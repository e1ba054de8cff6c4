"""The dispatcher's own knobs (kq.config carries Kueue's multiKueue section; these are kq's)."""

from __future__ import annotations

import msgspec

from kq.api.constants import multikueue_job_kinds
from kq.config import Config, ConfigError, duration_seconds
from services.dispatcher.core.model import Settings, mode_for

KQ_NAMESPACE = "kq-system"  # where the manager's kq keeps the workers' kubeconfig Secrets
DEFAULT_STEP_SIZE = 3  # Kueue's incremental dispatcher: workers nominated per round
DEFAULT_ROUND_TIMEOUT = "5m"  # ... and how long a round lasts (Kueue hard-codes it)


class DispatcherSettings(msgspec.Struct, frozen=True, kw_only=True):
    kq_namespace: str = KQ_NAMESPACE
    lease_ttl_s: int = 3  # a killed leader is replaced within about this long
    concurrency: int = 32  # workloads reconciled at once
    retry_s: float = 0.5  # after a failed reconcile
    retry_base_s: float = 0.2  # reconnect backoff to a worker, doubling up to retry_max_s
    retry_max_s: float = 1.0
    watch_timeout_s: float = 30.0
    progress_batch_s: float = 1.0  # a worker Job's status moving along is copied this long after (Term)
    resync_s: float = 60.0  # each worker's view is checked against a list this often (remotes.py; 0: never)
    remote_call_timeout_s: float = 30.0  # bounds each write to a worker, a connect and a list (beyond the client's own)
    replay_timeout_s: float = 120.0


def core_settings(config: Config) -> Settings:
    mk = config.kueue.multi_kueue
    kinds = multikueue_job_kinds(config.kueue.frameworks())
    try:
        if mk is None:
            return Settings(origin="multikueue", worker_lost_timeout_s=900.0, kinds=kinds)
        inc = mk.incremental_dispatcher_config
        step = inc.step_size if inc is not None and inc.step_size is not None else DEFAULT_STEP_SIZE
        rnd = inc.round_timeout if inc is not None and inc.round_timeout is not None else DEFAULT_ROUND_TIMEOUT
        return Settings(origin=mk.origin, worker_lost_timeout_s=duration_seconds(mk.worker_lost_timeout),
                        mode=mode_for(mk.dispatcher_name), round_timeout_s=duration_seconds(rnd), step_size=step,
                        kinds=kinds)
    except ConfigError as e:
        raise ConfigError(f"kueue.multiKueue: {e}") from None
