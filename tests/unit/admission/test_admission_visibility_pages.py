"""The visibility API's pages (services/admission/plan/visibility.py): only the requested page is
built, and every page is exactly that slice of the whole ordered list, positions included."""

from __future__ import annotations

from admission_builders import cq, lq, wl
from admission_world import world

from kq.visibility import PendingWorkloadsRequest
from services.admission.plan.visibility import pending_workloads


def _world():
    w = world(cq("cq").flavor("default", cpu="1").obj())
    w.apply(lq("default/other", "cq"))
    w.apply(wl("default/big").queue("cq").priority(100).pods("main", 1, cpu="1").obj())
    w.step(1.0)  # takes the whole quota: everything after waits
    for i in range(23):
        queue = "other" if i % 3 == 0 else "cq"
        w.apply(wl(f"default/w{i:02}").queue(queue).priority(i % 5).at(2.0 + i).pods("main", 1, cpu="1").obj())
    w.step(30.0)
    return w


def _rows(summary):
    assert summary is not None
    return [(p.metadata.name, p.position_in_cluster_queue, p.position_in_local_queue) for p in summary.items]


def test_every_page_is_the_slice_of_the_whole_list() -> None:
    w = _world()
    for base in (PendingWorkloadsRequest(cluster_queue="cq", limit=1000),
                 PendingWorkloadsRequest(namespace="default", local_queue="other", limit=1000)):
        whole = _rows(pending_workloads(w.state, base))
        assert len(whole) == (23 if base.cluster_queue else 8)
        for offset in (0, 1, 5, 7, 22, 23, 40):
            for limit in (0, 1, 3, 10, 1000):
                page = PendingWorkloadsRequest(cluster_queue=base.cluster_queue, namespace=base.namespace,
                                               local_queue=base.local_queue, offset=offset, limit=limit)
                assert _rows(pending_workloads(w.state, page)) == whole[offset:offset + limit], (base, offset, limit)
