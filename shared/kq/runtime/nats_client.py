"""nats-py's client with a flusher that lingers a moment before it writes.

nats-py writes what was published to the socket once per wake-up of its flusher task: a publish
wakes the flusher, which runs on the next turn of the event loop. A busy service publishes from
many tasks in many turns (a command group's outcome, a mirror round, a consumer's acks and pull
requests), so most writes carried a message or two: the socket writes were ~15 % of the watcher's
and of admission's CPU (py-spy, session 6), and each is a wake-up of nats-server too. Lingering
`LINGER_S` before writing lets what is published meanwhile go in the same write: at most one
write per linger, a delay far below any hop's other costs. pyproject.toml pins nats-py's minor
version: `_flusher` is the library's own loop (2.16), only the linger is added.
"""

from __future__ import annotations

import asyncio

from nats.aio.client import Client

LINGER_S = 0.001


class LingeringClient(Client):
    async def _flusher(self) -> None:
        assert self._transport, "Client.connect must be called first"
        assert self._flush_queue, "Client.connect must be called first"
        while True:
            if not self.is_connected or self.is_connecting:
                break
            future: asyncio.Future[None] = await self._flush_queue.get()
            try:
                await asyncio.sleep(LINGER_S)  # what is published meanwhile joins this write
                if self._pending_data_size > 0:
                    self._transport.writelines(self._pending[:])
                    self._pending = []
                    self._pending_data_size = 0
                    await self._transport.drain()  # type: ignore[no-untyped-call]  # nats-py leaves it unannotated
            except OSError as e:
                await self._error_cb(e)
                await self._process_op_err(e)
                break
            except (asyncio.CancelledError, RuntimeError, AttributeError):
                break
            finally:
                if not future.done():
                    future.set_result(None)
