"""A process the bench started itself (the podsready service, an example dispatcher): stopped with
SIGTERM, killed if it outlasts its grace."""

from __future__ import annotations

import asyncio
import contextlib


async def stop_child(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):  # it may end on its own meanwhile
        proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
