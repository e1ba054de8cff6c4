"""Bounded polling for asynchronous effects: no sleeps as synchronisation in tests."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


# What comes back is the probe's first truthy value, so never None.
@overload
async def eventually(
    probe: Callable[[], Awaitable[T | None]], timeout: float = ..., interval: float = ..., what: str = ...
) -> T: ...
@overload
async def eventually(
    probe: Callable[[], T | None], timeout: float = ..., interval: float = ..., what: str = ...
) -> T: ...
async def eventually(
    probe: Callable[[], Any],
    timeout: float = 5.0,
    interval: float = 0.02,
    what: str = "",
) -> Any:
    """Call `probe` (sync or async) until it returns something truthy and return that.

    An AssertionError (or other exception) raised by the probe counts as "not yet".
    On timeout, fails with the last value or error seen.
    """
    deadline = time.monotonic() + timeout
    last: Any = "<never called>"
    while True:
        try:
            value = probe()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
            last = value
        except Exception as e:  # noqa: BLE001 - a failing probe is "not yet"
            last = e
        if time.monotonic() >= deadline:
            label = f" ({what})" if what else ""
            raise AssertionError(f"condition not met within {timeout}s{label}; last seen: {last!r}")
        await asyncio.sleep(interval)
