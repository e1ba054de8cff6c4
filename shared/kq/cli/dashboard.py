"""`kq dashboard [--host H] [--port P] [--config FILE]`: serve the dashboard page (kq.dashboard) until
interrupted. The bus is the local stack's, or --nats, or the kq config file's (--config, else $KQ_CONFIG
when neither --nats nor --dir is given: how deploy/ runs it beside the services)."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from kq.cli.busread import BusReadError
from kq.cli.target import resolve
from kq.config import ConfigError, NatsConfig, config_path_from_env, load_config

if TYPE_CHECKING:
    from kq.cli.objects import Streams


async def cmd_dashboard(args: argparse.Namespace, io: Streams) -> int:
    from kq.dashboard.server import serving  # aiohttp and the page only load for this command

    config_file = args.config or (None if args.nats or args.dir else config_path_from_env())
    if config_file:
        try:
            config = load_config(config_file)
        except (ConfigError, OSError) as e:
            print(f"error: {e}", file=io.err)
            return 1
        nats, cluster = config.nats, args.cluster or (config.clusters[0].name if config.clusters else "manager")
    else:
        target = resolve(args)
        nats, cluster = NatsConfig(url=target.need_nats()), target.cluster
    try:
        async with serving(nats, cluster, args.host, args.port) as (_, port):
            shown = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
            print(f"kq dashboard for cluster {cluster} on http://{shown}:{port}/", file=io.out, flush=True)
            await asyncio.Event().wait()  # until Ctrl-C / SIGTERM
    except ConnectionError as e:
        raise BusReadError(f"{e}; is the stack up? (kq up / kq status)") from None
    return 0


async def cmd_conversion_webhook(args: argparse.Namespace, io: Streams) -> int:
    """`kq conversion-webhook`: the CRDs' v1beta1 <-> v1beta2 conversion over HTTPS (kq.conversion_webhook)."""
    from kq.conversion_webhook import serving as serving_webhook
    from kq.conversion_webhook import tls_context

    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        print("error: give both --tls-cert-file and --tls-key-file (or neither, for plain HTTP in tests)", file=io.err)
        return 2
    tls = tls_context(args.tls_cert_file, args.tls_key_file) if args.tls_cert_file else None
    async with serving_webhook(args.host, args.port, tls) as port:
        scheme = "https" if tls else "http"
        print(f"kq conversion webhook on {scheme}://{args.host}:{port}/convert", file=io.out, flush=True)
        await asyncio.Event().wait()
    return 0
