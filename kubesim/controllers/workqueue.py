"""A de-duplicating work queue drained on the next event-loop turn.

Store listeners only add keys here; the work runs outside the store's commit, so a
controller's own writes never re-enter it, and a burst of changes to one object
is reconciled once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from kubesim.errors import ApiError

K = TypeVar("K", bound=Hashable)
log = logging.getLogger("kubesim")


class WorkQueue(Generic[K]):
    def __init__(self, name: str, handle_batch: Callable[[list[K]], None]) -> None:
        self._name = name
        self._handle = handle_batch
        self._dirty: dict[K, None] = {}  # insertion-ordered set
        self._scheduled = False
        self._closed = False

    def add(self, key: K) -> None:
        if self._closed:
            return
        self._dirty[key] = None
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._run)

    def pending(self) -> int:
        return len(self._dirty)

    def close(self) -> None:
        self._closed = True
        self._dirty.clear()

    def _run(self) -> None:
        self._scheduled = False
        if self._closed or not self._dirty:
            return
        keys = list(self._dirty)
        self._dirty.clear()
        try:
            self._handle(keys)
        except Exception:  # a controller bug must not stop the cluster; it is logged loudly
            log.exception("kubesim %s controller failed on %d keys", self._name, len(keys))


def per_key(fn: Callable[[K], None], name: str) -> Callable[[list[K]], None]:
    """Adapt a one-key reconcile to a batch handler; one failing key does not stop the others."""

    def run(keys: list[K]) -> None:
        for k in keys:
            try:
                fn(k)
            except ApiError as e:  # e.g. creating in a namespace being deleted: the next change retries
                log.warning("kubesim %s controller: %r: %s %s", name, k, e.code, e.message)
            except Exception:
                log.exception("kubesim %s controller failed on %r", name, k)

    return run
