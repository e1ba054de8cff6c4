"""A continuous pull from one JetStream consumer: messages flow as they arrive.

nats-py's `fetch(n)` waits until n messages arrived or its timeout passed, which puts
the fetch timeout into every message's latency. This keeps pull requests outstanding
instead (like nats.go's Consume): ask for `batch`, ask again when half has arrived,
and let the caller take whatever is buffered. Idle heartbeats tell us the server still
holds our requests; when they stop (reconnect, server restart) we ask afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError, NotFoundError

from kq.runtime.delivery import Delivery, to_delivery
from kq.runtime.nats_client import LingeringClient

_STATUS = "Status"
_DESCRIPTION = "Description"
_PENDING_MSGS = "Nats-Pending-Messages"


class ConsumerGone(Exception):
    """The consumer was deleted or no longer answers; the caller re-creates it."""


async def create_consumer(
    js: JetStreamContext, stream: str, cfg: api.ConsumerConfig, timeout_s: float = 60.0
) -> api.ConsumerInfo:
    """Create or update a consumer, waiting out a JetStream that is not answering yet
    (restart, leader election); a refused configuration or a missing stream fails at once."""
    deadline = time.monotonic() + timeout_s
    delay = 0.1
    while True:
        try:
            return await js.add_consumer(stream, cfg)
        except (BadRequestError, NotFoundError) as e:
            raise RuntimeError(
                f"cannot create consumer {stream}/{cfg.name}: {e.description} (code {e.err_code})"
            ) from e
        except (TimeoutError, nats.errors.Error):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


class PullStream:
    def __init__(
        self,
        nc: Client,
        stream: str,
        consumer: str,
        *,
        batch: int = 256,
        expires_s: float = 30.0,
        heartbeat_s: float = 5.0,
        api_prefix: str = "$JS.API",
    ) -> None:
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        self._nc = nc
        self.stream = stream
        self.consumer = consumer
        self._batch = batch
        self._expires_ns = int(expires_s * 1e9)
        self._heartbeat_s = heartbeat_s
        self._next_subject = f"{api_prefix}.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self._queue: asyncio.Queue[Msg | ConsumerGone] = asyncio.Queue()
        self._outstanding = 0  # requested and neither delivered nor expired
        self._last_activity = time.monotonic()
        self._wake = asyncio.Event()
        self._inbox = ""
        self._sub: Subscription | None = None
        self._pump_task: asyncio.Task[None] | None = None
        self._gone: ConsumerGone | None = None  # seen behind messages already handed out
        # Our client hands messages into the buffer as the parser reads them (nats_client.py):
        # no task turn per message, and nothing already read is left to wait for in get().
        self._as_read = isinstance(nc, LingeringClient)

    async def start(self) -> None:
        self._inbox = self._nc.new_inbox()
        if self._as_read:
            assert isinstance(self._nc, LingeringClient)
            self._sub = await self._nc.subscribe_messages(self._inbox, self._on_msg)
        else:
            self._sub = await self._nc.subscribe(self._inbox, cb=self._on_msg_async)
        self._pump_task = asyncio.create_task(self._pump(), name=f"pull:{self.stream}/{self.consumer}")

    async def stop(self, *, nak_buffered: bool) -> None:
        """Stop pulling. With nak_buffered, messages taken from the server but never handed
        out are released at once instead of waiting out their ack wait."""
        if self._pump_task is not None:
            self._pump_task.cancel()
            # asyncio.wait: the pump's end is awaited without taking its CancelledError, so a cancel
            # of stop() itself still propagates (a suppress would swallow that one too).
            await asyncio.wait({self._pump_task})
            if not self._pump_task.cancelled():
                self._pump_task.exception()  # retrieved: ended on its own, nothing to report here
        if self._sub is not None:
            # Drain, not unsubscribe: messages the server already sent to our inbox are
            # received (and released below) instead of dropped to wait out their ack wait.
            with contextlib.suppress(Exception):  # connection already closed
                await self._sub.drain()  # type: ignore[no-untyped-call]  # nats-py leaves drain unannotated
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if nak_buffered and isinstance(item, Msg) and item.reply and not self._nc.is_closed:
                try:
                    await self._nc.publish(item.reply, b"-NAK")
                except Exception:
                    break

    async def _on_msg_async(self, msg: Msg) -> None:
        self._on_msg(msg)

    def _on_msg(self, msg: Msg) -> None:
        self._last_activity = time.monotonic()
        headers = msg.headers
        status = headers.get(_STATUS) if headers and not msg.data else None
        if status is None:
            self._outstanding -= 1
            self._queue.put_nowait(msg)
            if self._outstanding <= self._batch // 2:
                self._wake.set()
            return
        if status == "100":  # idle heartbeat (or flow control, unused for pull)
            return
        if status in ("408", "409") and headers and _PENDING_MSGS in headers:
            # A request expired or ended early; its undelivered part no longer counts.
            self._outstanding -= int(headers[_PENDING_MSGS])
            self._wake.set()
            description = headers.get(_DESCRIPTION, "")
            if status == "409" and "Deleted" in description:
                self._queue.put_nowait(ConsumerGone(f"consumer {self.stream}/{self.consumer}: {description}"))
            return
        if status == "409":
            description = headers.get(_DESCRIPTION, "") if headers else ""
            if "Deleted" in description or "Leadership" in description:
                self._queue.put_nowait(ConsumerGone(f"consumer {self.stream}/{self.consumer}: {description}"))
            else:  # e.g. Exceeded MaxWaiting: ask again later
                self._outstanding = 0
                self._wake.set()
            return
        if status in ("404", "408"):
            return
        if status == "503":  # no responders: the consumer (or JetStream) is not there
            self._queue.put_nowait(ConsumerGone(f"consumer {self.stream}/{self.consumer}: no responders"))
            return
        description = headers.get(_DESCRIPTION, "") if headers else ""
        self._queue.put_nowait(ConsumerGone(f"consumer {self.stream}/{self.consumer}: status {status} {description}"))

    async def _pump(self) -> None:
        hb_ns = int(self._heartbeat_s * 1e9)
        reconnects = self._nc.stats["reconnects"]
        while True:
            if self._nc.stats["reconnects"] != reconnects:  # requests died with the old connection
                reconnects = self._nc.stats["reconnects"]
                self._outstanding = 0
            if self._nc.is_connected:
                buffered = self._queue.qsize()
                if self._outstanding <= self._batch // 2 and buffered < self._batch:
                    want = self._batch - max(self._outstanding, 0)
                    req = {"batch": want, "expires": self._expires_ns, "idle_heartbeat": hb_ns}
                    try:
                        await self._nc.publish(self._next_subject, json.dumps(req).encode(), reply=self._inbox)
                        self._outstanding = max(self._outstanding, 0) + want
                        self._last_activity = time.monotonic()
                    except Exception:
                        pass  # disconnected between the check and the publish: try on the next round
            self._wake.clear()
            try:
                # Not wait_for: on 3.11 it swallows a cancel that lands as _wake is set (get() sets it
                # after every batch), and stop() then awaited this loop forever.
                async with asyncio.timeout(min(1.0, self._heartbeat_s)):
                    await self._wake.wait()
            except TimeoutError:
                if self._outstanding > 0 and time.monotonic() - self._last_activity > 2 * self._heartbeat_s:
                    self._outstanding = 0  # the server lost our requests (reconnect/restart)

    async def get(self, max_n: int) -> list[Delivery]:
        """Wait for at least one message; return up to max_n already here."""
        if self._gone is not None:
            raise self._gone
        item: Msg | ConsumerGone = await self._queue.get()
        if self._queue.empty() and max_n > 1 and not self._as_read:
            await asyncio.sleep(0)  # let messages already read off the socket join this batch
        return self._take_from(item, max_n)

    def take(self, max_n: int) -> list[Delivery]:
        """Up to max_n messages already here, without waiting (none: [])."""
        if self._gone is not None:
            raise self._gone
        if max_n < 1 or self._queue.empty():
            return []
        return self._take_from(self._queue.get_nowait(), max_n)

    def _take_from(self, item: Msg | ConsumerGone, max_n: int) -> list[Delivery]:
        items: list[Msg] = []
        while True:
            if isinstance(item, ConsumerGone):
                if not items:
                    raise item
                self._gone = item  # hand out what came before; the next call raises
                break
            items.append(item)
            if len(items) >= max_n or self._queue.empty():
                break
            item = self._queue.get_nowait()
        if self._outstanding <= self._batch // 2:
            self._wake.set()
        return [to_delivery(m) for m in items]
