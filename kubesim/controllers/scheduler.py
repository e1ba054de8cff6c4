"""The scheduler: binds pending pods to nodes.

A pod is considered when it is Pending, unbound, has no scheduling gates and is not
being deleted. A node fits when it is schedulable (not spec.unschedulable, Ready not
False), matches the pod's nodeSelector and required node affinity, has no NoSchedule/
NoExecute taint the pod does not tolerate, and has the pod's requests free in its
allocatable (cpu, memory, pods and any extended resource; requests of non-terminal pods
already bound count). Among fitting nodes the least allocated wins (then the name).
A cluster without Node objects binds everything to the unlimited "kubesim-virtual" pool.
Pods that fit nowhere get PodScheduled=False/Unschedulable with the reasons, and are
retried when a node changes or a bound pod ends or goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kq.quantity import QuantityError, to_milli
from kubesim.controllers.conditions import set_condition
from kubesim.controllers.ownership import is_terminal
from kubesim.controllers.workqueue import WorkQueue
from kubesim.resources import NODES, PODS, ResourceType
from kubesim.store import now_rfc3339
from kubesim.watch import DELETED

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

VIRTUAL_NODE = "kubesim-virtual"
PodKey = tuple[str, str]


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """Effective requests in milli-units: sum over containers, max with each init container, plus overhead."""
    spec = pod.get("spec", {})
    total: dict[str, int] = {}
    for c in spec.get("containers") or ():
        for r, q in _container_requests(c).items():
            total[r] = total.get(r, 0) + q
    for c in spec.get("initContainers") or ():
        for r, q in _container_requests(c).items():
            total[r] = max(total.get(r, 0), q)
    for r, q in (spec.get("overhead") or {}).items():
        total[r] = total.get(r, 0) + _milli(q)
    total["pods"] = total.get("pods", 0) + 1000
    return total


def _container_requests(c: Mapping[str, Any]) -> dict[str, int]:
    res = c.get("resources") or {}
    merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    return {r: _milli(q) for r, q in merged.items()}


def _milli(q: Any) -> int:
    try:
        return to_milli(q)
    except (QuantityError, TypeError, ValueError):
        return 0


def tolerates(tolerations: list[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    for expr in term.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        have = labels.get(key)
        if op == "In" and have not in values:
            return False
        if op == "NotIn" and have in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op in ("Gt", "Lt"):
            try:
                a, b = int(have or ""), int(values[0])
            except (ValueError, IndexError):
                return False
            if (op == "Gt" and not a > b) or (op == "Lt" and not a < b):
                return False
    return True


def _affinity_matches(pod: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    required = (((pod.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    return not terms or any(_term_matches(t, labels) for t in terms)


def schedulable(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec", {})
    return (
        not spec.get("nodeName")
        and not spec.get("schedulingGates")
        and pod.get("status", {}).get("phase", "Pending") == "Pending"
        and not pod["metadata"].get("deletionTimestamp")
    )


class Scheduler:
    def __init__(self, cluster: Cluster) -> None:
        self._c = cluster
        self._store = cluster.store
        self.queue: WorkQueue[PodKey] = WorkQueue("scheduler", self._schedule_batch)
        self._unschedulable: set[PodKey] = set()
        # Usage of real nodes by bound, non-terminal pods: pod uid -> (node, requests).
        self._placed: dict[str, tuple[str, dict[str, int]]] = {}
        self._usage: dict[str, dict[str, int]] = {}
        self._store.subscribe(PODS, self._on_pod)
        self._store.subscribe(NODES, self._on_node)

    # --- bookkeeping from store events ---

    def _on_pod(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        meta = new["metadata"]
        uid, key = meta["uid"], (meta["namespace"], meta["name"])
        node = new.get("spec", {}).get("nodeName")
        occupies = etype != DELETED and bool(node) and not is_terminal(new)
        if occupies and uid not in self._placed:
            req = pod_requests(new)
            self._placed[uid] = (node, req)
            usage = self._usage.setdefault(node, {})
            for r, q in req.items():
                usage[r] = usage.get(r, 0) + q
        elif not occupies and uid in self._placed:
            node_was, req = self._placed.pop(uid)
            usage = self._usage.get(node_was, {})
            for r, q in req.items():
                usage[r] = usage.get(r, 0) - q
            self._retry_all()  # capacity freed
        if etype == DELETED:
            self._unschedulable.discard(key)
        elif schedulable(new):
            self.queue.add(key)
        else:
            self._unschedulable.discard(key)

    def _on_node(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        self._retry_all()

    def _retry_all(self) -> None:
        for key in sorted(self._unschedulable):
            self.queue.add(key)

    # --- scheduling ---

    def _schedule_batch(self, keys: list[PodKey]) -> None:
        pods = []
        for ns, name in keys:
            e = self._store.find(PODS, ns, name)
            if e is not None and schedulable(e.obj):
                pods.append(e)
        # Higher priority first, then older first, as the scheduling queue orders them.
        pods.sort(key=lambda e: (-int(e.obj.get("spec", {}).get("priority") or 0),
                                 e.obj["metadata"].get("creationTimestamp", ""), e.rv))
        nodes: list[Mapping[str, Any]] = [n.obj for n in self._store.list(NODES)]
        for e in pods:
            pod = e.obj
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            if not nodes:
                self._bind(key, VIRTUAL_NODE)
                continue
            node, reasons = self._pick(pod, nodes)
            if node is None:
                self._unschedulable.add(key)
                self._mark_unschedulable(key, len(nodes), reasons)
            else:
                self._unschedulable.discard(key)
                self._bind(key, node)

    def _pick(self, pod: Mapping[str, Any], nodes: list[Mapping[str, Any]]) -> tuple[str | None, dict[str, int]]:
        req = pod_requests(pod)
        spec = pod.get("spec", {})
        selector = spec.get("nodeSelector") or {}
        tolerations = spec.get("tolerations") or []
        reasons: dict[str, int] = {}
        best: tuple[float, str] | None = None
        for node in nodes:
            why = self._why_not(node, req, selector, tolerations, pod)
            name = node["metadata"]["name"]
            if why is not None:
                reasons[why] = reasons.get(why, 0) + 1
                continue
            score = self._free_share(node, req)
            if best is None or (-score, name) < (-best[0], best[1]):
                best = (score, name)
        return (best[1] if best else None), reasons

    def _why_not(self, node: Mapping[str, Any], req: dict[str, int], selector: Mapping[str, str],
                 tolerations: list[Mapping[str, Any]], pod: Mapping[str, Any]) -> str | None:
        nspec, nstatus = node.get("spec") or {}, node.get("status") or {}
        if nspec.get("unschedulable"):
            return "node(s) were unschedulable"
        for c in nstatus.get("conditions") or ():
            if c.get("type") == "Ready" and c.get("status") != "True":
                return "node(s) were not ready"
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in selector.items()) or not _affinity_matches(pod, labels):
            return "node(s) didn't match Pod's node affinity/selector"
        for taint in nspec.get("taints") or ():
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
                return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
        alloc = nstatus.get("allocatable") or nstatus.get("capacity") or {}
        used = self._usage.get(node["metadata"]["name"], {})
        for r, q in sorted(req.items()):
            if q <= 0:
                continue
            if used.get(r, 0) + q > _milli(alloc.get(r, 0)):
                return f"Insufficient {r}"
        return None

    def _free_share(self, node: Mapping[str, Any], req: dict[str, int]) -> float:
        alloc = (node.get("status") or {}).get("allocatable") or {}
        used = self._usage.get(node["metadata"]["name"], {})
        shares = []
        for r in ("cpu", "memory"):
            total = _milli(alloc.get(r, 0))
            if total > 0:
                shares.append((total - used.get(r, 0) - req.get(r, 0)) / total)
        return sum(shares) / len(shares) if shares else 0.0

    def _bind(self, key: PodKey, node: str) -> None:
        def bind(p: dict[str, Any]) -> None:
            p["spec"]["nodeName"] = node

        self._store.modify(PODS, key[0], key[1], bind)

    def _mark_unschedulable(self, key: PodKey, total: int, reasons: dict[str, int]) -> None:
        parts = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
        msg = f"0/{total} nodes are available: {parts}."
        now = now_rfc3339()

        def mark(p: dict[str, Any]) -> None:
            set_condition(p.setdefault("status", {}), "PodScheduled", "False", "Unschedulable", msg, now, probe=False)

        self._store.modify(PODS, key[0], key[1], mark, status_only=True)
