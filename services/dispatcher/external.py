"""The bus door for external dispatchers (dispatcherName other than Kueue's two built-ins).

Kueue's door is the API: whoever writes status.nominatedClusterNames nominates. kq adds one on
the bus, so an external dispatcher can be a plain NATS subscriber: each quota-reserved workload
waiting for a nomination is published (MkPendingWorkload) on kq.v1.mk.pending.<ns>.<name> in
KQ_MK, and an MkNomination on kq.v1.mk.nominate.<ns>.<name> becomes status.nominatedClusterNames
(through the watcher, like every manager write). Nothing about kubeconfigs goes out.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from kq import subjects
from kq.api.kueue import Workload
from kq.messages import MkPendingWorkload, MkPodSet, mk_nomination_decoder
from kq.mirror import MirrorView
from kq.runtime import Bus, Delivery, PermanentError

DURABLE = "dispatcher-nominations"


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

    async def publish_pending(self, wl: Workload, check: str, clusters: list[str]) -> None:
        msg = pending_message(wl, check, clusters)
        mid = f"mk-pending:{wl.metadata.uid}:{wl.metadata.resource_version}:{','.join(msg.clusters)}"
        await self.bus.publish(subjects.mk_pending_subject(wl.metadata.namespace, wl.metadata.name), msg, msg_id=mid)

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
