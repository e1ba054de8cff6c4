"""The timeline order, the settled rule, and the output formats."""

from __future__ import annotations

import io
import json

import pytest
import yaml
from scenario_docs import base

from kq.scenario.load import load_text
from kq.scenario.model import Step, format_ms
from kq.scenario.observed import Observed, ObservedWorkload
from kq.scenario.report import CheckResult, Reporter, RunResult, check_lines, invalid_json, summary_line, to_json
from kq.scenario.timeline import (
    Activity,
    ClusterActivity,
    busy_reasons,
    kubesim_state_decoder,
    settled_checks,
    timed_entries,
)


def test_timeline_orders_by_at_checks_first_then_steps_as_written() -> None:
    doc = base()
    doc["steps"] = [
        {"at": "0s", "finish": "demo/a"},
        {"at": "1s", "finish": "demo/b"},
        {"at": "1s", "fail": "demo/c"},
        {"at": "3s", "finish": "demo/d"},
    ]
    doc["checks"] = [
        {"at": "settled", "workloads": {"demo/a": {"state": "finished"}}},
        {"at": "3s", "workloads": {"demo/a": {"state": "finished"}}},
        {"at": "1s", "workloads": {"demo/a": {"state": "finished"}}},
        {"at": "1500ms", "workloads": {"demo/a": {"state": "finished"}}},
    ]
    sc = load_text(yaml.safe_dump(doc), "t.yaml", stem="t")
    order = [
        (e.at_ms, "step" if isinstance(e.item, Step) else "check", e.item.index) for e in timed_entries(sc)
    ]
    assert order == [
        (0, "step", 0),
        (1000, "check", 2),
        (1000, "step", 1),
        (1000, "step", 2),
        (1500, "check", 3),
        (3000, "check", 1),
        (3000, "step", 3),
    ]
    assert [c.index for c in settled_checks(sc)] == [0]


def quiet(ms: int = 5000, timers: int = 0) -> ClusterActivity:
    return ClusterActivity(resource_version="10", ms_since_last_change=ms, pending_timers=timers)


BUSY = [
    ("idle", Activity({"manager": quiet(), "worker-1": quiet(1000)}, {"KQ_OBJECTS/admission": 0}, ()), []),
    ("recent-change", Activity({"manager": quiet(999)}, {}, ()), ["cluster manager changed 999ms ago"]),
    ("pending-timer", Activity({"manager": quiet(timers=2)}, {}, ()), ["cluster manager has 2 pending timer(s)"]),
    ("bus-backlog", Activity({"manager": quiet()}, {"KQ_CMD/watcher": 3}, ()),
     ["bus consumer KQ_CMD/watcher has 3 unprocessed message(s)"]),
    ("service-timer", Activity({"manager": quiet()}, {}, ("demo/w1 waits to be requeued",)), ["demo/w1 waits to be requeued"]),
]


@pytest.mark.parametrize("activity,reasons", [(a, r) for _, a, r in BUSY], ids=[i for i, _, _ in BUSY])
def test_busy_reasons(activity: Activity, reasons: list[str]) -> None:
    assert busy_reasons(activity) == reasons


def test_kubesim_state_decodes() -> None:
    state = kubesim_state_decoder.decode(
        b'{"clusters": {"manager": {"resourceVersion": "12", "msSinceLastChange": 40, "pendingTimers": 1}}}'
    )
    assert state.clusters["manager"] == ClusterActivity(resource_version="12", ms_since_last_change=40, pending_timers=1)


@pytest.mark.parametrize("ms,text", [(0, "0s"), (500, "500ms"), (3000, "3s"), (1500, "1500ms"), (60000, "1m"), (90000, "90s")])
def test_format_ms(ms: int, text: str) -> None:
    assert format_ms(ms) == text


OBS_W1 = ObservedWorkload(
    workload="w1", state="admitted", succeeded=None, cluster_queue="cq", flavors={"main": {"cpu": "default"}},
    topology=None, cluster=None, nominated_clusters=None, preempted=False, preemption_reason=None, evictions=0,
    count={"main": 1}, message="admitted", requeue_count=0,
)
OK_CHECK = CheckResult(
    at="3s", ok=True, observed=Observed(workloads={"demo/w1": OBS_W1}, cluster_queues={}, remote={}), failures=[],
    observed_at_ms=3004,
)
FAILED_CHECK = CheckResult(
    at="settled", ok=False, observed=Observed(workloads={"demo/w2": None}, cluster_queues={}, remote={}),
    failures=["demo/w2: state admitted, want pending", "demo/w2: evictions 1, want 0"], observed_at_ms=5210,
)


def test_json_output_shape() -> None:
    doc = json.loads(to_json(RunResult(scenario="demo", ok=False, checks=[OK_CHECK, FAILED_CHECK])))
    assert doc == {
        "scenario": "demo",
        "ok": False,
        "checks": [
            {"at": "3s", "ok": True, "observedAtMs": 3004, "failures": [],
             "observed": {"workloads": {"demo/w1": {
                 "workload": "w1", "state": "admitted", "succeeded": None, "clusterQueue": "cq",
                 "flavors": {"main": {"cpu": "default"}}, "topology": None, "cluster": None,
                 "nominatedClusters": None, "preempted": False, "preemptionReason": None, "evictions": 0,
                 "count": {"main": 1}, "message": "admitted", "requeueCount": 0}},
                 "clusterQueues": {}, "remote": {}}},
            {"at": "settled", "ok": False, "observedAtMs": 5210,
             "failures": ["demo/w2: state admitted, want pending", "demo/w2: evictions 1, want 0"],
             "observed": {"workloads": {"demo/w2": None}, "clusterQueues": {}, "remote": {}}},
        ],
    }


def test_json_output_names_errors_only_when_there_are_some() -> None:
    doc = json.loads(to_json(RunResult(scenario="demo", ok=False, checks=[], errors=["step 1 at 2s: 404"])))
    assert doc["errors"] == ["step 1 at 2s: 404"]
    assert json.loads(invalid_json("x.yaml", ["name: required field missing"])) == {
        "scenario": "x.yaml", "ok": False, "checks": [], "errors": ["name: required field missing"]}


def test_human_lines() -> None:
    assert check_lines(OK_CHECK) == ["ok   at 3s (observed at 3004ms)"]
    assert check_lines(FAILED_CHECK) == [
        "FAIL at settled: demo/w2: state admitted, want pending",
        "FAIL at settled: demo/w2: evictions 1, want 0",
    ]
    assert summary_line(RunResult(scenario="demo", ok=True, checks=[OK_CHECK])) == "demo: ok (1 check(s))"
    assert summary_line(RunResult(scenario="demo", ok=False, checks=[OK_CHECK, FAILED_CHECK])) == (
        "demo: FAIL (1 of 2 check(s) failed)"
    )


def test_json_mode_prints_exactly_one_document_on_stdout() -> None:
    out, err = io.StringIO(), io.StringIO()
    reporter = Reporter(json_mode=True, out=out, err=err)
    reporter.progress("applying 6 objects")
    reporter.check(OK_CHECK)
    reporter.finish(RunResult(scenario="demo", ok=True, checks=[OK_CHECK]))
    assert json.loads(out.getvalue())["ok"] is True
    assert "applying 6 objects" in err.getvalue() and "ok   at 3s" in err.getvalue()


def test_human_mode_prints_progress_and_checks_on_stdout() -> None:
    out, err = io.StringIO(), io.StringIO()
    reporter = Reporter(json_mode=False, out=out, err=err)
    reporter.progress("step 2/4 at 1s: apply Workload demo/w2")
    reporter.check(FAILED_CHECK)
    reporter.finish(RunResult(scenario="demo", ok=False, checks=[FAILED_CHECK]))
    assert out.getvalue().splitlines() == [
        "step 2/4 at 1s: apply Workload demo/w2",
        "FAIL at settled: demo/w2: state admitted, want pending",
        "FAIL at settled: demo/w2: evictions 1, want 0",
        "demo: FAIL (1 of 1 check(s) failed)",
    ]
    assert err.getvalue() == ""
