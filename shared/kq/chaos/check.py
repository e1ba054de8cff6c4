"""The invariant checker: replays kubesim's object history (`kubesim --journal`) change by change
and kq's decision log, and reports every instant at which a promise was broken.

- quota: after every change, in every cluster, no ClusterQueue or cohort-tree node over its
  limits or under its guarantees (kq.chaos.quota), counted twice: from what the Workloads
  reserve, and from the pods that actually run (bound, not terminated, not being deleted),
  charged to the ClusterQueue and flavors of their workload's last admission;
- no job has running pods in two clusters at once;
- no job has two Workloads at once;
- at the end every Workload of the manager is finished, admitted, deactivated or pending with
  a reason (a QuotaReserved=False condition or a Pending decision saying why), and every queued
  Job of the manager has its Workload or has completed: none lost, none stuck without a reason.

It reads only the API's history and the bus: nothing of the services' code.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from kq.chaos.quota import FR, Tree, violations
from kq.quantity import QuantityError, to_milli

WORKLOADS, PODS, JOBS = "workloads.kueue.x-k8s.io", "pods", "jobs.batch"
CQS, COHORTS = "clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


class Record(msgspec.Struct, frozen=True):
    c: str
    rv: int
    t: float
    e: str
    r: str
    o: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Violation:
    t: float
    cluster: str
    what: str


@dataclass
class Report:
    records: int = 0
    workloads: int = 0  # distinct Workloads of the manager
    jobs: int = 0  # distinct queued Jobs of the manager
    ends: Counter[str] = field(default_factory=Counter)  # finished / admitted / deactivated / pending
    violations: list[Violation] = field(default_factory=list)
    progress: list[float] = field(default_factory=list)  # times a manager Workload got quota
    finished_uids: set[str] = field(default_factory=set)  # manager Workloads seen Finished
    unfinished: list[str] = field(default_factory=list)  # how the first unfinished ones ended (for the summary)
    first_t: float = 0.0
    last_t: float = 0.0

    def by_kind(self) -> Counter[str]:
        return Counter(v.what.split(":", 1)[0] for v in self.violations)


def _cond(obj: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    for c in obj.get("status", {}).get("conditions") or ():
        if c.get("type") == ctype:
            return c
    return None


def _true(obj: Mapping[str, Any], ctype: str) -> bool:
    c = _cond(obj, ctype)
    return c is not None and c.get("status") == "True"


def _milli(v: Any) -> int:
    try:
        return to_milli(v)
    except (QuantityError, TypeError, ValueError):
        return 0


def _owner(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or ():
        if ref.get("kind") == kind:
            return ref
    return None


def reserved(wl: Mapping[str, Any]) -> tuple[str, dict[FR, int]] | None:
    """(ClusterQueue, usage) while the Workload holds quota."""
    adm = wl.get("status", {}).get("admission")
    if not adm or not _true(wl, "QuotaReserved") or _true(wl, "Finished"):
        return None
    use: dict[FR, int] = defaultdict(int)
    for psa in adm.get("podSetAssignments") or ():
        flavors = psa.get("flavors") or {}
        for res, q in (psa.get("resourceUsage") or {}).items():
            if res in flavors:
                use[(flavors[res], res)] += _milli(q)
    return adm.get("clusterQueue", ""), dict(use)


def _pod_running(pod: Mapping[str, Any]) -> bool:
    return (bool(pod.get("spec", {}).get("nodeName")) and not pod["metadata"].get("deletionTimestamp")
            and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"))


def _pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for c in pod.get("spec", {}).get("containers") or ():
        for res, q in ((c.get("resources") or {}).get("requests") or {}).items():
            out[res] += _milli(q)
    return out


class _Cluster:
    def __init__(self, name: str) -> None:
        self.name = name
        self.tree = Tree()
        self.usage: dict[str, defaultdict[str, defaultdict[FR, int]]] = {
            m: defaultdict(lambda: defaultdict(int)) for m in ("reserved", "running")}
        self.holding: dict[str, tuple[str, dict[FR, int]]] = {}  # workload uid -> what it reserves
        self.last_admission: dict[str, tuple[str, dict[str, str]]] = {}  # job uid -> (cq, resource -> flavor)
        self.wl_of_job: dict[str, set[str]] = defaultdict(set)  # job uid -> live workload uids
        self.pod_charge: dict[str, tuple[str, dict[FR, int]]] = {}  # pod uid -> charge
        self.workloads: dict[str, dict[str, Any]] = {}  # uid -> last object (live)
        self.jobs: dict[str, dict[str, Any]] = {}


class Checker:
    def __init__(self, manager: str = "manager") -> None:
        self.manager = manager
        self.clusters: dict[str, _Cluster] = {}
        self.report = Report()
        self._running_in: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)  # (ns, job) -> cluster -> pods
        self._seen_wl: set[str] = set()
        self._seen_jobs: set[str] = set()
        self._counted: set[str] = set()  # pods counted as running (for the two-clusters rule)

    @property
    def finished(self) -> set[str]:
        return self.report.finished_uids

    def _cluster(self, name: str) -> _Cluster:
        c = self.clusters.get(name)
        if c is None:
            c = self.clusters[name] = _Cluster(name)
        return c

    def _violate(self, rec: Record, what: str) -> None:
        if len(self.report.violations) < 10_000:
            self.report.violations.append(Violation(rec.t, rec.c, what))

    def feed(self, rec: Record) -> None:
        rep = self.report
        rep.records += 1
        rep.first_t = rep.first_t or rec.t
        rep.last_t = rec.t
        cl = self._cluster(rec.c)
        gone = rec.e == "DELETED"
        meta = rec.o.get("metadata", {})
        if rec.r == CQS:
            cl.tree.set_cq(meta["name"], None if gone else rec.o.get("spec", {}))
        elif rec.r == COHORTS:
            cl.tree.set_cohort(meta["name"], None if gone else rec.o.get("spec", {}))
        elif rec.r == WORKLOADS:
            self._workload(rec, cl, gone)
        elif rec.r == PODS:
            self._pod(rec, cl, gone)
        elif rec.r == JOBS:
            uid = meta.get("uid", "")
            if gone:
                cl.jobs.pop(uid, None)
            else:
                cl.jobs[uid] = rec.o
                if rec.c == self.manager and QUEUE_LABEL in (meta.get("labels") or {}) and uid not in self._seen_jobs:
                    self._seen_jobs.add(uid)
                    rep.jobs += 1

    def _workload(self, rec: Record, cl: _Cluster, gone: bool) -> None:
        wl = rec.o
        uid = wl["metadata"]["uid"]
        job = _owner(wl, "Job")
        if rec.c == self.manager and uid not in self._seen_wl:
            self._seen_wl.add(uid)
            self.report.workloads += 1
        if gone:
            cl.workloads.pop(uid, None)
        else:
            cl.workloads[uid] = wl
            if rec.c == self.manager and _true(wl, "Finished"):
                self.report.finished_uids.add(uid)
        if job is not None:
            live = cl.wl_of_job[job["uid"]]
            (live.discard if gone else live.add)(uid)
            if len(live) > 1:
                self._violate(rec, f"duplicate workload: job {wl['metadata'].get('namespace')}/{job.get('name')} "
                                   f"has {len(live)} Workloads")
        now = None if gone else reserved(wl)
        before = cl.holding.pop(uid, None)
        touched: set[str] = set()
        use = cl.usage["reserved"]
        if before is not None:
            for fr, q in before[1].items():
                use[before[0]][fr] -= q
            touched.add(before[0])
        if now is not None:
            cl.holding[uid] = now
            for fr, q in now[1].items():
                use[now[0]][fr] += q
            touched.add(now[0])
            adm = wl["status"]["admission"]
            flavors = {r: f for psa in adm.get("podSetAssignments") or ()
                       for r, f in (psa.get("flavors") or {}).items()}
            if job is not None:
                cl.last_admission[job["uid"]] = (now[0], flavors)
            if before is None and rec.c == self.manager:
                self.report.progress.append(rec.t)
        if touched and (before is None or now is None or before != now):
            for v in violations(cl.tree, use, touched):
                self._violate(rec, f"quota (reserved): {v}")

    def _pod(self, rec: Record, cl: _Cluster, gone: bool) -> None:
        pod = rec.o
        meta = pod["metadata"]
        uid = meta["uid"]
        job = _owner(pod, "Job")
        running = not gone and _pod_running(pod)
        before = cl.pod_charge.pop(uid, None)
        use = cl.usage["running"]
        touched: set[str] = set()
        if before is not None:
            for fr, q in before[1].items():
                use[before[0]][fr] -= q
            touched.add(before[0])
        if running and job is not None:
            adm = cl.last_admission.get(job["uid"])
            if adm is not None:
                cq, flavors = adm
                charge = {(flavors[r], r): q for r, q in _pod_requests(pod).items() if r in flavors}
                cl.pod_charge[uid] = (cq, charge)
                for fr, q in charge.items():
                    use[cq][fr] += q
                touched.add(cq)
        if job is not None:
            key = (meta.get("namespace", ""), job.get("name", ""))
            was = uid in self._counted
            counts = self._running_in[key]
            if running and not was:
                counts[rec.c] += 1
                self._counted.add(uid)
            elif not running and was:
                counts[rec.c] -= 1
                self._counted.discard(uid)
            where = sorted(c for c, n in counts.items() if n > 0)
            if len(where) > 1:
                self._violate(rec, f"two clusters: job {key[0]}/{key[1]} runs pods in {', '.join(where)}")
        if touched:
            for v in violations(cl.tree, use, touched):
                self._violate(rec, f"quota (running): {v}")

    def finish(self, pending_reasons: Mapping[tuple[str, str], str] | None = None) -> Report:
        """End states of the manager's Workloads and Jobs. `pending_reasons`: the last Pending
        decision's reason per (namespace, name), from the decision log."""
        rep = self.report
        m = self.clusters.get(self.manager)
        if m is None:
            return rep
        reasons = pending_reasons or {}
        for wl in m.workloads.values():
            meta = wl["metadata"]
            qr = _cond(wl, "QuotaReserved")
            if _true(wl, "Finished"):
                end = "finished"
            elif wl.get("spec", {}).get("active") is False:
                end = "deactivated"
            elif _true(wl, "QuotaReserved"):
                end = "admitted"
            elif (qr is not None and qr.get("message")) or reasons.get((meta.get("namespace", ""), meta["name"])):
                end = "pending"
            else:
                end = "stuck"
                rep.violations.append(Violation(rep.last_t, self.manager,
                                                f"stuck: workload {meta.get('namespace')}/{meta['name']} "
                                                "pending without a reason"))
            rep.ends[end] += 1
            if end != "finished" and len(rep.unfinished) < 20:
                st = wl.get("status", {})
                conds = ", ".join(f"{c.get('type')}={c.get('status')}" for c in st.get("conditions") or ())
                checks = ", ".join(f"{c.get('name')}={c.get('state')}" for c in st.get("admissionChecks") or ())
                rep.unfinished.append(f"{meta.get('namespace')}/{meta['name']} {end}: {conds}"
                                      + (f"; checks {checks}" if checks else ""))
        has_wl = {ref["uid"] for wl in m.workloads.values() if (ref := _owner(wl, "Job")) is not None}
        for uid, job in m.jobs.items():
            labels = job["metadata"].get("labels") or {}
            done = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                       for c in job.get("status", {}).get("conditions") or ())
            if QUEUE_LABEL in labels and uid not in has_wl and not done:
                rep.violations.append(Violation(rep.last_t, self.manager,
                                                f"lost: job {job['metadata'].get('namespace')}/"
                                                f"{job['metadata']['name']} has no Workload and did not complete"))
        return rep


_decoder = msgspec.json.Decoder(Record)
decode_record = _decoder.decode


def read_journal(path: str | Path) -> Iterable[Record]:
    with open(path, "rb") as f:
        for line in f:
            if line.endswith(b"\n"):  # a torn last line (killed mid-write) is skipped
                yield _decoder.decode(line)


def check_journal(path: str | Path, pending_reasons: Mapping[tuple[str, str], str] | None = None,
                  manager: str = "manager") -> Report:
    checker = Checker(manager)
    for rec in read_journal(path):
        checker.feed(rec)
    return checker.finish(pending_reasons)
