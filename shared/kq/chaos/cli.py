"""kq chaos: the stack under injected faults, then the invariant checker (exit 1 on any violation).

    kq chaos                                  # the short seeded run (about 300 jobs, one fault of each family)
    kq chaos --long                           # 5,000 jobs, every fault kind, several rounds
    kq chaos --workloads 1000 --seed 3 --faults kill-watcher,kill-nats --json
    kq chaos --nats-cluster 3                 # a 3-node JetStream cluster; adds kill-nats-node, nats-quorum-loss
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kq.chaos.check import check_journal
from kq.chaos.faults import ALL, NATS_CLUSTER, SHORT, FaultError, check_kinds
from kq.chaos.run import ChaosConfig, run_chaos
from kq.config import MAX_STREAM_REPLICAS
from kq.obs import configure_logging


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _check_only(path: Path, as_json: bool) -> int:
    if not path.is_file():
        print(f"error: --check: no journal at {path}", file=sys.stderr)
        return 2
    rep = check_journal(path)
    figures = {"journalRecords": rep.records, "workloads": rep.workloads, "jobs": rep.jobs,
               "finished": len(rep.finished_uids), "ends": dict(rep.ends), "admissions": len(rep.progress),
               "spanS": round(rep.last_t - rep.first_t, 1), "violations": len(rep.violations),
               "violationsByKind": dict(rep.by_kind())}
    if as_json:
        print(json.dumps(figures, indent=2))
    else:
        print("\n".join(f"{k}: {v}" for k, v in figures.items()))
        for v in rep.violations[:20]:
            print(f"  ! {v.cluster} t+{v.t - rep.first_t:.2f}s {v.what}")
        for u in rep.unfinished:
            print(f"  unfinished: {u}")
    return 1 if rep.violations else 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kq chaos", description="run kq under injected faults and check its promises")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workloads", type=int, default=None, help="jobs to create (default 300; --long 5000)")
    p.add_argument("--long", action="store_true", help="5,000 jobs and every fault kind")
    p.add_argument("--faults", default=None, help=f"comma-separated fault kinds (known: {', '.join(ALL)})")
    p.add_argument("--nats-cluster", type=int, default=1, metavar="N",
                   help=f"run the bus as N nats-server nodes (R<N> streams); 3 or more adds {', '.join(NATS_CLUSTER)}")
    p.add_argument("--rate", type=float, default=20.0, help="jobs created per second, at most")
    p.add_argument("--dir", type=Path, default=None, help="where the stack, logs and journal go (default: a temp dir)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--check", type=Path, default=None, metavar="JOURNAL",
                   help="only check an existing kubesim journal (kubesim --journal) and print what it found")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.check is not None:
        return _check_only(args.check, args.json)
    cluster = NATS_CLUSTER if args.nats_cluster >= 3 else ()
    kinds = tuple(args.faults.split(",")) if args.faults else ((ALL if args.long else SHORT) + cluster)
    try:
        check_kinds(kinds)
        if not 1 <= args.nats_cluster <= MAX_STREAM_REPLICAS:
            raise FaultError(f"--nats-cluster: want 1 to {MAX_STREAM_REPLICAS} nodes, got {args.nats_cluster}")
        if set(kinds) & set(NATS_CLUSTER) and not cluster:
            raise FaultError(f"--faults: {', '.join(sorted(set(kinds) & set(NATS_CLUSTER)))} need --nats-cluster 3")
    except FaultError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    workloads = args.workloads or (5000 if args.long else 300)
    if workloads < 1:
        print("error: --workloads: want at least 1", file=sys.stderr)
        return 2
    configure_logging("kq-chaos", "0", "error")  # the run's own bus client: reconnects are expected here
    work = args.dir or Path(tempfile.mkdtemp(prefix="kq-chaos-"))
    cfg = ChaosConfig(dir=work.resolve(), seed=args.seed, workloads=workloads, rate=args.rate, faults=kinds,
                      nats_cluster=args.nats_cluster,
                      drain_timeout_s=600.0 if args.long else 180.0)
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else \
        (lambda line: print(line, flush=True))
    say(f"kq chaos in {work}")
    signal.signal(signal.SIGTERM, _interrupt)  # stopped from outside: the stack goes down with the run
    try:
        result = asyncio.run(run_chaos(cfg, say))
    except KeyboardInterrupt:
        print("interrupted; the stack was stopped", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(result.figures(), indent=2))
    else:
        print(result.summary())
    return 0 if result.ok else 1
