"""A coroutine run in the background for the length of a `with` block, and stopped after."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager


@asynccontextmanager
async def running(coro: Awaitable[None]) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.ensure_future(coro)
    try:
        yield task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
