"""The core example scenarios (shared/scenarios/examples/core) through from_api and the core alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from admission_scenarios import run_scenario

EXAMPLES = Path("/work/shared/scenarios/examples/core")
SCENARIOS = sorted(EXAMPLES.glob("*.yaml")) if EXAMPLES.is_dir() else []


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_core_scenario(path: Path) -> None:
    _, failures = run_scenario(path)
    assert failures == []
