"""A cycle with many preemptions: each fit check costs the victims of its own tree summed per
queue, not every victim the cycle chose so far (large-scale bench: a cycle of 1,000 heads with
thousands of victims ran for minutes and admission stalled)."""

from __future__ import annotations

import pytest
from admission_builders import cq, wl
from admission_world import world

from services.admission.core import quota

QUEUES = 20
PER_QUEUE = 10  # low-priority workloads of 1 cpu filling each queue's 10 cpu


def _full_cohort_with_preemptors():
    queues = [cq(f"q{i}").cohort("c").flavor("default", cpu="10").preemption(within="LowerPriority").obj()
              for i in range(QUEUES)]
    standalone = cq("alone").flavor("default", cpu="10").preemption(within="LowerPriority").obj()
    w = world(*queues, standalone)
    for q in [f"q{i}" for i in range(QUEUES)] + ["alone"]:
        for j in range(PER_QUEUE):
            w.apply(wl(f"default/{q}-low-{j}").queue(q).priority(0).at(0)
                    .pods("main", 1, min_count=None, cpu="1").reserved(q, "default", at=0).obj())
        w.apply(wl(f"default/{q}-high").queue(q).priority(10).at(5).pods("main", 1, min_count=None, cpu="10").obj())
    return w


def _count_removals(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = quota.remove_usage

    def counted(node: quota.QuotaNode, fr: quota.FR, val: int) -> None:
        calls[0] += 1
        real(node, fr, val)

    monkeypatch.setattr(quota, "remove_usage", counted)
    return calls


def test_fit_checks_do_not_redo_every_victim_of_the_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    w = _full_cohort_with_preemptors()
    calls = _count_removals(monkeypatch)
    r = w.step(10.0, echo=False)
    victims: dict[str, set[str]] = {}
    for p in r.preemptions:
        victims.setdefault(p.preemptor, set()).add(p.victim)
    queues = [f"q{i}" for i in range(QUEUES)] + ["alone"]
    assert victims == {f"default/{q}-high": {f"default/{q}-low-{j}" for j in range(PER_QUEUE)} for q in queues}
    # Choosing an entry's targets costs a few removals per candidate (~3 * PER_QUEUE); its fit
    # check adds at most one sum per queue of its tree (<= QUEUES). Redoing every victim of the
    # cycle in each fit check costs ~PER_QUEUE * QUEUES**2 / 2 more (2,940 calls here).
    assert calls[0] <= len(queues) * (QUEUES + 4 * PER_QUEUE)


RECLAIMERS = 40


def test_overlapping_targets_are_recomputed_without_removing_each_victim_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # A borrower holds the whole cohort's quota; every reclaimer's nomination picks the same
    # victims, so each entry after the first overlaps and is recomputed with the cycle's victims gone.
    borrower = cq("borrower").cohort("c").flavor("default", cpu="0").preemption(within="LowerPriority").obj()
    reclaimers = [cq(f"r{i}").cohort("c").flavor("default", cpu="1").preemption(reclaim="Any").obj()
                  for i in range(RECLAIMERS)]
    w = world(borrower, *reclaimers)
    for j in range(RECLAIMERS):
        w.apply(wl(f"default/low-{j:02}").queue("borrower").priority(0).at(j)
                .pods("main", 1, min_count=None, cpu="1").reserved("borrower", "default", at=j).obj())
    for i in range(RECLAIMERS):
        w.apply(wl(f"default/r{i}-head").queue(f"r{i}").priority(0).at(100).pods("main", 1, min_count=None, cpu="1").obj())
    calls = _count_removals(monkeypatch)
    r = w.step(200.0, echo=False)
    assert r.preemptions
    assert len({p.victim for p in r.preemptions}) == len(r.preemptions)  # no victim preempted twice
    # A few removals per entry (the one borrower's victims summed); removing the victims one by one
    # in every recomputation costs ~victims per entry (1,018 calls here).
    assert calls[0] <= 10 * RECLAIMERS
