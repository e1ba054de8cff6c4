"""kq get / describe rendering: kubectl-like tables, ages, workload states (pure, no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from kq.api.core import Job, Pod
from kq.api.kueue import ClusterQueue, LocalQueue, Workload
from kq.cli.busread import HistoryEntry
from kq.cli.describe import describe_workload
from kq.cli.tables import Table, human_duration, render
from kq.cli.views import table_for, workload_reason, workload_state
from kq.messages import WorkloadAdmittedEvent, WorkloadPendingEvent

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def ts(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(type_: str, status: str, reason: str = "R", message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": ts(5)}


def workload(name: str = "wl", ns: str = "default", conditions: list[dict[str, Any]] | None = None,
             active: bool | None = None, admission: dict[str, Any] | None = None) -> Workload:
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": ts(90)},
        "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 3, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "200Mi"}}}]}}}]},
        "status": {"conditions": conditions or []},
    }
    if active is not None:
        raw["spec"]["active"] = active
    if admission is not None:
        raw["status"]["admission"] = admission
    return msgspec.convert(raw, Workload)


def test_render_aligns_columns_three_spaces_apart_without_trailing_blanks() -> None:
    text = render(Table(("NAME", "QUEUE", "AGE"), [("a", "user-queue", "5s"), ("longer-name", "", "2m")]))
    assert text == (
        "NAME          QUEUE        AGE\n"
        "a             user-queue   5s\n"
        "longer-name                2m\n"
    )


def test_render_refuses_a_row_of_the_wrong_width() -> None:
    with pytest.raises(ValueError, match="2 cells"):
        render(Table(("A", "B", "C"), [("x", "y")]))


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        pytest.param(-5, "<invalid>", id="future"),
        pytest.param(-0.5, "0s", id="clock-skew"),
        pytest.param(0, "0s", id="zero"),
        pytest.param(119, "119s", id="under-2m"),
        pytest.param(120, "2m", id="2m"),
        pytest.param(150, "2m30s", id="2m30s"),
        pytest.param(600, "10m", id="10m"),
        pytest.param(3 * 3600 - 1, "179m", id="under-3h"),
        pytest.param(3 * 3600 + 300, "3h5m", id="3h5m"),
        pytest.param(8 * 3600, "8h", id="8h"),
        pytest.param(47 * 3600, "47h", id="47h"),
        pytest.param(51 * 3600, "2d3h", id="2d3h"),
        pytest.param(9 * 86400, "9d", id="9d"),
        pytest.param(800 * 86400, "2y70d", id="2y70d"),
        pytest.param(3000 * 86400, "8y", id="8y"),
    ],
)
def test_human_duration_matches_kubectl(seconds: float, shown: str) -> None:
    assert human_duration(seconds) == shown


ADMISSION = {"clusterQueue": "cluster-queue",
             "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default-flavor", "memory": "default-flavor"}}]}


@pytest.mark.parametrize(
    ("wl", "state", "reason"),
    [
        pytest.param(workload(), "Pending", None, id="new"),
        pytest.param(workload(conditions=[cond("QuotaReserved", "False", "Pending", "insufficient quota")]),
                     "Pending", "Pending", id="pending-with-reason"),
        pytest.param(workload(conditions=[cond("QuotaReserved", "True", "QuotaReserved"),
                                          cond("Admitted", "False", "NoChecks")], admission=ADMISSION),
                     "QuotaReserved", "NoChecks", id="quota-reserved"),
        pytest.param(workload(conditions=[cond("QuotaReserved", "True"), cond("Admitted", "True", "Admitted")],
                              admission=ADMISSION), "Admitted", "Admitted", id="admitted"),
        pytest.param(workload(conditions=[cond("QuotaReserved", "True"), cond("Admitted", "True"),
                                          cond("Evicted", "True", "Preempted")], admission=ADMISSION),
                     "Evicted", "Preempted", id="evicted-quota-not-released"),
        pytest.param(workload(conditions=[cond("Evicted", "True", "Deactivated")], active=False),
                     "Deactivated", "Deactivated", id="deactivated"),
        pytest.param(workload(conditions=[cond("Admitted", "True"), cond("Finished", "True", "Succeeded")],
                              active=False), "Finished", "Succeeded", id="finished-wins"),
    ],
)
def test_workload_state_and_reason(wl: Workload, state: str, reason: str | None) -> None:
    assert workload_state(wl) == state
    got = workload_reason(wl)
    assert (got.reason if got else None) == reason


def test_workloads_table_has_kueue_columns_and_state() -> None:
    wls = [workload("a", conditions=[cond("QuotaReserved", "True"), cond("Admitted", "True")], admission=ADMISSION),
           workload("b", conditions=[cond("QuotaReserved", "False", "Pending")])]
    assert render(table_for("workload", wls, NOW)) == (
        "NAME   QUEUE        RESERVED IN     ADMITTED   FINISHED   STATE      AGE\n"
        "a      user-queue   cluster-queue   True                  Admitted   90s\n"
        "b      user-queue                                         Pending    90s\n"
    )


def test_all_namespaces_adds_a_namespace_column_first() -> None:
    wls = [workload("a", ns="team-a"), workload("b", ns="team-b")]
    table = table_for("workload", wls, NOW, all_namespaces=True)
    assert table.headers[:2] == ("NAMESPACE", "NAME")
    assert [r[:2] for r in table.rows] == [("team-a", "a"), ("team-b", "b")]


def test_queue_tables() -> None:
    cq = msgspec.convert({"metadata": {"name": "cq", "creationTimestamp": ts(30)}, "spec": {"cohortName": "all"},
                          "status": {"pendingWorkloads": 2, "admittedWorkloads": 1}}, ClusterQueue)
    lq = msgspec.convert({"metadata": {"name": "lq", "namespace": "ns", "creationTimestamp": ts(30)},
                          "spec": {"clusterQueue": "cq"}, "status": {"pendingWorkloads": 2}}, LocalQueue)
    assert table_for("clusterqueue", [cq], NOW) == Table(
        ("NAME", "COHORT", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "AGE"), [("cq", "all", "2", "1", "30s")])
    assert table_for("localqueue", [lq], NOW) == Table(
        ("NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "AGE"), [("lq", "cq", "2", "0", "30s")])


@pytest.mark.parametrize(
    ("raw", "row"),
    [
        pytest.param({"spec": {"suspend": True, "completions": 3}}, ("j", "Suspended", "0/3", "", "90s"),
                     id="suspended"),
        pytest.param({"spec": {"completions": 3}, "status": {"succeeded": 1, "startTime": ts(60)}},
                     ("j", "Running", "1/3", "60s", "90s"), id="running"),
        pytest.param({"status": {"succeeded": 1, "startTime": ts(60), "completionTime": ts(20),
                                 "conditions": [{"type": "Complete", "status": "True"}]}},
                     ("j", "Complete", "1/1", "40s", "90s"), id="complete"),
    ],
)
def test_jobs_table(raw: dict[str, Any], row: tuple[str, ...]) -> None:
    job = msgspec.convert({"metadata": {"name": "j", "creationTimestamp": ts(90)}, **raw}, Job)
    assert table_for("job", [job], NOW).rows == [row]


def test_pods_table_shows_gated_and_ready_pods() -> None:
    gated = msgspec.convert({"metadata": {"name": "p1", "creationTimestamp": ts(3)},
                             "spec": {"containers": [{"name": "c"}], "schedulingGates": [{"name": "g"}]},
                             "status": {"phase": "Pending"}}, Pod)
    ready = msgspec.convert({"metadata": {"name": "p2", "creationTimestamp": ts(3)},
                             "spec": {"containers": [{"name": "c"}], "nodeName": "n1"},
                             "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}, Pod)
    assert table_for("pod", [gated, ready], NOW).rows == [
        ("p1", "0/1", "SchedulingGated", "0", "<none>", "3s"),
        ("p2", "1/1", "Running", "0", "n1", "3s"),
    ]


def test_describe_shows_state_reason_conditions_and_decisions() -> None:
    wl = workload("job-sample-abc", conditions=[cond("QuotaReserved", "True", "QuotaReserved"),
                                                cond("Admitted", "True", "Admitted", "admitted by cluster-queue")],
                  admission=ADMISSION)
    history = [
        HistoryEntry(seq=1, decision=WorkloadPendingEvent(
            id="1", cluster="manager", namespace="default", name="job-sample-abc", at=ts(60),
            message="insufficient quota for cpu", reason="Pending")),
        HistoryEntry(seq=2, decision=WorkloadAdmittedEvent(
            id="2", cluster="manager", namespace="default", name="job-sample-abc", at=ts(5), message="",
            cluster_queue="cluster-queue", flavors={"main": {"cpu": "default-flavor"}})),
        HistoryEntry(seq=3, decision=None, error="kq.v1.evt...: bad"),
    ]
    text = describe_workload(wl, "manager", history, NOW)
    fields = dict(ln.split(":", 1) for ln in text.split("Pod sets:", 1)[0].splitlines())
    fields = {k: v.strip() for k, v in fields.items()}
    assert fields["State"] == "Admitted"
    assert fields["Reason"] == "Admitted: admitted by cluster-queue"
    assert fields["Reserved in"] == "cluster-queue (main: cpu=default-flavor, memory=default-flavor)"
    assert "main: 3 x {cpu: 1, memory: 200Mi}" in text
    decisions = text.split("Decisions:\n", 1)[1].splitlines()
    assert decisions[0].split() == ["AGE", "DECISION", "DETAILS"]
    assert decisions[1].split(None, 2) == ["60s", "Pending", "Pending: insufficient quota for cpu"]
    assert decisions[2].split(None, 2) == ["5s", "Admitted", "cluster-queue (main: cpu=default-flavor)"]
    assert "<unreadable>" in decisions[3]


def test_describe_says_when_no_decision_is_recorded() -> None:
    assert describe_workload(workload(), "manager", [], NOW).endswith("Decisions:\n  <none recorded>\n")
