"""Wiring of the dispatcher: one lease per manager cluster ("dispatcher"/<manager>); while it is
held a Term (services/dispatcher/term.py) dispatches that manager's MultiKueue workloads. A
second instance waits in `lead()` as a hot standby and takes over with a higher epoch (its
commands fence the old holder's at the watcher).

The dispatcher reads the manager's objects from the bus mirror and talks to the manager's API
server for one thing only: the workers' kubeconfig Secrets (never mirrored on the bus).
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from kq.config import Config
from kq.kube import KubeClient
from kq.obs import get_logger
from kq.runtime import Backoff, Bus, Lease, holder_name, stand
from services.dispatcher.guard import run_guard
from services.dispatcher.settings import DispatcherSettings, core_settings
from services.dispatcher.term import Term

SERVICE = "dispatcher"


def dispatcher_lease(bus: Bus, manager: str, holder: str, ttl: int) -> Lease:
    """The dispatcher's lease for one manager. Renewed on a thread and NATS connection of its own: on
    a loaded machine the term's loop (a reconnection relisting every worker, a burst of reconciles)
    went past the 3 s TTL between renewals, and each new term connected to and listed every worker
    again, which made the next loss likelier (the dispatcher lost it hundreds of times in a run)."""
    return Lease(bus, SERVICE, manager, holder, ttl=ttl, clock=bus.clock, own_connection=True)


async def main(bus: Bus, config: Config, settings: DispatcherSettings | None = None) -> None:
    settings = settings or DispatcherSettings()
    core = core_settings(config)
    log = get_logger("kq.dispatcher", instance=config.instance)
    managers = [c for c in config.clusters if c.role == "manager"]
    workers = tuple(c.name for c in config.clusters if c.role == "worker")
    if not managers:
        # A kq that serves only worker clusters: nothing to dispatch, but its copies keep the lease guard.
        log.info("no manager cluster configured; guarding the workers' copies only", workers=workers)
        bus.mark_ready()
        if workers:
            await run_guard(bus, workers, core, 0)
        await asyncio.Event().wait()
    manager = managers[0]
    holder = holder_name(config.instance)
    lease = dispatcher_lease(bus, manager.name, holder, settings.lease_ttl_s)
    async with AsyncExitStack() as stack:
        client = await KubeClient.from_kubeconfig(manager.kubeconfig, user_agent="kq/dispatcher",
                                                  rate=config.kueue.client_rate())
        stack.push_async_callback(client.close)

        leading = False

        async def report_standby() -> None:
            """While not leading: "standby" once another instance is seen holding the lease."""
            while True:
                if not leading and bus.status == "starting":
                    try:
                        held = await lease.current()
                    except Exception:  # noqa: BLE001 - the bus is away: ask again next time
                        held = None
                    if held is not None and held[1].holder != holder and not leading:
                        bus.status = "standby"
                await asyncio.sleep(0.5)

        reporter = asyncio.create_task(report_standby())
        stack.callback(reporter.cancel)

        async def term(epoch: int) -> None:
            nonlocal leading
            leading = True
            try:
                await Term(bus, manager.name, client, core, settings, epoch, workers).run()
            finally:
                leading = False

        async def idle() -> None:
            # "standby" only while another instance holds the lease; until we know, "starting"
            # (so a stack does not count a dispatcher about to lead as ready).
            held = await lease.current()
            bus.status = "standby" if held is not None and held[1].holder != holder else "starting"

        await stand(bus, lease, term, log=log, backoff=Backoff(0.5, 0.5), idle_status="starting", on_idle=idle)
