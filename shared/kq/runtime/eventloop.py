"""Running a process's event loop: uvloop when it is installed, asyncio's own loop otherwise.

uvloop (libuv) spends far less CPU per socket read/write and timer than the default
selector loop, and the stack is dominated by small messages on local sockets. It is an
optional speed-up: behaviour is the same either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main), on uvloop when it can be imported."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
