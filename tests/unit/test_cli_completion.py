"""Shell completion (`kq completion bash`, generated from kq's own parser by shtab) and the kubectl plugin
entry (`kubectl-kq`, so `kubectl kq get cq` works)."""

from __future__ import annotations

import io
import shutil
import subprocess
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from kq.cli.main import main


def _complete(script: Path, words: list[str]) -> set[str]:
    line = " ".join(words)
    probe = (f'source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; COMP_LINE="{line}"; '
             f'COMP_POINT={len(line)}; _shtab_kq; printf "%s\\n" "${{COMPREPLY[@]}}"')
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30, check=True)
    return set(done.stdout.split())


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_and_flags(tmp_path: Path) -> None:
    out = io.StringIO()
    assert main(["completion", "bash"], out=out) == 0
    script = tmp_path / "kq.bash"
    script.write_text(out.getvalue())
    assert {"status", "stop"} <= _complete(script, ["kq", "st"])
    assert "--nominal-quota" in _complete(script, ["kq", "create", "--nom"])
    assert "--keep-already-running" in _complete(script, ["kq", "stop", "--keep"])


def test_the_kubectl_plugin_runs_the_same_cli() -> None:
    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    assert scripts.get("kubectl-kq") == scripts.get("kq") == "kq.cli.main:main"
