"""`kq bench CONFIG [--summary FILE] [--virtual-time]`: Kueue's scheduler performance test for kq.

`kq bench --solver [--nodes N --levels L --workloads W --seed S]`: the topology solver
alone (services.tas.solver_bench, looked up by name: kq does not import services).

`kq bench --burst N [--quota CPUS --runtime T --timeout S]`: N Jobs at once (kq.bench.burst).

Exit 0 when the run completed (every workload finished, no ClusterQueue over quota), 1 when
it did not (timeout, a failed stack, over quota), 2 when the configuration is invalid or needs
something kq does not have (topology-aware scheduling).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import cProfile

    from kq.bench.generate import BenchPlan
    from kq.bench.metrics import RunLog

# The virtual-time simulator lives beside the admission core it drives; kq never imports
# `services`, so it is found by name at run time.
VIRTUAL_BENCH = "services.admission.bench_virtual"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2
DEFAULT_TIMEOUT_S = 600.0  # as Kueue's runner
# --workers: each pass; the MultiKueue pass of the 15,000-job baseline takes minutes on 2 cores
MULTIKUEUE_TIMEOUT_S = 1800.0


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `bench` under a `kq` parser's subcommands (args.func is `run`)."""
    parser = subparsers.add_parser("bench", help="run a scheduler benchmark (Kueue's performance test configs)")
    _fill(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`kq bench ...` as delegated by kq.cli.main: argv is what follows `bench`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a == "--podsready" or a.startswith("--podsready=") for a in args):
        from kq.bench.podsready import main as podsready_main  # the pods-ready timer bench

        return podsready_main(args)
    if any(a == "--burst" or a.startswith("--burst=") for a in args):
        from kq.bench.burst import main as burst_main  # N Jobs at once: bounded memory, nothing lost

        return burst_main(args)
    parser = argparse.ArgumentParser(prog="kq bench", description="run a scheduler benchmark "
                                     "(the generator configs of Kueue's scheduler performance test)")
    _fill(parser)
    return run(parser.parse_args(argv))


def _fill(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", type=Path, nargs="?", help="the generator config (e.g. baseline.yaml)")
    p.add_argument("--solver", action="store_true",
                   help="benchmark the topology solver alone on a generated topology (no config)")
    p.add_argument("--nodes", type=int, default=10_000, metavar="N", help="solver: nodes (default 10000)")
    p.add_argument("--levels", type=int, default=4, metavar="L",
                   help="solver: topology levels, hostname included (default 4)")
    p.add_argument("--workloads", type=int, default=10_000, metavar="W",
                   help="solver: workloads placed (default 10000)")
    p.add_argument("--seed", type=int, default=1, help="solver: seed of the workload stream (default 1)")
    p.add_argument("--queue-series", metavar="SIZES",
                   help="live, no config: the CPU per admitted workload of each service with this many "
                        "ClusterQueues each (comma-separated, e.g. 10,100,1000,5000), the workloads the same")
    p.add_argument("--series-workloads", type=int, default=10_000, metavar="N",
                   help="--queue-series: workloads per run, spread over the queues (default 10000)")
    p.add_argument("--summary", type=Path, metavar="FILE", help="write the figures as YAML (Kueue's summary keys)")
    p.add_argument("--virtual-time", action="store_true",
                   help="the admission core alone on a virtual clock (no bus, no API, no processes)")
    p.add_argument("--cycle-latency-ms", type=float, default=0.0, metavar="MS",
                   help="virtual time: how long each admission cycle takes to take effect (default 0)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="live: longest recording time after start-up (default 600, as Kueue's runner; "
                        f"with --workers {MULTIKUEUE_TIMEOUT_S:.0f} per pass)")
    p.add_argument("--workdir", type=Path, metavar="DIR",
                   help="live: keep the stack's files (logs, bus store) in DIR instead of a temporary directory")
    p.add_argument("--concurrency", type=int, default=64, metavar="N",
                   help="live: API requests the runner keeps in flight for creations and for finishes (default 64)")
    p.add_argument("--profile", type=Path, metavar="FILE",
                   help="profile this process with cProfile (pstats to FILE; the top functions to stderr)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--journal", type=Path, metavar="FILE",
                   help="live, single cluster: kubesim writes every committed Workload change to FILE with its "
                        "commit time (JSON lines), and the report adds the loop's hops read from it")
    p.add_argument("--replicas", action="append", default=[], metavar="SERVICE=N",
                   help="live: run N instances of a service (admission=N: sharded admission, N slots)")
    p.add_argument("--workers", type=int, default=0, metavar="N",
                   help="MultiKueue: run the mix as Jobs through one cluster, then through a manager and N workers")
    p.add_argument("--dispatcher", choices=("all-at-once", "incremental", "external"), default="incremental",
                   help="MultiKueue (--workers): Kueue's built-in dispatcher to use (default incremental: "
                        "all-at-once puts a copy of every job on every worker, 20 copies a job at 20 workers), "
                        "or external: examples/dispatchers/spread.py nominates one worker a job over the bus")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.timeout is None:
        args.timeout = MULTIKUEUE_TIMEOUT_S if args.workers else DEFAULT_TIMEOUT_S
    if args.solver:
        if args.config is not None:
            print("error: --solver takes no config", file=sys.stderr)
            return EXIT_INVALID
        return _solver(args)
    if args.queue_series is not None:
        if args.config is not None or args.virtual_time:
            print("error: --queue-series takes no config and runs live (not --virtual-time)", file=sys.stderr)
            return EXIT_INVALID
        return _queue_series(args)
    if args.config is None:
        print("error: a config is required (or --solver, or --queue-series)", file=sys.stderr)
        return EXIT_INVALID
    # Imported here so `kq --help` does not pay for the harness.
    from kq.bench.config import BenchConfigError, load_config, tas_features
    from kq.bench.generate import build_plan

    try:
        cfg = load_config(args.config)
    except BenchConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID
    tas = tas_features(cfg)
    if tas and args.virtual_time:
        print(f"error: {args.config} needs topology-aware scheduling ({'; '.join(tas[:3])}"
              f"{'; ...' if len(tas) > 3 else ''}), which --virtual-time (the admission core alone) does not "
              "include: run it live", file=sys.stderr)
        return EXIT_INVALID
    if args.cycle_latency_ms < 0 or args.timeout <= 0 or args.concurrency < 1:
        print("error: --cycle-latency-ms must be >= 0, --timeout > 0 and --concurrency >= 1", file=sys.stderr)
        return EXIT_INVALID
    plan = build_plan(cfg)
    if args.virtual_time:
        try:
            virtual_runner()
        except BenchUnavailable as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_INVALID
    say: Callable[[str], None] = (
        (lambda _line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    )
    if args.journal is not None and (args.virtual_time or args.workers):
        print("error: --journal is for a live single-cluster run (not --virtual-time or --workers)", file=sys.stderr)
        return EXIT_INVALID
    if args.workers:
        return _run_multikueue(args, plan, say)

    profiler = None
    if args.profile is not None:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        log = _record(args, plan, say)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - a stack that fails to start or dies is the run's result
        from kq.bench.live import BenchRunError
        from kq.stack import StackError

        if not isinstance(e, (BenchRunError, StackError)):
            raise
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if profiler is not None:
            profiler.disable()
            _write_profile(profiler, args.profile)

    from kq.bench.metrics import compute
    from kq.bench.report import render, write_summary

    figures = compute(plan, log)
    detail = f"cycle latency {args.cycle_latency_ms:g} ms" if args.virtual_time else ""
    print(render(figures, plan, config=str(args.config), mode_detail=detail))
    if args.journal is not None:
        from kq.bench.hops import hop_figures, render_hops

        with args.journal.open("rb") as lines:
            print(render_hops(hop_figures(plan, lines)))
    if args.summary is not None:
        write_summary(figures, args.summary)
    ok = (not figures.timed_out and figures.wall_ms is not None and figures.finished == figures.expected
          and not figures.over_quota)
    return EXIT_OK if ok else EXIT_FAILED


def _run_multikueue(args: argparse.Namespace, plan: BenchPlan, say: Callable[[str], None]) -> int:
    import asyncio

    from kq.bench.multikueue import SPREAD_DISPATCHER, run_multikueue_bench
    from kq.stack import StackError

    if args.workers < 1 or args.virtual_time:
        print("error: --workers needs N >= 1 and a live run (not --virtual-time)", file=sys.stderr)
        return EXIT_INVALID
    dispatcher = (SPREAD_DISPATCHER if args.dispatcher == "external"
                  else f"kueue.x-k8s.io/multikueue-dispatcher-{args.dispatcher}")
    try:
        text, ok = asyncio.run(run_multikueue_bench(plan, args.workers, workdir=args.workdir, timeout_s=args.timeout,
                                                    dispatcher=dispatcher, say=say))
    except StackError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAILED
    print(f"kq bench {args.config} --workers {args.workers}")
    print(text)
    return EXIT_OK if ok else EXIT_FAILED


def _queue_series(args: argparse.Namespace) -> int:
    from kq.bench.config import BenchConfig
    from kq.bench.generate import build_plan
    from kq.bench.live import BenchRunError, run_live
    from kq.bench.metrics import compute
    from kq.bench.series import SETTLE_S, SeriesError, parse_sizes, render_series, run_series
    from kq.runtime import eventloop
    from kq.stack import StackError

    try:
        sizes = parse_sizes(args.queue_series)
        if args.series_workloads < 1:
            raise SeriesError("--series-workloads must be >= 1")
    except SeriesError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID
    say: Callable[[str], None] = (
        (lambda _line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    )

    def one(cfg: BenchConfig) -> tuple[RunLog, int, int, float | None]:
        plan = build_plan(cfg)
        log = eventloop.run(run_live(plan, timeout_s=args.timeout, say=say, concurrency=args.concurrency,
                                     settle_s=SETTLE_S))
        f = compute(plan, log)
        return log, f.admitted, f.finished, None if f.wall_ms is None else (f.wall_ms - log.workloads_from_ms) / 1000

    try:
        rows = run_series(sizes, args.series_workloads, one, say)
    except (BenchRunError, StackError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAILED
    print(f"kq bench --queue-series {args.queue_series} --series-workloads {args.series_workloads}: "
          "CPU ms per admitted workload, set-up of the queues left out")
    print(render_series(rows))
    ok = all(not r.timed_out and r.finished == r.planned for r in rows)
    return EXIT_OK if ok else EXIT_FAILED


def _solver(args: argparse.Namespace) -> int:
    import importlib

    try:
        bench = importlib.import_module("services.tas.solver_bench")
    except ImportError as e:
        print(f"error: the topology solver is not installed with this kq ({e})", file=sys.stderr)
        return EXIT_INVALID
    code: int = bench.main(args.nodes, args.levels, args.workloads, args.seed)
    return code


def _record(args: argparse.Namespace, plan: BenchPlan, say: Callable[[str], None]) -> RunLog:
    if args.virtual_time:
        run_virtual = virtual_runner()

        def progress(t_ms: float, created: int, admitted: int, finished: int) -> None:
            say(f"  virtual t={t_ms / 1000:7.1f}s  created {created}/{len(plan.workloads)}  admitted {admitted}  "
                f"finished {finished}")

        return run_virtual(plan, cycle_latency_ms=args.cycle_latency_ms, progress=progress)
    from kq.bench.live import run_live
    from kq.cli.stackcmds import _replicas
    from kq.runtime import eventloop

    return eventloop.run(run_live(plan, timeout_s=args.timeout, workdir=args.workdir, say=say,
                                  concurrency=args.concurrency, replicas=_replicas(args.replicas),
                                  journal=args.journal))


class BenchUnavailable(RuntimeError):
    pass


def virtual_runner() -> Callable[..., RunLog]:
    """`run_virtual(plan, *, cycle_latency_ms, progress) -> RunLog` of the admission service's
    virtual-time bench; BenchUnavailable (saying what is missing) when this build has none."""
    try:
        module = importlib.import_module(VIRTUAL_BENCH)
    except ModuleNotFoundError as e:
        raise BenchUnavailable(f"--virtual-time needs the admission service's simulator ({VIRTUAL_BENCH}), "
                               f"which this build does not have ({e})") from None
    run = getattr(module, "run_virtual", None)
    if not callable(run):
        raise BenchUnavailable(f"--virtual-time: {VIRTUAL_BENCH} has no run_virtual()")
    return run  # found by name: its signature is checked where it is defined


def _write_profile(profiler: cProfile.Profile, path: Path) -> None:
    import io
    import pstats

    profiler.dump_stats(str(path))
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(20)
    print(f"profile written to {path}; the top functions by own time:", file=sys.stderr)
    print(out.getvalue(), file=sys.stderr)
