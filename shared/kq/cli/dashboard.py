"""`kq dashboard [--host H] [--port P]`: serve the dashboard page (kq.dashboard) until interrupted."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from kq.cli.busread import BusReadError
from kq.cli.target import resolve

if TYPE_CHECKING:
    from kq.cli.objects import Streams


async def cmd_dashboard(args: argparse.Namespace, io: Streams) -> int:
    from kq.dashboard.server import serving  # aiohttp and the page only load for this command

    target = resolve(args)
    try:
        async with serving(target.need_nats(), target.cluster, args.host, args.port) as (_, port):
            shown = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
            print(f"kq dashboard for cluster {target.cluster} on http://{shown}:{port}/", file=io.out, flush=True)
            await asyncio.Event().wait()  # until Ctrl-C / SIGTERM
    except ConnectionError as e:
        raise BusReadError(f"{e}; is the stack up? (kq up / kq status)") from None
    return 0
