"""The generator schema: Kueue's configs load; anything else is refused with the field named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kq.bench.config import BenchConfigError, load_config, parse_config, tas_features

REPO = Path(__file__).resolve().parents[3]
SHARED_BENCH = REPO.parent / "shared" / "bench"

VALID = {
    "cohorts": [{
        "className": "cohort", "count": 1,
        "queuesSets": [{
            "className": "cq", "count": 2, "nominalQuota": 20, "borrowingLimit": 100,
            "reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
            "workloadsSets": [{
                "count": 3, "creationIntervalMs": 100,
                "workloads": [{"className": "small", "runtimeMs": 200, "priority": 50, "request": 1}],
            }],
        }],
    }],
}


def _with(path: str, value: object) -> str:
    """VALID with one field set (path like "cohorts.0.queuesSets.0.foo"), as YAML text."""
    doc = yaml.safe_load(yaml.safe_dump(VALID))
    *parents, last = path.split(".")
    node = doc
    for p in parents:
        node = node[int(p)] if p.isdigit() else node[p]
    if value is _DELETE:
        del node[last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return yaml.safe_dump(doc)


_DELETE = object()
WL = "cohorts.0.queuesSets.0.workloadsSets.0.workloads.0"
QS = "cohorts.0.queuesSets.0"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(_with("extra", 1), "extra: unknown field 'extra'", id="unknown-top-level"),
        pytest.param(_with("cohorts.0.colour", "red"), "cohorts[0].colour: unknown field 'colour'", id="unknown-cohort"),
        pytest.param(_with(f"{QS}.nominalquota", 1), "cohorts[0].queuesSets[0].nominalquota: unknown field",
                     id="unknown-queue-set-typo"),
        pytest.param(_with(f"{WL}.runtime", 5),
                     "cohorts[0].queuesSets[0].workloadsSets[0].workloads[0].runtime: unknown field 'runtime'",
                     id="unknown-workload"),
        pytest.param(_with(f"{WL}.runtimeMs", _DELETE), "missing required field `runtimeMs`", id="missing-runtime"),
        pytest.param(_with("cohorts.0.count", 0), "cohorts[0].count: Expected `int` >= 1", id="zero-count"),
        pytest.param(_with("cohorts.0.count", "two"), "cohorts[0].count: Expected `int`, got `str`", id="count-type"),
        pytest.param(_with(f"{QS}.reclaimWithinCohort", "Sometimes"),
                     "cohorts[0].queuesSets[0].reclaimWithinCohort: Invalid enum value 'Sometimes'", id="bad-policy"),
        pytest.param(_with(f"{WL}.request", "lots"), "workloads[0].request: bad quantity", id="bad-quantity"),
        pytest.param(_with(f"{WL}.request", 0), "workloads[0].request: must be greater than 0", id="zero-request"),
        pytest.param(_with(f"{QS}.nominalQuota", "-1"), "nominalQuota: must be at least 0", id="negative-quota"),
        pytest.param(_with(f"{WL}.className", "Small"), "workloads[0].className: 'Small' must be lower-case",
                     id="class-name-not-dns"),
        pytest.param(_with(f"{QS}.className", "q" * 60), "would be longer than 63 characters", id="name-too-long"),
        pytest.param(_with(f"{WL}.tasConstraint", "required"), "workloads[0].tasLevel: required with tasConstraint",
                     id="tas-constraint-without-level"),
        pytest.param(_with("cohorts", []), "cohorts: Expected `array` of length >= 1", id="no-cohorts"),
        pytest.param("- a\n- b\n", "the top level must be a mapping", id="not-a-mapping"),
        pytest.param("cohorts: [\n", "invalid YAML", id="bad-yaml"),
    ],
)
def test_invalid_config_is_refused_naming_the_field(text: str, expected: str) -> None:
    with pytest.raises(BenchConfigError) as e:
        parse_config(text, "x.yaml")
    assert str(e.value).startswith("x.yaml: ")
    assert expected in str(e.value)


def test_duplicate_cohort_class_names_are_refused() -> None:
    doc = yaml.safe_load(yaml.safe_dump(VALID))
    doc["cohorts"].append(doc["cohorts"][0])
    with pytest.raises(BenchConfigError) as e:
        parse_config(yaml.safe_dump(doc), "x.yaml")
    assert "cohorts[1].className: 'cohort' is already used by cohorts[0]" in str(e.value)


def test_every_problem_is_reported_at_once() -> None:
    doc = yaml.safe_load(_with(f"{WL}.request", "lots"))
    doc["cohorts"][0]["className"] = "Bad_Name"
    with pytest.raises(BenchConfigError) as e:
        parse_config(yaml.safe_dump(doc), "x.yaml")
    assert len(e.value.problems) == 2


def test_valid_config_loads_with_defaults() -> None:
    cfg = parse_config(yaml.safe_dump(VALID))
    qs = cfg.cohorts[0].queues_sets[0]
    assert (qs.count, qs.nominal_quota, qs.borrowing_limit, qs.reclaim_within_cohort) == (2, 20, 100, "Any")
    assert cfg.flavor_name == "rf"
    assert tas_features(cfg) == []


@pytest.mark.parametrize("name", ["baseline", "large-scale", "tas"])
def test_kueue_configs_load(name: str) -> None:
    cfg = load_config(SHARED_BENCH / f"{name}.yaml")
    assert cfg.cohorts


def test_tas_config_is_recognised_as_needing_tas() -> None:
    found = tas_features(load_config(SHARED_BENCH / "tas.yaml"))
    assert found[:2] == ["topology", "resourceFlavor.topologyName"]
    assert any("tasConstraint" in f for f in found)


def test_ci_config_is_small() -> None:
    cfg = load_config(REPO / "bench" / "small.yaml")
    per_queue = sum(ws.count * len(ws.workloads) for ws in cfg.cohorts[0].queues_sets[0].workloads_sets)
    queues = sum(cs.count * qs.count for cs in cfg.cohorts for qs in cs.queues_sets)
    assert 100 <= queues * per_queue <= 500
    assert tas_features(cfg) == []


def test_missing_file_is_an_error() -> None:
    with pytest.raises(BenchConfigError) as e:
        load_config("/nonexistent/bench.yaml")
    assert "cannot read" in str(e.value)
