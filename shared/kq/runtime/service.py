"""run_service: the whole life of a kq service process, so each __main__.py is a few lines.

    from kq.runtime import run_service
    from services.gc.service import main      # async def main(bus: Bus, config: Config) -> None

    if __name__ == "__main__":
        raise SystemExit(run_service("gc", main))

Load config -> logging and tracing -> connect -> ensure streams -> health responder ->
main(bus, config) in a TaskGroup until it returns or SIGTERM/SIGINT -> cancel, drain,
exit 0. A failure in main exits 1 (logged); a bad configuration exits 2.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from opentelemetry.trace import TracerProvider

from kq.config import Config, ConfigError, load_config, unused_fields
from kq.installed import installed_services
from kq.obs import ObservabilityError, get_logger, setup_observability
from kq.runtime import eventloop
from kq.runtime.bus import Bus
from kq.runtime.health import HealthResponder
from kq.runtime.http import HttpEndpoint

Main = Callable[[Bus, Config], Coroutine[Any, Any, None]]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2


class _Stop(Exception):
    """Raised inside the TaskGroup to cancel main on a stop signal."""


async def serve(
    name: str,
    main: Main,
    config: Config,
    *,
    ready_when_started: bool = True,
    stop: asyncio.Event | None = None,
    shutdown_timeout_s: float = 10.0,
    tracer_provider: TracerProvider | None = None,
) -> int:
    """The async body of run_service; usable in-process with an explicit `stop` event."""
    log = get_logger("kq.service", service=name, instance=config.instance)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            pass
    bus = await Bus.connect(config.nats, name, instance=config.instance, tracer_provider=tracer_provider)
    started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
    running: list[asyncio.Task[None]] = []  # main, once started: live while it runs
    http = HttpEndpoint(config.http, name, config.instance, bus.metrics, lambda: bus.status,
                        lambda: not running or not running[0].done())
    health = HealthResponder(bus.nc, name, config.instance, started_at, lambda: bus.status)
    code = EXIT_OK
    try:
        health.http_port = await http.start()
        if health.http_port is not None:
            log.info("serving /metrics, /livez, /readyz", port=health.http_port)
        await bus.ensure_streams()
        await health.start()
        log.info("service started", nats=config.nats.url)
        if unused := unused_fields(config.kueue, installed_services()):
            log.info("kueue configuration fields kq does not use", fields=unused)

        async def until_stopped() -> None:
            await stop.wait()
            raise _Stop

        try:
            async with asyncio.TaskGroup() as tg:
                main_task = tg.create_task(main(bus, config), name=f"{name}:main")
                running.append(main_task)
                if ready_when_started:
                    bus.mark_ready()
                stopper = tg.create_task(until_stopped(), name=f"{name}:stop")
                main_task.add_done_callback(lambda _t: stopper.cancel())
        except* _Stop:
            log.info("stop requested; shutting down")
        except* Exception as eg:
            for e in eg.exceptions:
                log.error("service failed", error=repr(e), exc_info=e)
            code = EXIT_FAILED
    finally:
        bus.status = "stopping"
        await health.stop()
        await http.stop()
        try:
            async with asyncio.timeout(shutdown_timeout_s):  # not wait_for: it may swallow a cancel (kq.clock)
                await bus.close()
        except (TimeoutError, Exception) as e:
            log.warning("drain did not finish cleanly", error=repr(e))
        for sig in installed:
            loop.remove_signal_handler(sig)
    log.info("service stopped", exit_code=code)
    return code


def run_service(name: str, main: Main, *, ready_when_started: bool = True, config_path: str | None = None) -> int:
    """Run a service process to completion; returns the exit code for SystemExit.

    ready_when_started=False: main calls bus.mark_ready() itself (e.g. after its replay
    caught up), and health reports "starting" until then."""
    try:
        config = load_config(config_path)
        obs = setup_observability(name, config)
    except (ConfigError, ObservabilityError) as e:
        print(f"{name}: configuration error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        return eventloop.run(serve(name, main, config, ready_when_started=ready_when_started,
                                 tracer_provider=obs.tracer_provider))
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as e:  # could not connect or set up the streams
        get_logger("kq.service", service=name).error("cannot start", error=repr(e), exc_info=e)
        return EXIT_FAILED
    finally:
        obs.shutdown()
