"""Hostile input through `kq apply`: every kind, made wrong at random places (support/hostile.py).

Each document is either accepted as a valid object or refused before anything is sent, with
errors that each name a field (kq.api.InputError) or a clear usage error; nothing else escapes
(no TypeError, RecursionError, OverflowError...).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from support.hostile import CASES, EXAMPLES, KINDS, cohort_cycle, hostile

from kq.api import InputError
from kq.cli.apply import Source, UsageError, load_sources

FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])


def _apply(docs: list[dict[str, Any]]) -> list[Any] | InputError | UsageError:
    text = "\n---\n".join(json.dumps(d, ensure_ascii=False) for d in docs)  # JSON is YAML, and fast to write
    try:
        return load_sources([Source("hostile.yaml", text)], namespace=None, verb="apply")
    except (InputError, UsageError) as e:
        return e


@pytest.mark.parametrize("kind", KINDS)
def test_kq_apply_accepts_or_names_the_field(kind: str) -> None:
    @FUZZ
    @given(hostile(kind))
    def check(doc: dict[str, Any]) -> None:
        CASES[f"kq apply {kind}"] += 1
        got = _apply([doc])
        if isinstance(got, InputError):
            assert got.errors, got
            nameless = [e for e in got.errors if not e.path and "mapping" not in e.message and "invalid YAML" not in e.message]
            assert not nameless, f"an error that names no field: {got}"
        elif isinstance(got, UsageError):
            assert "metadata.name" in str(got) or "namespace" in str(got) or "generateName" in str(got), got
        else:
            (obj,) = got
            msgspec.json.encode(obj.body)  # what would be sent is JSON

    check()


def test_a_cohort_cycle_is_accepted_by_apply_and_left_to_the_scheduler() -> None:
    """Kueue's API server takes each Cohort alone; the cycle is the scheduler's to report."""
    got = _apply(cohort_cycle(("a", "b", "c")))
    assert isinstance(got, list) and len(got) == 3
