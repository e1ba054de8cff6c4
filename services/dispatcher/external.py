"""The bus door for external dispatchers (dispatcherName other than Kueue's two built-ins).

Kueue's door is the API: whoever writes status.nominatedClusterNames nominates. kq adds one on
the bus, so an external dispatcher can be a plain NATS subscriber: each quota-reserved workload
that starts waiting for a nomination is published (MkPendingWorkload) on
kq.v1.mk.pending.<ns>.<name> in KQ_MK, and an MkNomination on kq.v1.mk.nominate.<ns>.<name>
becomes status.nominatedClusterNames (through the watcher, like every manager write). When such a
wait is over (admitted on a worker, or the workload no longer holds quota) an MkSettledWorkload
goes out on kq.v1.mk.settled.<ns>.<name>, so a dispatcher that widens its nomination on a timer
of its own knows when to stop. Nothing about kubeconfigs goes out.

A wait is one quota reservation (QuotaReserved's transition time and the eviction count) with the
workers connected then: the manager workload changing while the nomination travels is the same wait and is
not published again (each publication looked like a new wait to a dispatcher that widens on it).
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from kq import subjects
from kq.api import constants as k
from kq.api.kueue import Workload
from kq.api.meta import find_condition
from kq.messages import MkPendingWorkload, MkPodSet, MkSettledWorkload, mk_nomination_decoder
from kq.mirror import MirrorView
from kq.runtime import Bus, Delivery, PermanentError

DURABLE = "dispatcher-nominations"
# Open waits remembered (uid -> wait); beyond this the oldest are forgotten (a workload deleted
# while it waited and never reconciled again), at worst a settled message not sent.
MAX_WAITS = 100_000


def reservation(wl: Workload) -> str | None:
    """The quota reservation a wait belongs to, None without one: QuotaReserved's transition time
    (whole seconds) and the evictions so far, since evicted and admitted again within the same
    second is a new wait that must be published."""
    st = wl.status
    reserved = find_condition(st.conditions, k.WORKLOAD_QUOTA_RESERVED)
    if reserved is None or reserved.status != "True":
        return None
    for t in (k.WORKLOAD_EVICTED, k.WORKLOAD_FINISHED):
        c = find_condition(st.conditions, t)
        if c is not None and c.status == "True":
            return None
    evictions = sum(e.count for e in st.scheduling_stats.evictions) if st.scheduling_stats else 0
    return f"{reserved.last_transition_time or '-'}/{evictions}"


def pending_message(wl: Workload, check: str, clusters: list[str]) -> MkPendingWorkload:
    pod_sets = []
    for ps in wl.spec.pod_sets:
        requests: dict[str, str] = {}
        for c in ps.template.spec.containers:
            for r, q in c.resources.requests.items():
                requests.setdefault(r, str(q))
        pod_sets.append(MkPodSet(name=ps.name, count=ps.count, requests=requests))
    admission = wl.status.admission
    return MkPendingWorkload(namespace=wl.metadata.namespace, name=wl.metadata.name, uid=wl.metadata.uid,
                             cluster_queue=admission.cluster_queue if admission else "", admission_check=check,
                             clusters=tuple(sorted(clusters)), pod_sets=tuple(pod_sets), priority=wl.spec.priority)


class Nominator(Protocol):
    """What the door needs of the dispatcher's term (services.dispatcher.term.Term)."""

    manager: str
    view: MirrorView

    async def send_nomination(self, wl: Workload, clusters: tuple[str, ...], msg_id: str) -> None: ...


class ExternalDoor:
    def __init__(self, bus: Bus, term: Nominator) -> None:
        self.bus = bus
        self.term = term
        self.waits: dict[str, str] = {}  # workload uid -> the wait published (reservation:clusters)

    async def observe(self, wl: Workload, check: str, awaiting: bool, clusters: list[str]) -> None:
        """After each reconcile: publish a wait that began, or the end of one published."""
        uid, ns, name = wl.metadata.uid, wl.metadata.namespace, wl.metadata.name
        held = reservation(wl)
        if awaiting and held is not None:
            began = f"{held}:{','.join(sorted(clusters))}"
            if self.waits.get(uid) != began:
                # The id survives a restart of this service: the bus drops the repeat.
                await self.bus.publish(subjects.mk_pending_subject(ns, name), pending_message(wl, check, clusters),
                                       msg_id=f"mk-pending:{uid}:{began}")
                self._remember(uid, began)
        elif uid in self.waits and (held is None or wl.status.cluster_name):
            await self._settle(ns, name, uid, wl.status.cluster_name or "")

    async def deleted(self, ns: str, name: str, uid: str) -> None:
        """A manager workload gone while its wait was open: that wait is over too."""
        if uid in self.waits:
            await self._settle(ns, name, uid, "")

    async def _settle(self, ns: str, name: str, uid: str, cluster: str) -> None:
        wait = self.waits[uid]
        settled = MkSettledWorkload(namespace=ns, name=name, uid=uid, cluster=cluster)
        await self.bus.publish(subjects.mk_settled_subject(ns, name), settled, msg_id=f"mk-settled:{uid}:{wait}")
        del self.waits[uid]

    def _remember(self, uid: str, wait: str) -> None:
        self.waits.pop(uid, None)
        self.waits[uid] = wait
        while len(self.waits) > MAX_WAITS:
            del self.waits[next(iter(self.waits))]

    async def run(self) -> None:
        await self.bus.consume(DURABLE, subjects.MK_STREAM, subjects.MK_NOMINATE_ALL, self.handle)

    async def handle(self, d: Delivery) -> None:
        try:
            _, ns, name = subjects.parse_mk_subject(d.subject)
            nom = mk_nomination_decoder.decode(d.data)
        except (ValueError, msgspec.DecodeError, msgspec.ValidationError) as e:
            raise PermanentError(f"{d.subject}: not a nomination: {e}") from None
        wl = self.term.view.typed(subjects.ObjectKey(self.term.manager, "workload", ns, name))
        if wl is None or (nom.uid and nom.uid != wl.metadata.uid):
            return  # nothing (or another incarnation) to nominate for: dropped
        await self.term.send_nomination(wl, tuple(nom.clusters), f"mk-nominate:{d.stream_seq}")
