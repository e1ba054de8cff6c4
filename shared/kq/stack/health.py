"""Health of each instance of a service (the runtime's `wait_healthy` takes the first answer of any).

A hot standby answers on the same subject as the active instance, so readiness of one
particular instance needs every answer to a request, not just the first.
"""

from __future__ import annotations

import time

import msgspec
import nats.errors
from nats.aio.client import Client

from kq import subjects
from kq.runtime.health import HealthStatus

# A standby is healthy too: it is ready to take over.
HEALTHY = frozenset({"ready", "standby"})
_decoder = msgspec.json.Decoder(HealthStatus)


async def health_answers(nc: Client, service: str, *, window_s: float = 0.25,
                         want_instance: str | None = None) -> dict[str, HealthStatus]:
    """Every answer to one health request within window_s (returns early once want_instance answered)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    answers: dict[str, HealthStatus] = {}
    try:
        await nc.publish(subjects.health_subject(service), b"", reply=inbox)
        deadline = time.monotonic() + window_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = await sub.next_msg(timeout=left)
            except (TimeoutError, nats.errors.TimeoutError):
                break
            try:
                st = _decoder.decode(msg.data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue  # not a health answer; ignore rather than fail the wait
            answers[st.instance] = st
            if want_instance is not None and want_instance in answers:
                break
    finally:
        await sub.unsubscribe()
    return answers


async def instance_status(nc: Client, service: str, instance: str, window_s: float = 0.25) -> HealthStatus | None:
    return (await health_answers(nc, service, window_s=window_s, want_instance=instance)).get(instance)
