"""`kq`: the command line (the console script calls main()).

    kq up | down | status                  the local stack (state in --dir, default .kq/stack)
    kq apply|create|delete -f FILE|DIR     objects into a cluster's API (kubesim locally)
    kq delete KIND NAME... [-n NS]
    kq get KIND [NAME...] [-n NS|-A] [-o yaml|json|name]   read from the bus mirror
    kq describe workload NS/NAME           state, reason and decision history
    kq scenario run FILE [--json]          (kq.scenario.cli)
    kq bench ...                           (kq.bench.cli, when present)
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import IO

from kq.api import InputError
from kq.cli.apply import UsageError
from kq.cli.busread import BusReadError
from kq.cli.objects import Streams, cmd_delete, cmd_describe, cmd_get, cmd_write
from kq.cli.stackcmds import cmd_down, cmd_status, cmd_up
from kq.cli.target import TargetError
from kq.kube import KubeError
from kq.obs import configure_logging
from kq.stack import StackError, StateError

Command = Callable[[argparse.Namespace, Streams], Awaitable[int]]
EXIT_FAILED = 1
EXIT_NOT_IMPLEMENTED = 2


def _where_options(suppress: bool) -> argparse.ArgumentParser:
    """Options that say which stack to talk to; accepted before and after the subcommand."""
    p = argparse.ArgumentParser(add_help=False)
    d = argparse.SUPPRESS if suppress else None
    p.add_argument("--dir", default=d, help="the local stack's state dir (default .kq/stack)")
    p.add_argument("--kubeconfig", default=d, help="a kubeconfig instead of the local stack's (default $KUBECONFIG)")
    p.add_argument("--context", default=d, help="the kubeconfig context to use (default its current-context)")
    p.add_argument("--nats", default=d, help="a NATS URL to use instead of the local stack's")
    p.add_argument("--cluster", default=d, help="which cluster (default manager)")
    return p


def _namespace(p: argparse.ArgumentParser, *, all_namespaces: bool = False) -> None:
    p.add_argument("-n", "--namespace", help="namespace (default: default, or the object's own)")
    if all_namespaces:
        p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kq", description="kq: Kueue-compatible queueing over NATS JetStream",
                                     parents=[_where_options(False)])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    where = _where_options(True)

    def cmd(name: str, help: str, func: Command | None) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, parents=[where])
        p.set_defaults(func=func)
        return p

    p = cmd("up", "start the local stack (nats-server, kubesim, every service) in the background", cmd_up)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for everything to be healthy")
    p.add_argument("--kueue-config", help="a Kueue Configuration file (waitForPodsReady, fairSharing, multiKueue)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--replicas", action="append", default=[], metavar="SERVICE=N",
                   help="run N instances of a service (e.g. admission=2: an active one and a hot standby)")
    p.add_argument("--sleep-scale", type=float, default=1.0,
                   help="kubesim runs a container's `sleep N` for N x this many seconds (default 1)")
    p.add_argument("--secure", action="store_true",
                   help="a closed bus: TLS with a throwaway CA and one NATS user per service (least privilege)")
    p = cmd("down", "stop the local stack", cmd_down)
    p.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")
    cmd("status", "show the local stack's processes and their health", cmd_status)

    for name, help in (("apply", "create or update objects from files"),
                       ("create", "create objects from files (generateName works)")):
        p = cmd(name, help, cmd_write)
        p.add_argument("-f", "--filename", action="append", required=True, help="a file, a directory or -")
        _namespace(p)
    p = cmd("delete", "delete objects named in files, or KIND NAME...", cmd_delete)
    p.add_argument("-f", "--filename", action="append", help="a file, a directory or -")
    p.add_argument("kind", nargs="?", help="a kind: workload, wl, clusterqueue, cq, job, ...")
    p.add_argument("names", nargs="*", help="object names")
    _namespace(p)

    p = cmd("get", "list objects as the bus mirror sees them", cmd_get)
    p.add_argument("kind", help="workloads (wl), clusterqueues (cq), localqueues (lq), resourceflavors (rf), "
                                "cohorts, jobs, pods, nodes, ...; pendingworkloads cq/NAME or lq/NAME (positions)")
    p.add_argument("names", nargs="*", help="only these objects")
    p.add_argument("-o", "--output", choices=["yaml", "json", "name"], help="output format (default: a table)")
    _namespace(p, all_namespaces=True)

    p = cmd("describe", "a workload's state, reason and decision history", cmd_describe)
    p.add_argument("kind", help="workload")
    p.add_argument("name", help="NAMESPACE/NAME or NAME (a Workload, or the Job that owns one)")
    _namespace(p)

    p = cmd("scenario", "run scenario files (kq scenario run FILE [--json])", None)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p = cmd("bench", "benchmarks", None)
    p.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def _delegate(module: str, argv: list[str], err: IO[str]) -> int:
    """Subcommands that live in their own package: kq.<x>.cli.main(argv) -> exit code."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is not None and module.startswith(e.name):
            print(f"error: {module.split('.')[1]} is not implemented yet ({module} is missing)", file=err)
            return EXIT_NOT_IMPLEMENTED
        raise
    return int(mod.main(argv) or 0)


async def _run(args: argparse.Namespace, io: Streams) -> int:
    try:
        return await args.func(args, io)
    except InputError as e:
        print(f"error: {e}", file=io.err)
    except (UsageError, StackError, StateError, TargetError, BusReadError) as e:
        print(f"error: {e}", file=io.err)
    except KubeError as e:
        print(f"error: {e}", file=io.err)
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None, *, out: IO[str] | None = None, err: IO[str] | None = None,
         stdin: IO[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    io = Streams(out or sys.stdout, err or sys.stderr, stdin or sys.stdin)
    if argv and argv[0] in ("scenario", "bench"):
        # Their own parsers see every option, so `kq bench --help` and options before FILE work.
        return _delegate(f"kq.{argv[0]}.cli", argv[1:], io.err)
    args = build_parser().parse_args(argv)
    if args.command in ("scenario", "bench"):
        return _delegate(f"kq.{args.command}.cli", list(args.args), io.err)
    configure_logging("kq", "0", "error")  # library warnings stay out of kubectl-like output
    try:
        return asyncio.run(_run(args, io))
    except KeyboardInterrupt:
        print("interrupted", file=io.err)
        return 130


if __name__ == "__main__":
    sys.exit(main())
