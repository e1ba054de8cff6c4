"""The watcher's settings are the `watcher:` section of kq's config file (kq.config.WatcherConfig);
this name stays for the code and tests that pass their own."""

from __future__ import annotations

from kq.config import KQ_NAMESPACE, WatcherConfig

WatcherSettings = WatcherConfig

__all__ = ["KQ_NAMESPACE", "WatcherSettings"]
