"""The leader answers Kueue's visibility queries (kq.visibility) from its partitions' queues, for as long
as it decides: a standby has no queues to show and does not answer."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import msgspec
from nats.aio.msg import Msg

from kq import subjects
from kq.runtime import Bus
from kq.visibility import VisibilityAnswer, request_decoder
from services.admission.plan.partition import Partition
from services.admission.plan.visibility import pending_workloads

_encoder = msgspec.json.Encoder()


def answer(partition: Partition, data: bytes) -> VisibilityAnswer:
    try:
        summary = pending_workloads(partition.state, request_decoder.decode(data))
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as e:
        return VisibilityAnswer(error=f"bad request: {e}")
    return VisibilityAnswer(summary=summary, not_found=summary is None)


@contextlib.asynccontextmanager
async def serving_visibility(bus: Bus, partitions: Mapping[str, Partition]) -> AsyncIterator[None]:
    subs = []

    def responder(p: Partition) -> Callable[[Msg], Awaitable[None]]:
        async def respond(msg: Msg) -> None:
            if msg.reply:
                await msg.respond(_encoder.encode(answer(p, msg.data)))
        return respond

    try:
        for cluster, p in partitions.items():
            subs.append(await bus.nc.subscribe(subjects.visibility_subject(cluster), cb=responder(p)))
        yield
    finally:
        for sub in subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
