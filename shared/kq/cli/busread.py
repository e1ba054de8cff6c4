"""What the CLI reads from the bus: the object mirror (kq get) and decision history (kq describe).

One-shot reads: replay what the stream holds up to now, then stop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec
import nats.js.errors

from kq import subjects
from kq.config import ConfigError, NatsConfig, load_config
from kq.messages import Decision, decision_decoder
from kq.mirror import MirrorView
from kq.runtime.bus import Bus
from kq.runtime.delivery import Delivery

READ_TIMEOUT_S = 10.0


class BusReadError(RuntimeError):
    pass


def stack_nats(url: str, config_file: str | None) -> NatsConfig:
    """How to reach a local stack's bus: its config's `nats:` (a closed bus: TLS and the CLI's own
    user), else just the URL."""
    if config_file and Path(config_file).is_file():
        try:
            return msgspec.structs.replace(load_config(config_file).nats, url=url)
        except ConfigError:
            pass
    return NatsConfig(url=url)


@asynccontextmanager
async def connected(url: str | NatsConfig, *, connect_timeout_s: float = 3.0) -> AsyncIterator[Bus]:
    config = NatsConfig(url=url) if isinstance(url, str) else url
    try:
        bus = await Bus.connect(config, "kq-cli", connect_timeout_s=connect_timeout_s)
    except ConnectionError as e:
        raise BusReadError(f"{e}; is the stack up? (kq up / kq status)") from None
    try:
        yield bus
    finally:
        await bus.close()


async def mirror(bus: Bus, cluster: str, kind: str = "*", *, timeout_s: float = READ_TIMEOUT_S) -> MirrorView:
    """The mirror of one kind (or every kind) in one cluster, as the bus holds it now."""
    view = MirrorView()
    try:
        async with view.replay(bus, cluster, kind) as r:
            await r.wait_caught_up(timeout_s)
    except nats.js.errors.NotFoundError:
        raise BusReadError(f"no {subjects.OBJECTS_STREAM} stream on the bus: no kq watcher has run there") from None
    except TimeoutError as e:
        raise BusReadError(f"reading the mirror: {e}") from None
    return view


class HistoryEntry(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    decision: Decision | None
    error: str = ""  # set when the event could not be decoded (shown, not skipped)


async def history(bus: Bus, cluster: str, kind: str, namespace: str | None, name: str, *,
                  timeout_s: float = READ_TIMEOUT_S) -> list[HistoryEntry]:
    """Every decision recorded about one object, oldest first."""
    entries: list[HistoryEntry] = []

    async def handle(d: Delivery) -> None:
        try:
            entries.append(HistoryEntry(seq=d.stream_seq, decision=decision_decoder.decode(d.data)))
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            entries.append(HistoryEntry(seq=d.stream_seq, decision=None, error=f"{d.subject}: {e}"))

    filt = subjects.event_filter(cluster, kind, namespace, name)
    try:
        async with bus.replay(subjects.EVENTS_STREAM, filt, handle) as r:
            await r.wait_caught_up(timeout_s)
    except nats.js.errors.NotFoundError:
        return []  # no service has recorded a decision yet
    except TimeoutError as e:
        raise BusReadError(f"reading decisions: {e}") from None
    return entries
