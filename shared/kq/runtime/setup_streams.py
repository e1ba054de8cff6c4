"""`python -m kq.runtime.setup_streams`: create or update kq's streams, then exit.

On a closed bus the services may not change streams (`nats.ensureStreams: false`); this is the
one step that does, as the bus's admin user (deploy/kq/setup-streams.yaml runs it as a Job with
the kq-setup certificate). Exit 0 when every stream is in place, 1 when the bus refused, 2 for a
bad configuration.
"""

from __future__ import annotations

import asyncio
import sys

from kq.config import ConfigError, load_config
from kq.runtime.bus import Bus

NAME = "kq-setup"


async def _run() -> int:
    try:
        config = load_config()
    except ConfigError as e:
        print(f"kq-setup: {e}", file=sys.stderr)
        return 2
    bus = await Bus.connect(config.nats, NAME, instance=config.instance)
    try:
        await bus.ensure_streams(force=True)
    except Exception as e:  # noqa: BLE001 - said once, with the exit code the Job's backoff acts on
        print(f"kq-setup: streams not set up: {e!r}", file=sys.stderr)
        return 1
    finally:
        await bus.close()
    print("kq-setup: streams ready", flush=True)
    return 0


def main() -> int:
    return asyncio.run(_run())


if __name__ == "__main__":
    raise SystemExit(main())
