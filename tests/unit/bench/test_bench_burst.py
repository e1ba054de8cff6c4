"""The burst bench's accounting (kq.bench.burst_ledger, kq.bench.burst): a Workload's state from its
conditions, counts kept as events arrive (older copies ignored), the waiting ones admission did not
list, and what counts as lost."""

from __future__ import annotations

import msgspec
import pytest

from kq.bench.burst import BurstResult, job_body
from kq.bench.burst_ledger import WorkloadLedger


def _wl(name: str, rv: int, **conds: str) -> bytes:
    return msgspec.json.encode({"metadata": {"name": name, "namespace": "burst", "resourceVersion": str(rv)},
                                "status": {"conditions": [{"type": t, "status": s} for t, s in conds.items()]}})


@pytest.mark.parametrize(("conds", "state"), [
    pytest.param({}, "new", id="no-decision-yet"),
    pytest.param({"QuotaReserved": "False"}, "pending", id="marked-pending"),
    pytest.param({"QuotaReserved": "True"}, "admitted", id="holding-quota"),
    pytest.param({"QuotaReserved": "True", "Admitted": "True"}, "admitted", id="admitted"),
    pytest.param({"QuotaReserved": "True", "Admitted": "True", "Finished": "True"}, "finished", id="finished"),
])
def test_state_from_conditions(conds: dict[str, str], state: str) -> None:
    ledger = WorkloadLedger()
    ledger.feed("ADDED", _wl("a", 1, **conds))
    assert dict(+ledger.counts) == {state: 1}


def test_counts_follow_events_and_ignore_older_copies() -> None:
    ledger = WorkloadLedger()
    ledger.feed("ADDED", _wl("a", 1))
    ledger.feed("ADDED", _wl("b", 2))
    ledger.feed("MODIFIED", _wl("a", 5, QuotaReserved="True", Admitted="True"))
    ledger.feed("MODIFIED", _wl("a", 3, QuotaReserved="False"))  # a re-list racing the watch
    assert (len(ledger), dict(+ledger.counts), ledger.ever_admitted) == (2, {"new": 1, "admitted": 1}, 1)
    assert ledger.not_in({"burst/c"}) == ["burst/b"]  # only waiting ones count: a is admitted
    ledger.feed("DELETED", _wl("b", 6))
    assert (len(ledger), ledger.not_in(set())) == (1, [])


def test_lost_counts_missing_workloads_unlisted_ones_and_dead_letters() -> None:
    whole = BurstResult(jobs=3, created=3, workloads=3, mirrored=3, listed_pending=1)
    assert whole.lost == 0 and whole.ok
    assert BurstResult(jobs=3, created=3, workloads=2, mirrored=3, listed_pending=1).lost == 1
    assert BurstResult(jobs=3, created=3, workloads=3, mirrored=3, not_listed=["burst/x"], dead_letters=2).lost == 3
    assert not BurstResult(jobs=3, created=3, workloads=3, mirrored=3, timed_out=True, listed_pending=1).ok


def test_jobs_are_a_users_jobs() -> None:
    job = job_body(7, "2s")
    assert job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "burst"} and job["spec"]["suspend"] is True
    assert job["metadata"]["name"] == "burst-000007"
