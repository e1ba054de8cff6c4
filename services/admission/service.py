"""Wiring of the admission service: one lease ("admission"/"default") covering every cluster,
and while it is held a LeaderTerm (services/admission/leader.py) with one scheduler partition
per configured cluster. A second instance (another KQ_INSTANCE) waits in `lead()` as a hot
standby and takes over, with a higher epoch, when the lease lapses.

Health: "standby" while waiting for the lease, "starting" while rebuilding and fencing,
"ready" while deciding.
"""

from __future__ import annotations

import msgspec

from kq.config import AdmissionConfig, Config, ConfigError
from kq.obs import get_logger
from kq.runtime import Backoff, Bus, Lease, holder_name, stand
from services.admission.core.model import SchedulerConfig
from services.admission.leader import LeaderTerm
from services.admission.slots import Replica, check_sharding

SERVICE = "admission"


# The `admission:` section of kq's config file; tests pass their own.
AdmissionSettings = AdmissionConfig


def scheduler_config(config: Config) -> SchedulerConfig:
    """The Kueue Configuration parts the core reads, validated."""
    k = config.kueue
    raw: dict[str, object] = {}
    if k.fair_sharing is not None and k.fair_sharing.enable:
        raw["fair_sharing"] = {"preemption_strategies": list(k.fair_sharing.preemption_strategies)}
    if k.wait_for_pods_ready is not None:
        raw["requeuing_timestamp"] = k.wait_for_pods_ready.requeuing_strategy.timestamp
        raw["block_admission"] = k.wait_for_pods_ready.enable and k.wait_for_pods_ready.block_admission
    try:
        return msgspec.convert(raw, SchedulerConfig)
    except msgspec.ValidationError as e:
        raise ConfigError(f"kueue configuration for admission: {e}") from None


async def main(bus: Bus, config: Config, settings: AdmissionSettings | None = None) -> None:
    settings = settings or config.admission
    clusters = tuple(c.name for c in config.clusters)
    workers = frozenset(c.name for c in config.clusters if c.role == "worker")
    if not clusters:
        raise ConfigError("admission: no clusters configured (config `clusters`)")
    sched = scheduler_config(config)
    holder = holder_name(config.instance)
    if settings.shards > 1:  # sharded: slots of cohort trees shared among the replicas (slots.py)
        check_sharding(settings, sched)
        await Replica(bus, clusters, sched, settings, config.instance, holder).run()
        return
    lease = Lease(bus, SERVICE, settings.lease_partition, holder, ttl=settings.lease_ttl_s, clock=bus.clock,
                  own_connection=True)  # renewals must not queue behind the rebuild (kq.runtime.lease)

    async def term(epoch: int) -> None:
        bus.metrics.role = "leader"
        try:
            await LeaderTerm(bus, clusters, sched, epoch, settings.term, workers=workers).run()
        finally:
            bus.metrics.role = "follower"
            bus.metrics.clear_kueue_gauges()  # the queues are the next leader's to report

    bus.metrics.role = "follower"
    await stand(bus, lease, term, log=get_logger("kq.admission", instance=config.instance),
                backoff=Backoff(settings.restart_backoff_s, settings.restart_backoff_max_s))
