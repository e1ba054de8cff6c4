"""The dispatcher's memo of manager commands sent (services/dispatcher/term.py, RESEND_AFTER_S):
an intent already sent is not sent again while the manager Workload still looks as it did, even
when the watcher, behind a backlog of commands, takes several seconds to apply it; it is sent
again only once that is long past (a lost or refused command), or at once when the Workload moved."""

from __future__ import annotations

import pytest
from msgspec.structs import replace
from unit.multikueue.mk_builders import cond, local

from kq.api import constants as k
from services.dispatcher import term as term_module
from services.dispatcher.core.model import Finish, SetCheck
from services.dispatcher.term import Term


class _Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    c = _Clock()
    monkeypatch.setattr(term_module.time, "monotonic", c)
    return c


def memo() -> Term:
    t = Term.__new__(Term)  # only the memo: no bus, no workers
    t.sent = {}
    return t


def test_an_intent_waiting_in_the_watchers_backlog_is_not_sent_again(clock: _Clock) -> None:
    t, wl = memo(), local(state="Ready", cluster="w1")
    finish = Finish(reason="Succeeded", message="done")
    ready = SetCheck(state="Ready", message='The workload was admitted on "w1"', cluster_name="w1")
    assert t._not_sent_yet(wl, "mk", (finish, ready), None) == ([finish, ready], None)
    for later in (2.0, 5.0, 9.0):  # reconciles while the watcher has not got to them yet
        clock.now = 1000.0 + later
        # held back, and decided again when the repeat may go (nothing else may bring it back)
        assert t._not_sent_yet(wl, "mk", (finish, ready), None) == ([], term_module.RESEND_AFTER_S - later)
    clock.now = 1000.0 + term_module.RESEND_AFTER_S + 0.5  # lost or refused: sent again
    assert t._not_sent_yet(wl, "mk", (finish, ready), None) == ([finish, ready], None)


def test_an_intent_is_sent_again_at_once_when_the_workload_moved(clock: _Clock) -> None:
    t, wl = memo(), local(state="Ready", cluster="w1")
    finish = Finish(reason="Succeeded", message="done")
    assert t._not_sent_yet(wl, "mk", (finish,), None) == ([finish], None)
    evicted = replace(wl, status=replace(wl.status, conditions=(
        *wl.status.conditions, cond(k.WORKLOAD_EVICTED, reason="Preempted"))))
    clock.now += 1.0
    assert t._not_sent_yet(evicted, "mk", (finish,), None) == ([finish], None)
