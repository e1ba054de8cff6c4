"""`kq`: the command line (the console script calls main()).

    kq up | down | status                  the local stack (state in --dir, default .kq/stack)
    kq apply|create|delete -f FILE|DIR     objects into a cluster's API (kubesim locally)
    kq delete KIND NAME... [-n NS]
    kq get KIND [NAME...] [-n NS|-A] [-o yaml|json|name]   read from the bus mirror
    kq describe workload NS/NAME           state, reason and decision history
    kq create cq|lq|rf NAME [flags]        kueuectl's create (--nominal-quota, --cohort, -c CQ, ...)
    kq stop|resume wl|lq|cq NAME...        kueuectl's stop/resume (spec.active, spec.stopPolicy)
    kq list workloads [-c CQ] [--status S]  kueuectl's list, with each pending workload's position
    kq completion bash|zsh|tcsh            a shell completion script (also as kubectl-kq: kubectl kq ...)
    kq dashboard [--port 8090]             the web page: queues, usage, pending positions, decisions
    kq scenario run FILE [--json]          (kq.scenario.cli)
    kq bench ...                           (kq.bench.cli, when present)
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import IO, TYPE_CHECKING

from kq.gc_tuning import pause_for_imports, resume_after_imports

# The commands' modules are imported where they are needed, not here: `kq scenario|bench|chaos`
# hand over to their own package first and, like every scenario run in the tests, skip them.
if TYPE_CHECKING:
    from kq.cli.objects import Streams

Command = Callable[[argparse.Namespace, "Streams"], Awaitable[int]]
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
    from kq.cli.dashboard import cmd_conversion_webhook, cmd_dashboard
    from kq.cli.listing import cmd_list
    from kq.cli.objects import cmd_delete, cmd_describe, cmd_get, cmd_write
    from kq.cli.queues import add_create_flags, cmd_stop_resume
    from kq.cli.stackcmds import cmd_down, cmd_status, cmd_up

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
    p.add_argument("--nats-cluster", type=int, default=1, metavar="N",
                   help="N nats-server processes forming one JetStream cluster, kq's streams replicated N times "
                        "(3: a node may die and kq keeps deciding)")
    p = cmd("down", "stop the local stack", cmd_down)
    p.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")
    cmd("status", "show the local stack's processes and their health", cmd_status)

    p = cmd("apply", "create or update objects from files", cmd_write)
    p.add_argument("-f", "--filename", action="append", required=True, help="a file, a directory or -")
    _namespace(p)
    p = cmd("create", "create objects from files (generateName works), or a queue or flavor from flags "
                      "(kueuectl: create clusterqueue|localqueue|resourceflavor NAME)", cmd_create)
    p.add_argument("-f", "--filename", action="append", help="a file, a directory or -")
    p.add_argument("kind", nargs="?", help="clusterqueue (cq), localqueue (lq) or resourceflavor (rf)")
    p.add_argument("names", nargs="*", help="its name")
    _namespace(p)
    add_create_flags(p)
    for name, help in (("stop", "stop admitting to a queue (and drain it), or deactivate a workload (kueuectl)"),
                       ("resume", "resume a stopped queue or workload (kueuectl)")):
        p = cmd(name, help, cmd_stop_resume)
        p.add_argument("kind", help="workload (wl), localqueue (lq) or clusterqueue (cq)")
        p.add_argument("names", nargs="+", help="object names")
        p.add_argument("--keep-already-running", action="store_true",
                       help="stop: admit nothing new but leave what runs (stopPolicy Hold, not HoldAndDrain)")
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
    p.add_argument("-o", "--output", choices=["yaml", "json", "name", "wide"], help="output format (default: a table)")
    p.add_argument("-l", "--selector", help="label selector: KEY=VALUE, KEY!=VALUE, KEY in (A,B), KEY, !KEY, ...")
    p.add_argument("-w", "--watch", action="store_true", help="after the list, print each change (Ctrl-C ends)")
    _namespace(p, all_namespaces=True)

    p = cmd("list", "kueuectl's list: workloads with their position in queue; other kinds as kq get", cmd_list)
    p.add_argument("kind", help="workloads (wl), clusterqueues (cq), localqueues (lq), resourceflavors (rf), pods")
    p.add_argument("--clusterqueue", "-c", help="workloads of this ClusterQueue")
    p.add_argument("--localqueue", "-q", help="workloads of this LocalQueue")
    p.add_argument("--status", help="workloads in this state: pending, quotareserved, admitted, evicted, "
                                    "deactivated, finished")
    p.add_argument("-l", "--selector", help="label selector (other kinds)")
    _namespace(p, all_namespaces=True)

    p = cmd("describe", "a workload's state, reason and decision history", cmd_describe)
    p.add_argument("kind", help="workload")
    p.add_argument("name", help="NAMESPACE/NAME or NAME (a Workload, or the Job that owns one)")
    _namespace(p)

    p = cmd("dashboard", "serve the web dashboard: ClusterQueues, usage against quota, pending positions, decisions",
            cmd_dashboard)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 in a container)")
    p.add_argument("--port", type=int, default=8090, help="port to listen on (0: any free one)")
    p.add_argument("--config", help="a kq config file naming the bus (default $KQ_CONFIG when no --nats/--dir)")

    p = cmd("conversion-webhook", "serve the Kueue CRDs' v1beta1 <-> v1beta2 conversion (the API server calls it)",
            cmd_conversion_webhook)
    p.add_argument("--host", default="0.0.0.0", help="address to listen on")
    p.add_argument("--port", type=int, default=9443, help="port to listen on (0: any free one)")
    p.add_argument("--tls-cert-file", help="the serving certificate (PEM); without it, plain HTTP (tests only)")
    p.add_argument("--tls-key-file", help="its key (PEM)")

    p = cmd("completion", "print a shell completion script: source <(kq completion bash)", cmd_completion)
    p.add_argument("shell", choices=["bash", "zsh", "tcsh"])

    p = cmd("scenario", "run scenario files (kq scenario run FILE [--json])", None)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p = cmd("bench", "benchmarks", None)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p = cmd("chaos", "run the stack under injected faults and check kq's invariants", None)
    p.add_argument("args", nargs=argparse.REMAINDER)
    return parser


async def cmd_completion(args: argparse.Namespace, io: Streams) -> int:
    import shtab  # generates the script from this very parser, so it never falls behind the commands

    io.out.write(shtab.complete(build_parser(), shell=args.shell))
    return 0


async def cmd_create(args: argparse.Namespace, io: Streams) -> int:
    from kq.cli.apply import UsageError
    from kq.cli.objects import cmd_write
    from kq.cli.queues import cmd_create_queue

    if args.filename:
        if args.kind:
            raise UsageError("give either -f FILE or KIND NAME [flags], not both")
        return await cmd_write(args, io)
    if not args.kind:
        raise UsageError("must specify -f FILE, or clusterqueue|localqueue|resourceflavor NAME")
    return await cmd_create_queue(args, io)


def _delegate(module: str, argv: list[str], err: IO[str]) -> int:
    """Subcommands that live in their own package: kq.<x>.cli.main(argv) -> exit code."""
    pause_for_imports()  # kq scenario run: ~0.1 s of the runner's CPU (kq.gc_tuning)
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is not None and module.startswith(e.name):
            print(f"error: {module.split('.')[1]} is not implemented yet ({module} is missing)", file=err)
            return EXIT_NOT_IMPLEMENTED
        raise
    finally:
        resume_after_imports()
    return int(mod.main(argv) or 0)


async def _run(args: argparse.Namespace, io: Streams) -> int:
    from kq.api import InputError
    from kq.cli.apply import UsageError
    from kq.cli.busread import BusReadError
    from kq.cli.target import TargetError
    from kq.kube import KubeError
    from kq.stack import StackError, StateError

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
    if argv and argv[0] in ("scenario", "bench", "chaos"):
        # Their own parsers see every option, so `kq bench --help` and options before FILE work.
        return _delegate(f"kq.{argv[0]}.cli", argv[1:], err or sys.stderr)
    from kq.cli.objects import Streams
    from kq.obs import configure_logging

    io = Streams(out or sys.stdout, err or sys.stderr, stdin or sys.stdin)
    args = build_parser().parse_args(argv)
    if args.command in ("scenario", "bench", "chaos"):
        return _delegate(f"kq.{args.command}.cli", list(args.args), io.err)
    configure_logging("kq", "0", "error")  # library warnings stay out of kubectl-like output
    try:
        return asyncio.run(_run(args, io))
    except KeyboardInterrupt:
        print("interrupted", file=io.err)
        return 130


if __name__ == "__main__":
    sys.exit(main())
