"""The watcher's own knobs. Defaults serve the local stack; tests pass their own.

kq.config.Config has no watcher section yet, so these are not read from the
config file; main() takes them as an argument (see service.py).
"""

from __future__ import annotations

import msgspec

from kq.api.registry import KINDS

# Never on the bus: Secrets (MultiKueue kubeconfigs are read only by the dispatcher and gc,
# straight from the API server).
NEVER_MIRRORED = ("secret",)


class WatcherSettings(msgspec.Struct, frozen=True, kw_only=True):
    skip_kinds: tuple[str, ...] = ()  # lower-case kind tokens not to mirror, e.g. ("pod",)
    publish_batch: int = 512  # mirror records per publish round
    publish_queue: int = 20_000  # records waiting to be published before list/watch loops wait
    watch_timeout_s: float = 300.0  # the server ends each watch after this; we resume from the last rv
    retry_base_s: float = 0.2  # first backoff after an API error (doubles up to retry_max_s)
    retry_max_s: float = 5.0
    command_batch: int = 64
    command_concurrency: int = 64  # objects whose commands are applied at once
    command_pipeline: int = 16  # command batches handled at once (a slow object does not hold up the next batch)
    max_replans: int = 10  # 409 -> re-read -> re-plan rounds for one command before naking it
    job_workers: int = 8
    max_job_steps: int = 8  # writes in a row for one job before re-queueing it

    def mirrored_kinds(self) -> list[str]:
        skip = {s.lower() for s in self.skip_kinds} | set(NEVER_MIRRORED)
        return [i.token for i in KINDS if i.token not in skip]
