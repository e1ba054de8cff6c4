"""The classic target search's shortcuts change no outcome, and spare the work they are for.

- A queue at or over its nominal quota with borrowWithinCohort unset runs only the borrowing
  attempt, where other queues' priority candidates are all invalid: they are not collected.
- A walk that removed a few candidates without a fit checks whether removing every candidate
  still valid could help, and stops when it could not.

Random worlds compare the targets with the exhaustive search (both shortcuts off).
"""

from __future__ import annotations

import random

import pytest
from admission_builders import cohort, cq, milli, wl
from admission_world import World, world

from services.admission.core import preemption
from services.admission.core.preemption import PreemptionContext, classical_targets
from services.admission.core.snapshot import Snapshot
from services.admission.core.workloads import PendingInfo

CPU = ("default", "cpu")


def _search(w: World, queue: str, priority: int, cpu: int, exhaustive: bool) -> list[tuple[str, str]]:
    tree = w.state._p.tree
    q = tree.cqs[queue]
    info = PendingInfo(wl("default/in").queue(queue).priority(priority).at(50.0)
                       .pods("main", 1, min_count=None, cpu=str(cpu)).obj(), priority, 50.0)
    ctx = PreemptionContext(Snapshot(tree.cqs, tree.flavors), info, q, frozenset((CPU,)), {CPU: milli(cpu)})
    before = {n: (dict(c.node.usage), set(c.workloads)) for n, c in tree.cqs.items()}
    targets = classical_targets(ctx, exhaustive=exhaustive)
    assert {n: (dict(c.node.usage), set(c.workloads)) for n, c in tree.cqs.items()} == before  # all restored
    return [(t.info.key, t.reason) for t in targets]


def _reserve(w: World, name: str, queue: str, priority: int, cpu: int, at: float) -> None:
    w.apply(wl(f"default/{name}").queue(queue).priority(priority).at(at)
            .pods("main", 1, min_count=None, cpu=str(cpu)).reserved(queue, "default", at=at).obj())


def _count(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    calls = [0]
    real = getattr(preemption, name)

    def counted(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(preemption, name, counted)
    return calls


def _over_nominal_world() -> World:
    # "own" holds 6 of its 4 cpu (borrowing 2) with low-priority work; "lender" lends nothing
    # now: the cohort's 12 cpu are all used, 6 of them by "other", which borrows 2.
    own = cq("own").cohort("c").flavor("default", cpu="4").preemption(within="LowerPriority", reclaim="Any").obj()
    other = cq("other").cohort("c").flavor("default", cpu="4").obj()
    lender = cq("lender").cohort("c").flavor("default", cpu="4").obj()
    w = world(own, other, lender)
    for i in range(3):
        _reserve(w, f"own-{i}", "own", priority=0, cpu=2, at=i)
        _reserve(w, f"other-{i}", "other", priority=0, cpu=2, at=i)
    return w


def test_over_nominal_without_borrow_within_cohort_takes_only_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    w = _over_nominal_world()
    classified = _count(monkeypatch, "_classify")
    targets = _search(w, "own", priority=5, cpu=2, exhaustive=False)
    # Kueue: the borrowing attempt only; "other" is borrowing but may only be reclaimed by a
    # queue that stays within its nominal quota. The newest of its own workloads goes.
    assert targets == [("default/own-2", "InClusterQueue")]
    assert classified[0] == 3  # its own three; "other"'s never looked at
    assert _search(w, "own", priority=5, cpu=2, exhaustive=True) == targets


def test_over_nominal_head_that_its_own_queue_cannot_make_room_for_gets_no_targets() -> None:
    w = _over_nominal_world()
    # 8 cpu with 6 in use by its own: even with all three gone it would borrow 4 of the 4 the
    # cohort cannot lend ("other" holds 6, "lender" nothing spare but 4): no fit, no targets.
    assert _search(w, "own", priority=5, cpu=10, exhaustive=False) == []
    assert _search(w, "own", priority=5, cpu=10, exhaustive=True) == []
    # Through the cycle: nothing is preempted, the borrower keeps its workloads.
    w.apply(wl("default/big").queue("own").priority(5).at(50).pods("main", 1, min_count=None, cpu="10").obj())
    r = w.step(60.0)
    assert not r.preemptions and not r.admissions


def test_a_walk_that_cannot_end_in_a_fit_stops_after_a_few_removals(monkeypatch: pytest.MonkeyPatch) -> None:
    # 40 low-priority workloads of 1 cpu fill the queue's 40; the head wants 41: no removal can
    # make room (no cohort), so the walk stops once the bound says so instead of removing all 40.
    alone = cq("alone").flavor("default", cpu="40").preemption(within="LowerPriority").obj()
    w = world(alone)
    for i in range(40):
        _reserve(w, f"low-{i:02}", "alone", priority=0, cpu=1, at=i)
    snap_removals = [0]
    real = Snapshot.remove_workload

    def counted(self: Snapshot, info: object) -> None:
        snap_removals[0] += 1
        real(self, info)  # type: ignore[arg-type]

    monkeypatch.setattr(Snapshot, "remove_workload", counted)
    assert _search(w, "alone", priority=5, cpu=41, exhaustive=False) == []
    assert snap_removals[0] == preemption.WALK_BEFORE_BOUND
    snap_removals[0] = 0
    assert _search(w, "alone", priority=5, cpu=41, exhaustive=True) == []
    assert snap_removals[0] == 40
    # A head that fits after a long walk is not cut short by the bound.
    assert len(_search(w, "alone", priority=5, cpu=20, exhaustive=False)) == 20


POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any")


def _random_world(rng: random.Random) -> tuple[World, list[str]]:
    """Two cohorts under a root (sometimes flat), 2-4 queues each, random quotas, policies and
    reserved workloads (some queues well over their nominal quota)."""
    objs: list[object] = []
    hierarchical = rng.random() < 0.5
    if hierarchical:
        objs += [cohort("root").obj(), cohort("left").parent("root").obj(), cohort("right").parent("root").obj()]
    names: list[str] = []
    for side in ("left", "right"):
        for i in range(rng.randint(2, 4)):
            name = f"{side}-{i}"
            nominal = rng.randint(2, 8)
            limit = rng.choice([None, None, rng.randint(0, 6)])
            borrow = rng.choice([None, None, "LowerPriority"])
            queue = cq(name).cohort(side if hierarchical else "flat").flavor("default", cpu=(str(nominal), None if limit is None else str(limit)))
            queue.preemption(within=rng.choice(POLICIES[:3]), reclaim=rng.choice(POLICIES[::3] + POLICIES[1:2]),
                             borrow=borrow, threshold=rng.choice([None, rng.randint(0, 4)]) if borrow else None)
            objs.append(queue.obj())
            names.append(name)
    w = world(*objs)  # type: ignore[arg-type]
    n = 0
    for name in names:
        for _ in range(rng.randint(0, 7)):
            n += 1
            _reserve(w, f"r{n:03}", name, priority=rng.randint(0, 4), cpu=rng.randint(1, 3), at=float(rng.randint(0, 20)))
    return w, names


def test_shortcuts_give_the_exhaustive_targets_on_random_worlds(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(12)
    bounded = _count(monkeypatch, "_fits_without_all")
    found = searches = 0
    for _ in range(150):
        w, names = _random_world(rng)
        for _ in range(6):
            queue, priority, cpu = rng.choice(names), rng.randint(0, 5), rng.randint(1, 12)
            fast = _search(w, queue, priority, cpu, exhaustive=False)
            assert fast == _search(w, queue, priority, cpu, exhaustive=True), (queue, priority, cpu)
            searches += 1
            found += bool(fast)
    # The worlds exercise both outcomes and the bound (else this test could not fail).
    assert 0.1 * searches < found < 0.9 * searches
    assert bounded[0] > 20
