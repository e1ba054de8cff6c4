"""Wiring of the pods-ready service: one lease ("podsready"/"default") over every cluster; while
it is held a Term (handlers.py) rebuilds from the mirror, fences and decides. A second instance
waits in `lead()` as a hot standby and takes over with a higher epoch when the lease lapses; the
deadlines it finds overdue are decided at once, and the bus schedules fired meanwhile wait for it
in KQ_TIMERS.

With waitForPodsReady off (absent, or v1beta1 `enable: false`) the service has nothing to do
and says so; it stays up so `kq up` and deployments need not know.
"""

from __future__ import annotations

import asyncio

import msgspec

from kq.config import Config, ConfigError, WaitForPodsReady, duration_seconds
from kq.obs import get_logger
from kq.runtime import Backoff, Bus, Lease, holder_name, stand
from services.podsready.core.model import PodsReadyConfig
from services.podsready.handlers import Term, TermSettings

SERVICE = "podsready"


class PodsReadySettings(msgspec.Struct, frozen=True, kw_only=True):
    """The service's own knobs (kq.config has no podsready section); tests pass their own."""

    lease_partition: str = "default"
    lease_ttl_s: int = 2  # a killed leader's deadlines are taken over within about this long
    restart_backoff_s: float = 0.5
    restart_backoff_max_s: float = 10.0
    term: TermSettings = TermSettings()


def core_config(wfpr: WaitForPodsReady) -> PodsReadyConfig:
    """The validated Kueue configuration (kq.config refuses bad values at load) as the core's."""
    rs = wfpr.requeuing_strategy
    try:
        timeout = duration_seconds(wfpr.timeout)
    except ConfigError as e:
        raise ConfigError(f"waitForPodsReady.timeout: {e}") from None
    try:
        # Unset: the timeout (Kueue's default); "0s": recovery is not timed.
        recovery = timeout if wfpr.recovery_timeout is None else duration_seconds(wfpr.recovery_timeout)
    except ConfigError as e:
        raise ConfigError(f"waitForPodsReady.recoveryTimeout: {e}") from None
    if timeout <= 0:
        raise ConfigError("waitForPodsReady.timeout: must be more than 0s")
    return PodsReadyConfig(timeout_s=timeout, recovery_timeout_s=recovery if recovery > 0 else None,
                           backoff_base_s=rs.backoff_base_seconds, backoff_max_s=rs.backoff_max_seconds,
                           backoff_limit_count=rs.backoff_limit_count)


def enabled(wfpr: WaitForPodsReady | None) -> bool:
    """v1beta2: the section being present means on; v1beta1's `enable: false` turns it off."""
    return wfpr is not None and wfpr.enable is not False


async def main(bus: Bus, config: Config, settings: PodsReadySettings | None = None) -> None:
    settings = settings or PodsReadySettings()
    log = get_logger("kq.podsready", instance=config.instance)
    wfpr = config.kueue.wait_for_pods_ready
    if not enabled(wfpr):
        log.info("waitForPodsReady is off; nothing to do")
        bus.mark_ready()
        await asyncio.Event().wait()
        return
    clusters = tuple(c.name for c in config.clusters)
    if not clusters:
        raise ConfigError("podsready: no clusters configured (config `clusters`)")
    assert wfpr is not None
    core = core_config(wfpr)
    holder = holder_name(config.instance)
    lease = Lease(bus, SERVICE, settings.lease_partition, holder, ttl=settings.lease_ttl_s, clock=bus.clock)

    async def term(epoch: int) -> None:
        await Term(bus, clusters, core, epoch, settings.term).run()

    await stand(bus, lease, term, log=log, backoff=Backoff(settings.restart_backoff_s, settings.restart_backoff_max_s))
