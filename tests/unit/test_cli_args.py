"""kq's command line: what each invocation parses to, and what is refused before any work."""

from __future__ import annotations

import io
from typing import Any

import pytest

from kq.cli.main import build_parser, main


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        pytest.param(["up"], {"command": "up", "timeout": 60.0, "dir": None}, id="up-defaults"),
        pytest.param(["up", "--dir", "d", "--timeout", "5"], {"dir": "d", "timeout": 5.0}, id="up-dir-after"),
        pytest.param(["--dir", "d", "up"], {"dir": "d", "command": "up"}, id="dir-before-subcommand"),
        pytest.param(["up", "--replicas", "admission=2"], {"replicas": ["admission=2"]}, id="up-replicas"),
        pytest.param(["down", "--grace", "2"], {"command": "down", "grace": 2.0}, id="down-grace"),
        pytest.param(["get", "wl"], {"kind": "wl", "names": [], "namespace": None, "all_namespaces": False,
                                     "output": None, "cluster": None}, id="get-alias"),
        pytest.param(["get", "workloads", "a", "b", "-A", "-o", "yaml"],
                     {"names": ["a", "b"], "all_namespaces": True, "output": "yaml"}, id="get-names-all-yaml"),
        pytest.param(["get", "cq", "--cluster", "worker-1"], {"kind": "cq", "cluster": "worker-1"},
                     id="get-cluster"),
        pytest.param(["--cluster", "worker-2", "get", "lq", "-n", "team"],
                     {"cluster": "worker-2", "namespace": "team"}, id="cluster-before"),
        pytest.param(["apply", "-f", "a.yaml", "-f", "dir/"], {"filename": ["a.yaml", "dir/"]}, id="apply-many"),
        pytest.param(["create", "-f", "-", "-n", "ns"], {"command": "create", "filename": ["-"], "namespace": "ns"},
                     id="create-stdin"),
        pytest.param(["delete", "wl", "a", "b", "-n", "ns"],
                     {"kind": "wl", "names": ["a", "b"], "filename": None, "namespace": "ns"}, id="delete-named"),
        pytest.param(["delete", "-f", "x.yaml"], {"kind": None, "names": [], "filename": ["x.yaml"]},
                     id="delete-file"),
        pytest.param(["describe", "workload", "default/foo"], {"kind": "workload", "name": "default/foo"},
                     id="describe"),
        pytest.param(["--kubeconfig", "k", "--nats", "nats://h:1", "get", "wl"],
                     {"kubeconfig": "k", "nats": "nats://h:1"}, id="explicit-target"),
        pytest.param(["scenario", "run", "f.yaml", "--json"], {"command": "scenario", "args": ["run", "f.yaml", "--json"]},
                     id="scenario-passes-the-rest-on"),
    ],
)
def test_parse(argv: list[str], want: dict[str, Any]) -> None:
    args = vars(build_parser().parse_args(argv))
    assert {k: args.get(k, "<missing>") for k in want} == want


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param([], id="no-command"),
        pytest.param(["apply"], id="apply-without-f"),
        pytest.param(["get"], id="get-without-kind"),
        pytest.param(["get", "wl", "-o", "table"], id="unknown-output"),
        pytest.param(["frobnicate"], id="unknown-command"),
    ],
)
def test_bad_command_lines_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    assert "usage: kq" in capsys.readouterr().err


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err, stdin=io.StringIO(""))
    return code, out.getvalue(), err.getvalue()


def test_unknown_kind_is_an_error_naming_it(tmp_path: Any) -> None:
    code, out, err = run(["get", "frobs", "--nats", "nats://127.0.0.1:1"])
    assert (code, out) == (1, "")
    assert 'doesn\'t have a resource type "frobs"' in err


def test_without_a_stack_the_error_says_how_to_start_one(tmp_path: Any) -> None:
    code, _, err = run(["get", "wl", "--dir", str(tmp_path / "none")])
    assert code == 1
    assert "kq up" in err


def test_bench_and_scenario_parse_their_own_options(tmp_path: Any, capsys: Any) -> None:
    bad = tmp_path / "bench.yaml"
    bad.write_text("cohorts: []\nsurprise: 1\n")
    assert main(["bench", "--virtual-time", str(bad)]) == 2
    assert "surprise" in capsys.readouterr().err
    assert main(["scenario", "run", str(tmp_path / "missing.yaml"), "--json"]) == 2


def test_down_without_a_stack_has_nothing_to_stop(tmp_path: Any) -> None:
    code, _, err = run(["down", "--dir", str(tmp_path)])
    assert code == 0
    assert "nothing to stop" in err


@pytest.mark.parametrize("spec", ["admission", "admission=0", "=2", "admission=two", "no_such_service=2"])
def test_bad_replicas_are_refused_before_anything_starts(tmp_path: Any, spec: str) -> None:
    code, _out, err = run(["up", "--dir", str(tmp_path / "s"), "--replicas", spec])
    assert code == 1
    assert "--replicas" in err
    assert not (tmp_path / "s").exists()
