"""The scenario driver: start the real stack, apply the objects, play the timeline, check.

Time 0 is the moment the last object has been applied. Steps and timed checks
run at their `at` on the monotonic clock (see timeline.py for the order at the
same instant); `settled` checks run once every cluster has been idle for 1 s,
no kubesim timer is pending, no service has unprocessed bus messages and no
workload waits out a requeue backoff, bounded by `settle_timeout_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import msgspec
import nats

from kq.config import WaitForPodsReady
from kq.kube import KubeClient, KubeError
from kq.scenario.actions import KubesimControl, StepError, StepRunner, describe
from kq.scenario.checks import evaluate
from kq.scenario.model import Check, Scenario, Step, format_ms
from kq.scenario.observe import ObserveError, Observer
from kq.scenario.report import CheckResult, Reporter, RunResult
from kq.scenario.timeline import Activity, busy_reasons, settled_checks, timed_entries
from kq.stack import Stack

POLL_S = 0.1
IDLE_READINGS = 2  # consecutive idle readings before "settled" (one could fall between two writes)


@contextlib.asynccontextmanager
async def _workdir(path: Path | None) -> AsyncIterator[Path]:
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="kq-scenario-") as tmp:
        yield Path(tmp)


async def run_scenario(
    scenario: Scenario, reporter: Reporter, *, workdir: Path | None = None, settle_timeout_s: float = 60.0
) -> RunResult:
    results: dict[int, CheckResult] = {}
    errors: list[str] = []
    try:
        async with _workdir(workdir) as wd, Stack(
            wd,
            kueue_config=scenario.kueue_config,
            clusters=[(c.name, c.role) for c in scenario.clusters],
            progress=reporter.progress,
        ) as stack:
            driver = await _Driver.open(scenario, stack, reporter, settle_timeout_s)
            try:
                await driver.play(results)
            finally:
                await driver.close()
    except StepError as e:
        errors.append(str(e))
    except Exception as e:  # noqa: BLE001 - the stack failing is reported as the run's error, not a traceback
        errors.append(f"{type(e).__name__}: {e}")
    ordered: list[CheckResult] = []
    for check in scenario.checks:
        ordered.append(
            results.get(check.index)
            or CheckResult(
                at=check.at_label,
                ok=False,
                observed=None,
                failures=[f"not evaluated: {errors[0] if errors else 'the run ended first'}"],
                observed_at_ms=-1,
            )
        )
    ok = not errors and all(r.ok for r in ordered)
    return RunResult(scenario=scenario.name, ok=ok, checks=ordered, errors=errors)


def _pods_ready(scenario: Scenario) -> WaitForPodsReady | None:
    raw = scenario.kueue_config.get("waitForPodsReady")
    return msgspec.convert(raw, WaitForPodsReady) if raw is not None else None


class _Driver:
    def __init__(
        self,
        scenario: Scenario,
        stack: Stack,
        reporter: Reporter,
        clients: dict[str, KubeClient],
        http: aiohttp.ClientSession,
        settle_timeout_s: float,
    ) -> None:
        self.scenario = scenario
        self.stack = stack
        self.reporter = reporter
        self.clients = clients
        self.http = http
        self.sim = KubesimControl(http, stack.kubesim_url)
        self.observer = Observer(clients, scenario.manager, _pods_ready(scenario))
        self.steps = StepRunner(clients, self.sim, self.observer)
        self.settle_timeout_s = settle_timeout_s
        self.loop = asyncio.get_running_loop()
        self.t0 = 0.0

    @classmethod
    async def open(cls, scenario: Scenario, stack: Stack, reporter: Reporter, settle_timeout_s: float) -> _Driver:
        clients = {c.name: await KubeClient.from_kubeconfig(str(stack.kubeconfig(c.name))) for c in scenario.clusters}
        return cls(scenario, stack, reporter, clients, aiohttp.ClientSession(), settle_timeout_s)

    async def close(self) -> None:
        await self.http.close()
        for client in self.clients.values():
            await client.close()

    def _ms(self) -> int:
        return round((self.loop.time() - self.t0) * 1000)

    async def play(self, results: dict[int, CheckResult]) -> None:
        sc = self.scenario
        workers = [c.name for c in sc.clusters if c.role == "worker"]
        if workers:
            kubeconfigs = {w: Path(self.stack.kubeconfig(w)).read_text() for w in workers}
            await self.steps.give_worker_kubeconfigs(sc.manager, kubeconfigs)
        total = sum(len(objs) for objs in sc.objects.values())
        self.reporter.progress(f"applying {total} objects")
        for cluster in [c.name for c in sc.clusters]:
            objs = sc.objects.get(cluster, ())
            # Namespaces first, so namespaced objects never race their namespace.
            for lo in sorted(objs, key=lambda o: o.kind_info.kind != "Namespace"):
                try:
                    await self.steps.apply(cluster, lo)
                except KubeError as e:
                    raise StepError(f"applying {lo.source} ({lo.ref()}): {e}") from e
        self.t0 = self.loop.time()
        entries = timed_entries(sc)
        n_steps = len(sc.steps)
        for entry in entries:
            delay = self.t0 + entry.at_ms / 1000 - self.loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if isinstance(entry.item, Step):
                step = entry.item
                k = sc.steps.index(step) + 1
                self.reporter.progress(f"step {k}/{n_steps} at {format_ms(step.at_ms)}: {describe(step)}")
                await self.steps.run(step)  # a failed step ends the run: later checks would mean nothing
            else:
                results[entry.item.index] = await self.check(entry.item)
        settled = settled_checks(sc)
        if settled:
            self.reporter.progress("waiting for the system to settle")
            unsettled = await self.settle()
            for check in settled:
                results[check.index] = await self.check(check, extra_failure=unsettled)

    async def check(self, check: Check, extra_failure: str | None = None) -> CheckResult:
        at_ms = self._ms()
        try:
            observed = await self.observer.observe(check)
        except ObserveError as e:
            result = CheckResult(at=check.at_label, ok=False, observed=None, failures=[str(e)], observed_at_ms=at_ms)
        else:
            failures = evaluate(check, observed)
            if extra_failure:
                failures.insert(0, extra_failure)
            result = CheckResult(
                at=check.at_label, ok=not failures, observed=observed, failures=failures, observed_at_ms=at_ms
            )
        self.reporter.check(result)
        return result

    async def settle(self) -> str | None:
        """Wait until idle; None when settled, else why not (a failure for every settled check)."""
        deadline = self.loop.time() + self.settle_timeout_s
        idle_in_a_row = 0
        reasons: list[str] = []
        async with _bus_monitor(self.stack.nats_url) as bus:
            while True:
                reasons = await self.busy(bus)
                idle_in_a_row = 0 if reasons else idle_in_a_row + 1
                if idle_in_a_row >= IDLE_READINGS:
                    self.reporter.progress(f"settled at {format_ms(self._ms())}")
                    return None
                if self.loop.time() >= deadline:
                    return f"not settled within {self.settle_timeout_s:g}s: " + "; ".join(reasons[:6])
                await asyncio.sleep(POLL_S)

    async def busy(self, bus: _BusMonitor) -> list[str]:
        state = await self.sim.state()
        activity = Activity(clusters=state.clusters, bus_backlog={}, waiting=())
        reasons = busy_reasons(activity)
        if reasons:  # cheap test first: the API says it is busy
            return reasons
        try:
            waiting = await self.observer.waiting_timers(datetime.now(UTC))
        except ObserveError as e:
            waiting = [str(e)]
        return busy_reasons(Activity(clusters=state.clusters, bus_backlog=await bus.backlog(), waiting=waiting))


class _BusMonitor:
    """Unprocessed messages of every consumer a service is attached to."""

    def __init__(self, nc: nats.NATS) -> None:
        self.jsm = nc.jsm()

    async def backlog(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for stream in await self.jsm.streams_info():
            name = stream.config.name
            if name is None:
                continue
            for ci in await self.jsm.consumers_info(name):
                # A consumer nobody reads (left by a past client, kept for `kq describe`) never drains:
                # count only those a service is attached to or working through.
                attended = bool(ci.num_waiting) or bool(ci.push_bound) or bool(ci.num_ack_pending)
                if attended:
                    out[f"{name}/{ci.name}"] = (ci.num_pending or 0) + (ci.num_ack_pending or 0)
        return out


@contextlib.asynccontextmanager
async def _bus_monitor(url: str) -> AsyncIterator[_BusMonitor]:
    nc = await nats.connect(url.split(","), name="kq-scenario", allow_reconnect=False, connect_timeout=5)
    try:
        yield _BusMonitor(nc)
    finally:
        await nc.close()
