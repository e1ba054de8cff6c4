"""Least privilege on the bus: the permission table (kq.bus_users) and the watcher's writer check."""

from __future__ import annotations

import pytest

from kq import bus_users, subjects
from kq.api.workload import Admission
from kq.messages import AdmitWorkload, DeleteWorkload, EvictWorkload, Fence, command_subject_of
from services.watcher.core.authority import WRITER_COMMANDS, refuse_writer


def _matches(pattern: str, subject: str) -> bool:
    p, s = pattern.split("."), subject.split(".")
    for i, tok in enumerate(p):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(p) == len(s)


def _may_publish(user: str, subject: str) -> bool:
    return any(_matches(a, subject) for a in bus_users.permissions(user)["publish"]["allow"])


def _admit(writer: str) -> AdmitWorkload:
    return AdmitWorkload(id="a", cluster="manager", namespace="ns", name="w", uid="u", writer=writer,
                         admission=Admission(cluster_queue="cq"))


ADMIT = _admit("admission")


@pytest.mark.parametrize("subject_writer, cmd, why", [
    pytest.param(None, ADMIT, None, id="short-subject-judged-by-fields"),
    pytest.param("admission", ADMIT, None, id="admission-admits"),
    pytest.param("podsready", ADMIT, "writer 'admission' on 'podsready'", id="borrowed-name"),
    pytest.param("podsready", _admit("podsready"), "'podsready' may not send AdmitWorkload", id="podsready-cannot-admit"),
    pytest.param("gc", DeleteWorkload(id="d", cluster="manager", namespace="ns", name="w", uid="u", writer="gc",
                                      reason="AfterFinished"), None, id="gc-deletes"),
    pytest.param("gc", EvictWorkload(id="e", cluster="manager", namespace="ns", name="w", uid="u", writer="gc",
                                     reason="x", message="m"),
                 "'gc' may not send EvictWorkload", id="gc-cannot-evict"),
    pytest.param("tas", Fence(id="f", cluster="manager", writer="tas"), "'tas' sends no commands", id="tas-sends-none"),
])
def test_the_watcher_refuses_a_command_its_writer_may_not_send(subject_writer, cmd, why) -> None:
    got = refuse_writer(subject_writer, cmd)
    assert got == why if why is None else why in (got or ""), got


def test_command_subjects_name_their_writer() -> None:
    s = command_subject_of(ADMIT)
    assert s == "kq.v1.cmd.manager.workload.admission"
    assert subjects.command_writer(s) == "admission"
    assert subjects.command_writer(subjects.command_subject("manager", "workload")) is None
    assert _matches(subjects.command_filter("manager"), s)
    assert _matches(subjects.COMMANDS_ALL, s)


@pytest.mark.parametrize("writer", sorted(WRITER_COMMANDS))
def test_each_writer_may_publish_commands_only_as_itself(writer: str) -> None:
    owner = "dispatcher" if writer == "dispatcher-guard" else writer
    for user in bus_users.PUBLISH:
        allowed = _may_publish(user, subjects.command_subject("worker-1", "workload", writer))
        assert allowed == (user == owner), (user, writer)


@pytest.mark.parametrize("subject, owner", [
    (subjects.object_subject("manager", "workload", "ns", "w"), "watcher"),
    (subjects.sync_subject("manager", "job"), "watcher"),
    (subjects.outcome_subject("admission", "manager"), "watcher"),
    (subjects.event_subject("manager", "topologyhold", "ns", "w"), "tas"),
    (subjects.mk_pending_subject("ns", "w"), "dispatcher"),
    (subjects.mk_settled_subject("ns", "w"), "dispatcher"),
    (subjects.timer_schedule_subject("podsready", "t"), "podsready"),
    ("$KV.KQ_LEASES.admission.default", "admission"),
    ("$JS.API.STREAM.DELETE.KQ_CMD", None),
    ("$JS.API.STREAM.UPDATE.KQ_CMD", None),
])
def test_only_the_owner_may_publish(subject: str, owner: str | None) -> None:
    assert [u for u in bus_users.PUBLISH if _may_publish(u, subject)] == ([owner] if owner else [])
    assert _may_publish(bus_users.ADMIN, subject)


def test_only_tas_may_take_solve_requests() -> None:
    for user in bus_users.PUBLISH:
        denied = bus_users.permissions(user)["subscribe"].get("deny", [])
        assert (subjects.TAS_SOLVE in denied) == (user != "tas"), user
