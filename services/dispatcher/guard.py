"""The worker side of the manager's lease (core/guard.py decides): on the worker clusters this kq
serves, copies whose manager lease ran out are deactivated through the worker's watcher, so their
Job stops. Runs inside the dispatcher's term on a manager that also serves its workers (the local
stack), or alone in a kq that serves only worker clusters.
"""

from __future__ import annotations

import asyncio
import time

from kq import subjects
from kq.messages import Command, DeactivateWorkload, command_msg_id, command_subject_of
from kq.mirror import MirrorView, ObjectRecord
from kq.obs import get_logger
from kq.runtime import Bus, Delivery, OutMsg
from services.dispatcher.core.guard import expired_copies
from services.dispatcher.core.model import LEASE_ANNOTATION, Settings

GUARD_WRITER = "dispatcher-guard"
# Only a copy a Job adopted runs anything (core/guard.py), and adoption is an owner reference: the
# copies that lost (most of them) never get one, so they are not decoded nor looked at every period.
_ADOPTED = b'"ownerReferences"'


async def run_guard(bus: Bus, workers: tuple[str, ...], core: Settings, epoch: int) -> None:
    log = get_logger("kq.dispatcher.guard", epoch=epoch)
    view = MirrorView(on_invalid=lambda key, why: log.warning(
        "object skipped: it does not decode", object=f"{key.kind}/{key.namespace}/{key.name}", error=why))

    adopted: dict[subjects.ObjectKey, None] = {}  # worker copies whose record shows an owner reference

    async def follow(d: Delivery) -> None:
        rec = view.apply_delivery(d)
        if isinstance(rec, ObjectRecord):
            if not rec.deleted and _ADOPTED in rec.raw:
                adopted[rec.key] = None
            else:
                adopted.pop(rec.key, None)

    filters = [subjects.object_filter(w, "workload") for w in workers]
    replay = bus.replay(subjects.OBJECTS_STREAM, filters, follow, deliver="last_per_subject")
    period = max(0.05, min(1.0, core.renew_every_s / 2))
    async with asyncio.TaskGroup() as tg:
        tg.create_task(replay.run(), name="guard:mirror")
        while True:
            now = time.time()
            cmds: list[Command] = []
            held = {key: wl for key in adopted if (wl := view.typed(key)) is not None}
            expired = {id(wl) for wl in expired_copies(list(held.values()), now)}
            for key, wl in held.items():
                if id(wl) not in expired:
                    continue
                md = wl.metadata
                lease = md.annotations.get(LEASE_ANNOTATION, "")
                cmds.append(DeactivateWorkload(
                    id=f"mk-guard:{md.uid}:{lease}", cluster=key.cluster, writer=GUARD_WRITER, epoch=epoch,
                    namespace=md.namespace, name=md.name, uid=md.uid, reason="ManagerLeaseExpired",
                    message=f"The MultiKueue manager's lease on this copy ran out at {lease}"))
                log.warning("copy stopped: manager lease expired", worker=key.cluster,
                            workload=f"{md.namespace}/{md.name}", lease=lease)
            if cmds:
                await bus.publish_many([OutMsg(command_subject_of(c), c, command_msg_id(c))
                                        for c in cmds])
            await asyncio.sleep(period)
