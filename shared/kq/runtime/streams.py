"""The JetStream streams and the lease bucket every kq service relies on, created idempotently.

| stream      | subjects                          | retention                                     |
|-------------|-----------------------------------|-----------------------------------------------|
| KQ_OBJECTS  | kq.v1.obj.>, kq.v1.sync.>         | last message per subject (mirror; tombstones) |
| KQ_CMD      | kq.v1.cmd.>                       | work queue, 1 GiB; full: refuses new commands |
| KQ_EVENTS   | kq.v1.evt.>, kq.v1.out.>, .dlq.>  | limits: 7 days, 1 GiB                         |
| KQ_MK       | kq.v1.mk.>                        | limits: 7 days, 256 MiB                       |
| KQ_TIMERS   | kq.v1.timer.>                     | last per subject, 1 day: durable timers       |
| KV KQ_LEASES| $KV.KQ_LEASES.>                   | one value per key, per-message TTL            |

KQ_EVENTS and KQ_MK allow JetStream message schedules (timers that survive restarts:
`Nats-Schedule: @at <time>`, `Nats-Schedule-Target: <subject in the same stream>`).
KQ_TIMERS holds services' timers: one schedule per timer subject (replaced by publishing again,
cancelled by purging it) firing into a `kq.v1.timer.fire.` subject the service consumes.
KQ_OBJECTS allows per-message TTL so tombstones may carry `Nats-TTL`.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from nats.js import JetStreamContext, api
from nats.js.errors import APIError, NotFoundError

from kq import subjects
from kq.config import NatsConfig

DAY_S = 24 * 3600.0
EVENTS_MAX_AGE_S = 7 * DAY_S
EVENTS_MAX_BYTES = 1 << 30
MK_MAX_AGE_S = 7 * DAY_S
MK_MAX_BYTES = 256 << 20
TIMERS_MAX_AGE_S = DAY_S
TIMERS_MAX_BYTES = 256 << 20
COMMANDS_MAX_BYTES = 1 << 30
# Leases carry their own TTL (Nats-TTL); the bucket age only clears values written without one.
LEASE_BUCKET_MAX_AGE_S = 300.0
LEASE_STREAM = f"KV_{subjects.LEASE_BUCKET}"
LEASE_PREFIX = f"$KV.{subjects.LEASE_BUCKET}."
MK_ALL = f"{subjects.PREFIX}.mk.>"  # subjects.py has the per-object MK subjects only

_ALREADY_IN_USE = 10058  # stream name already in use with a different configuration


class StreamSetupError(RuntimeError):
    pass


def stream_configs(config: NatsConfig) -> list[api.StreamConfig]:
    common: dict[str, Any] = {
        "storage": api.StorageType.FILE,
        "num_replicas": config.stream_replicas,
        "duplicate_window": config.duplicate_window_s,
    }
    return [
        api.StreamConfig(
            name=subjects.OBJECTS_STREAM,
            description="kq mirror: the last state of every object (delete = tombstone), and list-sync markers",
            subjects=[subjects.OBJECTS_ALL, subjects.SYNC_ALL],
            retention=api.RetentionPolicy.LIMITS,
            max_msgs_per_subject=1,
            discard=api.DiscardPolicy.OLD,
            allow_msg_ttl=True,
            allow_direct=True,
            **common,
        ),
        api.StreamConfig(
            name=subjects.COMMANDS_STREAM,
            description="kq commands to the watcher (work queue)",
            subjects=[subjects.COMMANDS_ALL],
            retention=api.RetentionPolicy.WORK_QUEUE,
            max_bytes=COMMANDS_MAX_BYTES,
            # Full (the watcher far behind): the publisher's PubAck fails and it backs off. The
            # default, discard old, would silently drop the oldest commands not yet applied.
            discard=api.DiscardPolicy.NEW,
            **common,
        ),
        api.StreamConfig(
            name=subjects.EVENTS_STREAM,
            description="kq decisions with reasons, command outcomes, dead letters",
            subjects=[subjects.EVENTS_ALL, subjects.OUTCOMES_ALL, subjects.DEAD_LETTERS_ALL],
            retention=api.RetentionPolicy.LIMITS,
            max_age=EVENTS_MAX_AGE_S,
            max_bytes=EVENTS_MAX_BYTES,
            allow_msg_schedules=True,
            **common,
        ),
        api.StreamConfig(
            name=subjects.MK_STREAM,
            description="kq MultiKueue pending workloads and nominations",
            subjects=[MK_ALL],
            retention=api.RetentionPolicy.LIMITS,
            max_age=MK_MAX_AGE_S,
            max_bytes=MK_MAX_BYTES,
            allow_msg_schedules=True,
            **common,
        ),
        api.StreamConfig(
            name=subjects.TIMERS_STREAM,
            description="kq durable timers: message schedules and the messages they fire",
            subjects=[subjects.TIMERS_ALL],
            retention=api.RetentionPolicy.LIMITS,
            max_msgs_per_subject=1,
            max_age=TIMERS_MAX_AGE_S,
            max_bytes=TIMERS_MAX_BYTES,
            allow_msg_schedules=True,
            **common,
        ),
    ]


def lease_bucket_config(config: NatsConfig) -> api.StreamConfig:
    """The KV bucket's backing stream, as nats-py's create_key_value would build it, plus TTLs."""
    return api.StreamConfig(
        name=LEASE_STREAM,
        description="kq writer leases (one active writer per partition)",
        subjects=[f"{LEASE_PREFIX}>"],
        retention=api.RetentionPolicy.LIMITS,
        max_msgs_per_subject=1,
        max_age=LEASE_BUCKET_MAX_AGE_S,
        discard=api.DiscardPolicy.NEW,
        allow_rollup_hdrs=True,
        allow_msg_ttl=True,
        allow_direct=True,
        deny_delete=True,
        max_consumers=-1,
        max_msgs=-1,
        storage=api.StorageType.FILE,
        num_replicas=config.stream_replicas,
        duplicate_window=min(config.duplicate_window_s, LEASE_BUCKET_MAX_AGE_S),
    )


_STORE_NOT_READY = 10049  # "error creating store for stream": the server still removes a deleted one


async def _add_or_update(js: JetStreamContext, cfg: api.StreamConfig) -> None:
    for attempt in range(50):
        try:
            await js.add_stream(cfg)
            return
        except APIError as e:
            if e.err_code == _STORE_NOT_READY and attempt < 49:
                await asyncio.sleep(0.1)  # bounded: a stream deleted just before is still being removed
                continue
            await _exists_or_fail(js, cfg, e)
            return


async def _exists_or_fail(js: JetStreamContext, cfg: api.StreamConfig, e: APIError) -> None:
    """The stream exists: bring its configuration up to date, or say why we cannot."""
    if e.err_code != _ALREADY_IN_USE:
        raise StreamSetupError(f"creating stream {cfg.name}: {e.description} (code {e.err_code})") from e
    try:
        await js.update_stream(cfg)
    except APIError as e2:
        raise StreamSetupError(
            f"stream {cfg.name} exists with a configuration that cannot be changed to ours: "
            f"{e2.description} (code {e2.err_code})"
        ) from e2


async def ensure_streams(js: JetStreamContext, config: NatsConfig) -> None:
    """Create (or bring up to date) every kq stream and the lease bucket. Safe to call concurrently."""
    for cfg in stream_configs(config):
        await _add_or_update(js, cfg)
    await _add_or_update(js, lease_bucket_config(config))


async def delete_all_streams(js: JetStreamContext) -> list[str]:
    """Delete every stream (KV buckets included). For tests and `kq` dev tooling only."""
    names = [si.config.name for si in await js.streams_info() if si.config.name]
    for name in sorted(names):
        with contextlib.suppress(NotFoundError):
            await js.delete_stream(name)
    return sorted(names)
