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


def _full_cohort_with_preemptors():  # noqa: ANN202 - a test World
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


def test_fit_checks_do_not_redo_every_victim_of_the_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    w = _full_cohort_with_preemptors()
    calls = 0
    real = quota.remove_usage

    def counted(node: quota.QuotaNode, fr: quota.FR, val: int) -> None:
        nonlocal calls
        calls += 1
        real(node, fr, val)

    monkeypatch.setattr(quota, "remove_usage", counted)
    r = w.step(10.0, echo=False)
    victims: dict[str, set[str]] = {}
    for p in r.preemptions:
        victims.setdefault(p.preemptor, set()).add(p.victim)
    queues = [f"q{i}" for i in range(QUEUES)] + ["alone"]
    assert victims == {f"default/{q}-high": {f"default/{q}-low-{j}" for j in range(PER_QUEUE)} for q in queues}
    # Choosing an entry's targets costs a few removals per candidate (~3 * PER_QUEUE); its fit
    # check adds at most one sum per queue of its tree (<= QUEUES). Redoing every victim of the
    # cycle in each fit check costs ~PER_QUEUE * QUEUES**2 / 2 more (2,940 calls here).
    assert calls <= len(queues) * (QUEUES + 4 * PER_QUEUE)
