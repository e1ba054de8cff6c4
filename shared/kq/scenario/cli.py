"""`kq scenario run FILE [--json]`: exit 0 when every check holds, 1 when one does not,
2 when the file is invalid or needs a feature kq does not support yet."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `scenario` under a `kq` parser's subcommands (args.func is `run`)."""
    parser = subparsers.add_parser("scenario", help="run scenario files (shared/scenarios/FORMAT.md)")
    _fill(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`kq scenario ...` as delegated by kq.cli.main: argv is what follows `scenario`."""
    parser = argparse.ArgumentParser(prog="kq scenario", description="run scenario files (shared/scenarios/FORMAT.md)")
    _fill(parser)
    return run(parser.parse_args(argv))


def _fill(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="scenario_command", required=True)
    run_p = sub.add_parser("run", help="run one scenario through the real stack and check it")
    run_p.add_argument("file", type=Path, help="the scenario YAML file")
    run_p.add_argument("--json", action="store_true", help="print one JSON document (FORMAT.md Output) to stdout")
    run_p.add_argument(
        "--settle-timeout", type=float, default=60.0, metavar="SECONDS",
        help="longest wait for `at: settled` (default 60)",
    )
    run_p.add_argument(
        "--workdir", type=Path, default=None, metavar="DIR",
        help="keep the stack's files (logs, bus store, kubeconfigs) in DIR instead of a temporary directory",
    )
    validate_p = sub.add_parser("validate", help="load and validate scenario files without running them")
    validate_p.add_argument("files", type=Path, nargs="+")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here so `kq --help` does not pay for the whole harness.
    from kq.scenario.load import ScenarioError, load_file
    from kq.scenario.report import Reporter

    if args.scenario_command == "validate":
        bad = 0
        for f in args.files:
            try:
                load_file(f)
            except ScenarioError as e:
                bad += 1
                print(e, file=sys.stderr)
            else:
                print(f"{f}: ok")
        return EXIT_INVALID if bad else EXIT_OK

    reporter = Reporter(json_mode=args.json)
    try:
        scenario = load_file(args.file)
    except ScenarioError as e:
        print(e, file=sys.stderr)
        if args.json:
            from kq.scenario.report import invalid_json

            print(invalid_json(str(args.file), e.problems))
        return EXIT_INVALID

    from kq.scenario.run import run_scenario

    result = asyncio.run(run_scenario(scenario, reporter, workdir=args.workdir, settle_timeout_s=args.settle_timeout))
    reporter.finish(result)
    return EXIT_OK if result.ok else EXIT_FAILED
