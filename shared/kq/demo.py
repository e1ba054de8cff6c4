"""`make demo` (python -m kq.demo): the local stack, a few queued Jobs, their progress, teardown.

Brings the stack up in a temporary dir, applies examples/demo through the manager
cluster's API, and follows the mirror on the bus, printing the workloads whenever a
state changes, through these stages:

    stack up -> objects applied -> jobs mirrored -> workloads created -> all admitted -> all finished

Where a stage needs a service this build does not have yet, the demo says so and
stops there (exit 0: what exists worked). Exit 1 when the stack fails, an object is
refused, or a stage stalls although its services run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NamedTuple

from kq.api import InputError
from kq.cli.apply import Reporter, UsageError, apply_objects, load_sources, read_sources
from kq.cli.busread import BusReadError, connected, mirror
from kq.cli.tables import Table, render
from kq.cli.views import ADMITTED, FINISHED, job_status, table_for, workload_state
from kq.kube import KubeClient
from kq.mirror import MirrorView
from kq.obs import configure_logging
from kq.stack import Stack, StackError, discover_services

CLUSTER = "manager"
STAGES = ("stack up", "objects applied", "jobs mirrored", "workloads created", "all admitted", "all finished")
# The service each stage after "objects applied" waits for.
NEEDS = {"jobs mirrored": "watcher", "workloads created": "watcher", "all admitted": "admission",
         "all finished": "watcher"}


def default_examples() -> Path:
    """examples/demo at the repository root (shared/kq/demo.py -> ../../examples/demo), else in the cwd."""
    here = Path(__file__).resolve().parents[2] / "examples" / "demo"
    return here if here.is_dir() else Path("examples") / "demo"


class JobRow(NamedTuple):
    namespace: str
    job: str
    workload: str
    queue: str
    state: str
    job_status: str


def snapshot(view: MirrorView, jobs: list[tuple[str, str]]) -> list[JobRow]:
    """One row per demo Job: its Workload (found by owner reference) and both states."""
    owned: dict[tuple[str, str], Any] = {}
    for wl in view.typed_items(CLUSTER, "workload"):
        ref = wl.metadata.controller_ref()
        if ref is not None and ref.kind == "Job":
            owned[(wl.metadata.namespace, ref.name)] = wl
    job_objs = {(j.metadata.namespace, j.metadata.name): j for j in view.typed_items(CLUSTER, "job")}
    rows = []
    for ns, name in jobs:
        wl, job = owned.get((ns, name)), job_objs.get((ns, name))
        rows.append(JobRow(ns, name, wl.metadata.name if wl else "", wl.spec.queue_name if wl else "",
                           workload_state(wl) if wl else "", job_status(job) if job else "<not mirrored>"))
    return rows


def render_rows(rows: list[JobRow]) -> str:
    return render(Table(("JOB", "WORKLOAD", "QUEUE", "STATE", "JOB STATUS"),
                        [(r.job, r.workload or "-", r.queue or "-", r.state or "-", r.job_status) for r in rows]))


class Progress:
    """Which stages the demo reached; admitted counts workloads that were admitted at least once."""

    def __init__(self) -> None:
        self.reached = 2  # stack up, objects applied
        self.ever_admitted: set[str] = set()

    def update(self, rows: list[JobRow]) -> None:
        for r in rows:
            if r.state in (ADMITTED, FINISHED):
                self.ever_admitted.add(r.job)
        checks = [
            all(r.job_status != "<not mirrored>" for r in rows),
            all(r.workload for r in rows),
            all(r.job in self.ever_admitted for r in rows),
            all(r.state == FINISHED for r in rows),
        ]
        reached = 2
        for ok in checks:
            if not ok:
                break
            reached += 1
        self.reached = max(self.reached, reached)

    @property
    def stage(self) -> str:
        return STAGES[self.reached - 1]

    @property
    def next(self) -> str | None:
        return STAGES[self.reached] if self.reached < len(STAGES) else None


async def follow(nats_url: str, jobs: list[tuple[str, str]], services: list[str], *, stall_s: float,
                 out: IO[str]) -> tuple[Progress, bool]:
    """Print the workloads as they change until every job finished, a needed service is missing,
    or nothing moved for stall_s. Returns the progress and whether it stalled."""
    progress = Progress()
    view = MirrorView()
    changed = asyncio.Event()
    t0 = time.monotonic()
    last_rows: list[JobRow] | None = None
    last_move = time.monotonic()
    async with connected(nats_url) as bus, view.replay(bus, CLUSTER, "*", on_change=lambda _m: changed.set()) as r:
        await r.wait_caught_up(30.0)
        while True:
            rows = snapshot(view, jobs)
            if rows != last_rows:
                last_rows, last_move = rows, time.monotonic()
                progress.update(rows)
                print(f"\n[{time.monotonic() - t0:5.1f}s] stage: {progress.stage}", file=out)
                out.write(render_rows(rows))
                out.flush()
            nxt = progress.next
            if nxt is None or NEEDS[nxt] not in services:
                return progress, False
            left = stall_s - (time.monotonic() - last_move)
            if left <= 0:
                return progress, True
            changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), min(left, 1.0))


async def _cluster_queues(nats_url: str, out: IO[str]) -> None:
    async with connected(nats_url) as bus:
        view = await mirror(bus, CLUSTER, "clusterqueue")
    cqs = view.typed_items(CLUSTER, "clusterqueue")
    if cqs:
        print("\n$ kq get clusterqueues", file=out)
        out.write(render(table_for("clusterqueue", cqs, datetime.now(UTC))))


async def run_demo(examples: Path, *, stall_s: float, timeout_s: float, out: IO[str], err: IO[str]) -> int:
    def say(line: str) -> None:
        print(line, file=out, flush=True)

    try:
        objs = load_sources(read_sources([str(examples)]), namespace=None, verb="apply")
    except (InputError, UsageError) as e:
        print(f"kq demo: {e}", file=err)
        return 1
    jobs = [(o.namespace, o.name) for o in objs if o.kind_info.kind == "Job"]
    services = discover_services()
    say(f"kq demo: {len(objs)} objects from {examples}, {len(jobs)} Jobs; services in this build: "
        f"{', '.join(services) or 'none'}")
    tmp = Path(tempfile.mkdtemp(prefix="kq-demo-"))
    ok = False
    try:
        async with Stack(tmp, progress=say, timeout_s=timeout_s) as stack:
            say("\n$ kq apply -f examples/demo")
            client = await KubeClient.from_kubeconfig(stack.kubeconfig(CLUSTER))
            report = Reporter(out, err)
            try:
                await apply_objects(client, objs, report)
            finally:
                await client.close()
            if report.failures:
                print(f"kq demo: {report.failures} objects were refused; logs in {stack.logs_dir}", file=err)
                return 1
            progress, stalled = await follow(stack.nats_url, jobs, services, stall_s=stall_s, out=out)
            await _cluster_queues(stack.nats_url, out)
            say("")
            nxt = progress.next
            if nxt is None:
                say(f"kq demo: every stage reached ({' -> '.join(STAGES)})")
                ok = True
            elif stalled:
                print(f"kq demo: stalled at stage '{progress.stage}': '{nxt}' did not happen within {stall_s}s "
                      f"although {NEEDS[nxt]} runs; logs in {stack.logs_dir}", file=err)
                shutil.copytree(stack.logs_dir, tmp.with_name(tmp.name + "-logs"), dirs_exist_ok=True)
                print(f"kq demo: logs kept in {tmp.with_name(tmp.name + '-logs')}", file=err)
            else:
                say(f"kq demo: reached stage '{progress.stage}'; '{nxt}' needs the {NEEDS[nxt]} service, "
                    "which this build does not have yet")
                ok = True
            say("stopping the stack")
    except (StackError, BusReadError) as e:
        print(f"kq demo: the stack failed: {e}", file=err)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    say("kq demo: done" if ok else "kq demo: failed")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kq.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=Path, default=None, help="a directory of objects (default examples/demo)")
    p.add_argument("--stall", type=float, default=30.0, help="seconds without progress before giving up")
    p.add_argument("--timeout", type=float, default=90.0, help="seconds for the stack to become healthy")
    args = p.parse_args(argv)
    configure_logging("kq-demo", "0", "error")
    try:
        return asyncio.run(run_demo(args.examples or default_examples(), stall_s=args.stall,
                                    timeout_s=args.timeout, out=sys.stdout, err=sys.stderr))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
