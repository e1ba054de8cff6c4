"""The cyclic garbage collector's pace for processes that keep many decoded API objects.

The watcher's caches and kubesim's store hold hundreds of thousands of containers. With CPython's
default first-generation threshold (700 net allocations) the collector ran every few messages and
walked what had survived: 17 % of the watcher's CPU and 10 % of kubesim's in a live benchmark
(`kq bench`, 3,000 workloads). Reference counting frees nearly everything here; the collector is
only there for the rare cycle, so it may wait for far more allocations.
"""

from __future__ import annotations

import gc

CACHE_HEAVY_GC_THRESHOLDS = (20_000, 10, 10)


def pause_for_imports() -> None:
    """Call first in a service's __main__, before its imports: they allocate a great many objects
    and make few cycles, and the collector's passes over them were ~15 % of a service's start-up CPU
    (the watcher's imports, min of 9 runs: 1067 -> 866 ms). tune_gc_for_caches turns it back on."""
    gc.disable()


def tune_gc_for_caches(thresholds: tuple[int, int, int] = CACHE_HEAVY_GC_THRESHOLDS) -> None:
    """Call once, after start-up's imports: what exists by then leaves the collector's walks for
    good (freeze), and collections come less often (`thresholds`)."""
    gc.freeze()
    gc.set_threshold(*thresholds)
    gc.enable()
