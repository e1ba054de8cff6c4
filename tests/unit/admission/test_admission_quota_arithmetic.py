"""The quota arithmetic on the hot path (available, add_usage, remove_usage, written without nested
calls) against its definition (resource_node.go: local quota, borrowing limits through each
ancestor), on random trees with nominal, borrowing and lending limits at every level."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.admission.core.quota import (
    FR,
    Quota,
    QuotaNode,
    add_usage,
    available,
    link,
    local_available,
    local_quota,
    rebuild_tree,
    remove_usage,
)

CPU: FR = ("default", "cpu")


def _available(node: QuotaNode, fr: FR) -> int:
    """The definition: what the parent has, capped by the borrowing limit, plus the local quota left."""
    if node.parent is None:
        return node.subtree_quota.get(fr, 0) - node.usage.get(fr, 0)
    parent_available = _available(node.parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        lq = local_quota(node, fr)
        stored_in_parent = node.subtree_quota.get(fr, 0) - lq
        used_in_parent = max(0, node.usage.get(fr, 0) - lq)
        parent_available = min(stored_in_parent - used_in_parent + q.borrowing_limit, parent_available)
    return local_available(node, fr) + parent_available


def _facts(nodes: list[QuotaNode]) -> dict[str, object]:
    """Usage (zeros left out: a rebuild writes them, increments need not) and over-quota children."""
    return {n.name: ({k: v for k, v in n.usage.items() if v}, {k: sorted(c.name for c in v) for k, v in n.over.items() if v})
            for n in nodes}


limits = st.one_of(st.none(), st.integers(0, 12))
quotas = st.one_of(st.none(), st.tuples(st.integers(0, 12), limits, limits))


def _node(name: str, is_cq: bool, quota: tuple[int, int | None, int | None] | None) -> QuotaNode:
    n = QuotaNode(name, is_cq)
    if quota is not None:
        n.quotas = {CPU: Quota(*quota)}
    return n


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    root_quota=quotas,
    mid_quotas=st.lists(quotas, min_size=1, max_size=3),
    cq_quotas=st.lists(quotas, min_size=1, max_size=6),
    ops=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 9)), max_size=25),
)
def test_hot_path_arithmetic_matches_its_definition(root_quota, mid_quotas, cq_quotas, ops) -> None:
    root = _node("root", False, root_quota)
    mids = [_node(f"mid{i}", False, q) for i, q in enumerate(mid_quotas)]
    for m in mids:
        link(m, root)
    cqs = [_node(f"cq{i}", True, q) for i, q in enumerate(cq_quotas)]
    for i, c in enumerate(cqs):
        link(c, mids[i % len(mids)] if i % 3 else root)
    rebuild_tree(root)
    held: list[tuple[QuotaNode, int]] = []
    for which, amount in ops:
        node = cqs[which % len(cqs)]
        if which % 2 == 0 or not held:
            add_usage(node, CPU, amount)
            held.append((node, amount))
        else:
            n, v = held.pop(amount % len(held))
            remove_usage(n, CPU, v)
        # Incremental usage is what a rebuild from the ClusterQueues' usage gives, and available
        # is its definition, at every node.
        got = _facts([root, *mids, *cqs])
        rebuild_tree(root)
        want = _facts([root, *mids, *cqs])
        assert got == want
        for n in [root, *mids, *cqs]:
            assert available(n, CPU) == _available(n, CPU), n.name
