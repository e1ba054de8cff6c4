"""Report how many hostile cases each kind got (support/hostile.py counts them)."""

from __future__ import annotations

from typing import Any

from support.hostile import CASES, EXAMPLES


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not CASES:
        return
    terminalreporter.section("hostile input: generated cases per kind")
    for where_kind, n in sorted(CASES.items()):
        terminalreporter.write_line(f"  {where_kind:<40} {n}")
    terminalreporter.write_line(f"  (KQ_FUZZ_EXAMPLES={EXAMPLES} per kind and path; set it higher for a long run)")
