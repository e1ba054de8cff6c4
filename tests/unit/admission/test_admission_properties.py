"""Property tests: random cohort trees, quotas, limits and workload streams.

At every point: usage never exceeds what nominal quota, borrowing and lending limits allow at any
node; the incremental usage equals a from-scratch recomputation; no workload holds two
reservations or is admitted twice; every workload the mirror knows is pending, reserving or done.
At the end, once everything admitted finishes, every workload that could ever fit is admitted
(BestEffortFIFO queues; in StrictFIFO a head that never fits blocks the rest, as in Kueue).
"""

from __future__ import annotations

import msgspec
from admission_builders import cohort, cq, fq, wl
from admission_world import World, world
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.admission.core import Cohort, FairSharingConfig, SchedulerConfig
from services.admission.core.quota import FR, QuotaNode, local_quota, potential_available

FLAVORS = ("f1", "f2")
CPU = 1000


@st.composite
def cohort_trees(draw):
    n = draw(st.integers(0, 4))
    cohorts: list[Cohort] = []
    for i in range(n):
        parent = draw(st.sampled_from([None] + [f"co{j}" for j in range(i)]))
        b = cohort(f"co{i}")
        if parent:
            b.parent(parent)
        if draw(st.booleans()):
            b.flavor("f1", cpu=(str(draw(st.integers(0, 4))), *_limits(draw, parent is not None)))
        cohorts.append(b.obj())
    return cohorts


def _limits(draw, allowed: bool) -> tuple:
    if not allowed:
        return (None, None)
    borrow = draw(st.one_of(st.none(), st.integers(0, 4).map(str)))
    lend = draw(st.one_of(st.none(), st.integers(0, 4).map(str)))
    return (borrow, lend)


@st.composite
def cluster_queues(draw, cohorts):
    n = draw(st.integers(1, 5))
    out = []
    names = [c.name for c in cohorts]
    for i in range(n):
        parent = draw(st.sampled_from([None, *names])) if names else None
        b = cq(f"q{i}")
        if parent:
            b.cohort(parent)
        flavors = [
            fq(f, cpu=(str(draw(st.integers(0, 6))), *_limits(draw, parent is not None)))
            for f in FLAVORS[: draw(st.integers(1, 2))]
        ]
        b.group(*flavors)
        if draw(st.booleans()):
            b.strict()
        b.preemption(
            within=draw(st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])),
            reclaim=draw(st.sampled_from(["Never", "LowerPriority", "Any"])),
            borrow=draw(st.sampled_from([None, "LowerPriority"])),
            threshold=draw(st.sampled_from([None, 1])),
        )
        b.fungibility(
            borrow=draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"])),
            preempt=draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"])),
        )
        out.append(b.obj())
    return out


# --- invariants -----------------------------------------------------------------------------


def _subtree_reference(node: QuotaNode) -> tuple[dict[FR, int], dict[FR, int]]:
    """(subtree quota, usage) recomputed from scratch, independently of the incremental code."""
    sq = {fr: q.nominal for fr, q in node.quotas.items()}
    if node.is_cq:
        return sq, {fr: v for fr, v in node.usage.items()}
    usage: dict[FR, int] = {}
    for child in node.child_cohorts + node.child_cqs:
        csq, cus = _subtree_reference(child)
        for fr in set(csq) | set(cus):
            q = child.quotas.get(fr)
            lq = max(0, csq.get(fr, 0) - q.lending_limit) if q is not None and q.lending_limit is not None else 0
            sq[fr] = sq.get(fr, 0) + csq.get(fr, 0) - lq
            usage[fr] = usage.get(fr, 0) + max(0, cus.get(fr, 0) - lq)
    return sq, usage


def check_invariants(w: World) -> None:
    state = w.state
    roots = {id(c.node.root()): c.node.root() for c in state.cqs.values()}
    for root in roots.values():
        stack = [root]
        while stack:
            node = stack.pop()
            stack.extend(node.child_cohorts)
            sq, usage = _subtree_reference(node)
            for fr in set(sq) | set(usage):
                assert node.subtree_quota.get(fr, 0) == sq.get(fr, 0), (node, fr)
                assert node.usage.get(fr, 0) == usage.get(fr, 0), (node, fr)
                used = usage.get(fr, 0)
                q = node.quotas.get(fr)
                if node.parent is None:
                    assert used <= sq.get(fr, 0), f"{node} uses {used} of {fr}, more than its quota {sq.get(fr, 0)}"
                elif q is not None and q.borrowing_limit is not None:
                    assert used <= sq.get(fr, 0) + q.borrowing_limit, f"{node} exceeds its borrowing limit on {fr}"
                if q is not None and q.lending_limit is not None and node.parent is not None:
                    # what the subtree keeps for itself is never lent out
                    assert node.subtree_quota.get(fr, 0) - local_quota(node, fr) <= q.lending_limit
    for cq_rt in state.cqs.values():
        total: dict[FR, int] = {}
        for info in cq_rt.workloads.values():
            for fr, v in info.usage.items():
                total[fr] = total.get(fr, 0) + v
        assert {k: v for k, v in cq_rt.node.usage.items() if v} == {k: v for k, v in total.items() if v}
        for fr, v in cq_rt.node.usage.items():
            assert v <= potential_available(cq_rt.node, fr)
    # the tree follows exactly the queues with active workloads (a cycle looks at no other)
    following = set(state._p.tree._with_active)
    assert following == {n for n, c in state.cqs.items() if c.queue.has_active()}
    # every workload the mirror knows is in exactly one place in the core
    for key, rec in w.records.items():
        places = (key in state.pending) + (key in state.reserved)
        done = rec.finished or not rec.active
        assert places == (0 if done else 1), (key, places, rec)


class Tracker(World):
    """A World that fails on a second admission of a workload already holding quota."""

    def echo(self, r):
        for d in r.admissions:
            rec = self.records[d.workload]
            assert rec.admission is None, f"{d.workload} admitted while already holding quota"
        assert len({d.workload for d in r.admissions}) == len(r.admissions)
        super().echo(r)


OPS = st.sampled_from(["submit", "submit", "submit", "step", "step", "finish", "delete", "release"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), fair=st.booleans())
def test_random_streams_respect_quota(data, fair: bool) -> None:
    cohorts = data.draw(cohort_trees())
    queues = data.draw(cluster_queues(cohorts))
    config = SchedulerConfig(fair_sharing=FairSharingConfig() if fair else None)
    base = world(*cohorts, *queues, config=config, flavors=FLAVORS)
    w = Tracker(config=config)
    w.state, w._rv = base.state, base._rv
    now = 0.0
    serial = 0
    for op in data.draw(st.lists(OPS, min_size=5, max_size=40)):
        now += 0.5
        if op == "submit":
            serial += 1
            q = data.draw(st.sampled_from(queues))
            count = data.draw(st.integers(1, 3))
            min_count = data.draw(st.one_of(st.none(), st.integers(1, count)))
            w.apply(
                wl(f"default/w{serial}")
                .queue(q.name)
                .priority(data.draw(st.integers(0, 3)))
                .at(now)
                .pods("main", count, min_count=min_count, cpu=str(data.draw(st.integers(1, 3))))
                .obj()
            )
        elif op == "step":
            w.step(now)
        elif op == "release":
            w.release()
        else:
            live = sorted(k for k, r in w.records.items() if r.admission is not None and not r.finished)
            if live:
                key = data.draw(st.sampled_from(live))
                w.finish(key) if op == "finish" else w.delete(key)
        check_invariants(w)
    # drain: finish whatever runs until nothing more can be admitted
    settled = False
    for _ in range(60):
        now += 1.0
        w.release()
        # Preemptors can chase each other for good (fair sharing with partial admission, or
        # LowerOrNewerEqualPriority): Kueue's algorithm does the same, so only a quiet system is judged.
        settled = w.settle(now, limit=50, strict=False)
        check_invariants(w)
        running = [k for k, r in w.records.items() if r.admission is not None and not r.finished]
        if not running:
            break
        for key in running:
            w.finish(key)
    if not settled:
        return
    stuck = []
    for key, rec in w.records.items():
        if rec.finished or rec.admission is not None:
            continue
        q = next(x for x in queues if x.name == rec.queue_name)
        if q.queueing_strategy == "StrictFIFO":
            continue  # a head that can never fit blocks a StrictFIFO queue for good, as in Kueue
        node = w.state.cqs[q.name].node
        need = min(ps.min_count or ps.count for ps in rec.pod_sets) * max(rec.pod_sets[0].requests.values())
        if any(potential_available(node, (f, "cpu")) >= need for f in FLAVORS[: len(q.resource_groups[0].flavors)]):
            stuck.append((key, w.messages.get(key)))
    assert stuck == [], "workloads that fit an idle cluster were never admitted"


def test_invariant_checker_catches_over_admission() -> None:
    """The checker itself must fail on a broken tree (a test that cannot fail proves nothing)."""
    w = world(cq("q").flavor("f1", cpu="1").obj(), flavors=FLAVORS)
    w.apply(wl("default/big").queue("q").pods("main", 1, cpu="2").reserved("q", "f1").obj())
    try:
        check_invariants(w)
    except AssertionError:
        return
    raise AssertionError("over-admission went unnoticed")


def test_replay_is_deterministic() -> None:
    """The same calls yield the same results, ids included."""

    def run() -> list:
        w = world(
            cq("a").cohort("co").flavor("default", cpu="2").preemption(within="LowerPriority", reclaim="Any").obj(),
            cq("b").cohort("co").flavor("default", cpu="2").preemption(within="LowerPriority", reclaim="Any").obj(),
        )
        out = []
        for i in range(12):
            w.apply(wl(f"default/w{i}").queue("ab"[i % 2]).priority(i % 3).at(i).pods("main", 1, cpu=str(1 + i % 2)).obj())
            out.append(msgspec.json.encode(w.step(float(i))))
            w.release()
            if i % 4 == 3:
                running = sorted(k for k, r in w.records.items() if r.admission is not None)
                w.finish(running[0])
        return out

    assert run() == run()
